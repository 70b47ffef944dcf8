"""A pod deleted and created again under its name (a StatefulSet-like runtime, a pod name given again) is another
pod, for the Prometheus source too. Prometheus names a pod's series by namespace and pod name only, and the source
joined them to the pods discovery lists by those two alone: the old pod's series, still within Prometheus's
lookback (no staleness marker yet: its target not yet gone from Prometheus's discovery; Thanos, Mimir and
VictoriaMetrics keep none), were read as the new, empty pod's fresh load, and the old pod's last good sample was
held for the new pod while it had no series. A new pod was served with the old pod's load.

A pod's own series cannot be older than the pod: its exporter runs in it. So a reading sampled before the pod
was created (`PodTarget.created_at`) is an earlier pod's, and what is held of a pod is held for that pod object
(its uid, its creation time) alone.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pytest_aiohttp import AiohttpServer

from autoscaler.model import PodSample, RuntimeSnapshot
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.prometheus import PrometheusSource
from autoscaler.sources.prometheus_pod_objects import of_this_pod
from tests.sources.conftest import StartPrometheus
from tests.sources.prometheus_stub import Answers, answering_prometheus, series_at
from tests.sources.static_discovery import StaticDiscovery
from tests.sources.test_prometheus_source import AGE_S, TRITON, by_pod, exporter_series, signals

LONG_AGO_S = 3600.0


def runtime(now: float, a1_uid: str, a1_created_at: float) -> RuntimeInventory:
    """TRITON's two pods: a-2, up for an hour, and a-1, the pod object `a1_uid` created at `a1_created_at`."""
    return RuntimeInventory(TRITON, (
        PodTarget(name="a-1", ready=True, url=None, created_at=a1_created_at, uid=a1_uid),
        PodTarget(name="a-2", ready=True, url=None, created_at=now - LONG_AGO_S, uid="a-2"),
    ), replicas=2)


def read(snapshots: list[RuntimeSnapshot], pod: str) -> tuple[float | None, float | None]:
    """The pod's load reading as the source gives it: (sampled_at, requests_per_second)."""
    sample = by_pod(snapshots)[TRITON.namespace, pod]
    return sample.sampled_at, sample.requests_per_second


@pytest.mark.slow
async def test_an_earlier_pods_series_are_not_read_as_the_new_pods_load(
        start_prometheus: StartPrometheus, sources: list[PrometheusSource], now: float) -> None:
    """a-1 ran hot (40 requests a second) until it was deleted; its successor, created 3 s ago, has not been
    scraped yet and serves nothing. Prometheus still answers the old a-1's series, scraped 10 s ago."""
    at = now - AGE_S
    prom = await start_prometheus([
        *exporter_series("team-a", "a-1", at, signals(40, 0.2, 3, 0.95, 9), gpus=[0.9], last_success=at),
        *exporter_series("team-a", "a-2", at, signals(10, 0.0, 0, 0.5, 2), gpus=[0.3], last_success=at),
    ])
    discovery = StaticDiscovery([runtime(now, "a-1-old", now - LONG_AGO_S)])
    source = PrometheusSource(discovery, prom.url)
    sources.append(source)
    assert read(await source.collect(now), "a-1") == pytest.approx((at, 40.0), abs=1e-3)  # the old pod: its own

    discovery.set_runtime(runtime(now, "a-1-new", now - 3))  # deleted, and created again 3 s ago
    snapshots = await source.collect(now + 1)

    assert read(snapshots, "a-1") == (None, None), by_pod(snapshots)[TRITON.namespace, "a-1"]
    new = by_pod(snapshots)[TRITON.namespace, "a-1"]
    assert new.gpu_busy is None and new.gpu_sampled_at is None, new
    assert read(snapshots, "a-2") == pytest.approx((at, 10.0), abs=1e-3)  # the other pod as always


async def a1_created_again(aiohttp_server: AiohttpServer, sources: list[PrometheusSource], now: float,
                           old_created_at: float, new_created_at: float
                           ) -> tuple[list[RuntimeSnapshot], list[RuntimeSnapshot]]:
    """Two collects: with the old a-1 (created at `old_created_at`) answering 40 requests a second, then (5 s on)
    with its successor (created at `new_created_at`) in discovery and the old pod's series gone from the answers."""
    answers: Answers = {}
    discovery = StaticDiscovery([runtime(now, "a-1-old", old_created_at)])
    source = PrometheusSource(discovery, await answering_prometheus(aiohttp_server, answers))
    sources.append(source)
    freshness, _gpu, rps, *_ = source.queries
    series = series_at(TRITON.namespace, now)
    answers[freshness] = [series("a-1", now), series("a-2", now)]
    answers[rps] = [series("a-1", 40.0), series("a-2", 10.0)]
    before = await source.collect(now)

    discovery.set_runtime(runtime(now, "a-1-new", new_created_at))
    answers[freshness] = [series("a-2", now + 5)]
    answers[rps] = [series("a-2", 10.0)]
    return before, await source.collect(now + 5)


async def test_an_earlier_pods_last_sample_is_not_held_for_the_new_pod(
        aiohttp_server: AiohttpServer, sources: list[PrometheusSource], now: float) -> None:
    """The old a-1's series are gone from the answers (stale once its target went) and its successor is not
    scraped yet: the old a-1's last good sample, 5 s old, was held for the new pod and read as fresh."""
    before, snapshots = await a1_created_again(aiohttp_server, sources, now, now - LONG_AGO_S, now + 2)

    assert read(before, "a-1") == (now, 40.0)
    assert read(snapshots, "a-1") == (None, None), by_pod(snapshots)[TRITON.namespace, "a-1"]
    assert read(snapshots, "a-2") == (now + 5, 10.0)


async def test_a_pod_created_again_in_the_same_second_is_told_by_its_uid(
        aiohttp_server: AiohttpServer, sources: list[PrometheusSource], now: float) -> None:
    """Creation times are whole seconds: a pod deleted and created again within one has the same; its uid is
    another."""
    created = float(int(now - LONG_AGO_S))
    _, snapshots = await a1_created_again(aiohttp_server, sources, now, created, created)

    assert read(snapshots, "a-1") == (None, None)


times = st.one_of(st.none(), st.floats(1e9, 2e9))


@settings(max_examples=300, deadline=None)
@given(sampled_at=times, gpu_sampled_at=times, created_at=times, rps=st.floats(0, 1e3), busy=st.floats(0, 1))
def test_no_reading_from_before_the_pod_is_read_and_none_after_it_is_lost(
        sampled_at: float | None, gpu_sampled_at: float | None, created_at: float | None, rps: float,
        busy: float) -> None:
    sample = PodSample("a-1", sampled_at=sampled_at, requests_per_second=rps,
                       gpu_sampled_at=gpu_sampled_at, gpu_busy=None if gpu_sampled_at is None else busy)
    kept = of_this_pod(sample, created_at)

    def own(at: float | None) -> bool:
        return at is not None and (created_at is None or at >= created_at)

    load = kept is not None and kept.sampled_at is not None
    gpu = kept is not None and kept.gpu_sampled_at is not None
    assert load == own(sampled_at) and gpu == own(gpu_sampled_at), kept
    if load:
        assert kept is not None and (kept.sampled_at, kept.requests_per_second) == (sampled_at, rps)
    if gpu:
        assert kept is not None and (kept.gpu_sampled_at, kept.gpu_busy) == (gpu_sampled_at, busy)
