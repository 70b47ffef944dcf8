"""The packed snapshot a serving worker reads in place (`autoscaler.api.packed`): every answer comes back
byte-identical after the trip through shared memory, and a swap while requests look answers up gives each
request the old or the new snapshot's answers, never a mix."""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.api import packed
from autoscaler.api.app import build_api_app
from autoscaler.api.debug_document import explanation
from autoscaler.api.handlers import metric_answers
from autoscaler.api.render import render_snapshot
from autoscaler.api.runtimes import keda_answer
from autoscaler.api.snapshot import EMPTY, KEDA, METRICS, RuntimeAnswers, ServingSnapshot, SnapshotHolder
from autoscaler.model import RuntimeKey
from autoscaler.selfmetrics import AdapterMetrics
from tests.api.builders import runtime_view


def through_shared_memory(snapshot: ServingSnapshot) -> ServingSnapshot:
    """What a worker gets: packed by the refresh side, passed as a memfd over a real pipe, mapped."""
    ours, theirs = multiprocessing.Pipe(duplex=True)
    fd = packed.share(packed.pack(snapshot))
    try:
        packed.send(ours, fd)
    finally:
        os.close(fd)
    try:
        return packed.receive(theirs)
    finally:
        ours.close()
        theirs.close()


def test_a_snapshot_of_5000_runtimes_arrives_byte_identical() -> None:
    views = {}
    for number in range(5000):
        key = RuntimeKey(f"team-{number % 37}", f"modelmesh-serving-{number}")
        views[key] = runtime_view(key, fresh=number % 5 != 0)  # every fifth one stale: 503 answers
    sent = render_snapshot(views, True, b"# HELP mm_autoscaler_refreshes_total ...\n")

    got = through_shared_memory(sent)

    assert got.ready and got.refresh_metrics == sent.refresh_metrics
    assert len(got.runtimes) == 5000 and set(got.runtimes) == set(sent.runtimes)
    for runtime, answers in sent.runtimes.items():
        assert got.runtimes[runtime] == answers
    assert got.runtimes.get(("team-0", "no-such-runtime")) is None
    with pytest.raises(KeyError):
        got.runtimes["team-0", "no-such-runtime"]


answer = st.tuples(st.sampled_from([200, 404, 503]), st.binary(max_size=64),
                   st.none() | st.floats(min_value=0, max_value=1e6))
runtime_answers = st.builds(RuntimeAnswers, st.tuples(*[answer] * len(METRICS)), answer, st.binary(max_size=200))
snapshots = st.builds(ServingSnapshot, st.booleans(),
                      st.dictionaries(st.tuples(st.text(min_size=1, max_size=20).filter(lambda s: "\0" not in s),
                                                st.text(min_size=1, max_size=20).filter(lambda s: "\0" not in s)),
                                      runtime_answers, max_size=40),
                      st.binary(max_size=100))


@settings(max_examples=60, deadline=None)
@given(snapshots)
def test_any_snapshot_packs_and_unpacks_to_equal_answers(snapshot: ServingSnapshot) -> None:
    got = packed.unpack(packed.pack(snapshot))
    assert (got.ready, got.refresh_metrics) == (snapshot.ready, snapshot.refresh_metrics)
    assert dict(got.runtimes) == snapshot.runtimes
    for key, answers in snapshot.runtimes.items():  # what a request reads: one answer, or the /debug record
        assert [got.runtimes.answer(key, which) for which in range(KEDA + 1)] == [*answers.metrics, answers.keda]
        assert got.runtimes.debug_record(key) == answers.debug
    assert got.runtimes.answer(("no", "such runtime"), 0) is None
    assert got.runtimes.debug_record(("no", "such runtime")) is None


def test_a_request_during_swaps_gets_the_old_or_the_new_answers_never_a_mix() -> None:
    keys = [("ml", f"runtime-{number}") for number in range(50)]
    old = render_snapshot({RuntimeKey(*key): runtime_view(RuntimeKey(*key)) for key in keys}, True)
    new = render_snapshot({RuntimeKey(*key): runtime_view(RuntimeKey(*key), fresh=False) for key in keys},
                          True)  # every answer differs: stale, so 503
    old_received, new_received = through_shared_memory(old), through_shared_memory(new)
    holder = SnapshotHolder(old_received)
    stop = threading.Event()

    def swap() -> None:  # as the worker's receiving side would, as fast as it can
        both, turn = (new_received, old_received), 0
        while not stop.is_set():
            holder.current = both[turn % 2]
            turn += 1

    swapper = threading.Thread(target=swap)
    swapper.start()
    seen = set()
    try:
        for lookup in range(20_000):
            key = keys[lookup % len(keys)]
            answers = holder.current.runtimes[key]
            was_old, was_new = answers == old.runtimes[key], answers == new.runtimes[key]
            assert was_old or was_new
            seen.add(was_old)
            which = lookup % (KEDA + 1)
            one = holder.current.runtimes.answer(key, which)  # what a request reads
            assert one in (old.runtimes.answer(key, which), new.runtimes.answer(key, which))
    finally:
        stop.set()
        swapper.join()
    assert seen == {True, False}  # both snapshots were served while swapping


def test_an_answer_outlives_the_snapshot_it_came_from() -> None:
    """A request that looked its answer up keeps valid bytes after the snapshot (and its mapping) is gone."""
    key = RuntimeKey("ml", "modelmesh-serving-triton")
    sent = render_snapshot({key: runtime_view(key)}, True)
    holder = SnapshotHolder(through_shared_memory(sent))
    answers = holder.current.runtimes[key.namespace, key.deployment]
    holder.current = through_shared_memory(render_snapshot({}, True))
    gc.collect()
    assert answers == sent.runtimes[key.namespace, key.deployment]


def test_a_blob_that_is_not_a_packed_snapshot_is_refused_clearly() -> None:
    with pytest.raises(packed.PackError, match="not a packed snapshot"):
        packed.unpack(b"\x80\x05" + b"x" * 100)
    with pytest.raises(packed.PackError, match="at least"):
        packed.unpack(b"short")
    whole = packed.pack(render_snapshot({RuntimeKey("ml", "a"): runtime_view(RuntimeKey("ml", "a"))}, True))
    with pytest.raises(packed.PackError, match="truncated"):
        packed.unpack(whole[:100])


def test_the_receiver_sees_end_of_file_when_the_refresh_process_has_gone() -> None:
    ours, theirs = multiprocessing.Pipe(duplex=True)
    ours.close()
    with pytest.raises(EOFError):
        packed.receive(theirs)
    theirs.close()


def snapshot_mappings() -> int:
    with open("/proc/self/maps") as maps:
        return sum("mm-autoscaler-snapshot" in line for line in maps)


def test_swapping_releases_the_previous_mapping() -> None:
    """A worker swaps a snapshot in every refresh for weeks: each old mapping must go, not pile up."""
    key = RuntimeKey("ml", "modelmesh-serving-triton")
    snapshot = render_snapshot({key: runtime_view(key)}, True)
    holder = SnapshotHolder()
    before = snapshot_mappings()
    for _ in range(20):
        holder.current = through_shared_memory(snapshot)
    gc.collect()
    assert snapshot_mappings() - before == 1  # only the current one
    holder.current = EMPTY
    gc.collect()
    assert snapshot_mappings() == before


async def test_a_worker_serves_each_answer_as_the_refresh_made_it(aiohttp_client: Any) -> None:
    """Through shared memory to a worker's app: every metric, KEDA and /debug answer, byte for byte; /debug
    being written from its compact record only when asked."""
    fresh, stale = RuntimeKey("ml", "modelmesh-serving-triton"), RuntimeKey("ml", "modelmesh-serving-stale")
    views = {fresh: runtime_view(fresh), stale: runtime_view(stale, fresh=False)}
    holder = SnapshotHolder(through_shared_memory(render_snapshot(views, True)))
    client = await aiohttp_client(build_api_app(holder, AdapterMetrics()))
    for key, view in views.items():
        for metric, (status, body, _) in zip(METRICS, metric_answers(view, METRICS), strict=True):
            async with client.get(f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{key.namespace}/"
                                  f"{metric.value}?labelSelector=deployment={key.deployment}") as response:
                assert (response.status, await response.read()) == (status, body)
        async with client.get(f"/keda/v1/namespaces/{key.namespace}/runtimes/{key.deployment}") as response:
            assert (response.status, await response.read()) == keda_answer(view)[:2]
        async with client.get(f"/debug/runtimes/{key.namespace}/{key.deployment}") as response:
            assert (response.status, await response.read()) == (200, json.dumps(explanation(view)).encode())
    async with client.get("/debug/runtimes/ml/no-such-runtime") as response:
        assert response.status == 404
