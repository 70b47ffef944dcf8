"""The Prometheus source and a pod whose GPU busy leaves the answer while its load is read (its exporter's GPU
collector failing: the query drops a pod whose collector says so; DCGM's series gone). Was: the pod had no GPU busy,
so it dropped out of the GPU's power mean and an idle pod's GPU lost raised `modelmesh_gpu_busy` (0.60 over the
pods left, from 0.52). Its last good GPU busy is kept, at its own old time (docs/design.md, Missing data), so it
counts at that value and turns stale with age, as a pod gone from the answer does."""

from __future__ import annotations

import pytest
from pytest_aiohttp import AiohttpServer

from autoscaler.policies.aggregation import aggregate
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.sources.prometheus import PrometheusSource
from autoscaler.sources.prometheus_promql import GpuSource
from tests.sources.prometheus_stub import answering_prometheus, series_at, two_pods
from tests.sources.test_prometheus_source import TRITON


@pytest.mark.parametrize("gpu_source", ["exporter", "dcgm"])
async def test_a_pod_whose_gpu_busy_leaves_the_answer_keeps_its_last_one_at_its_old_time(
        aiohttp_server: AiohttpServer, sources: list[PrometheusSource], now: float, gpu_source: GpuSource) -> None:
    answers: dict[str, list[dict[str, object]]] = {}
    source = PrometheusSource(two_pods(TRITON), await answering_prometheus(aiohttp_server, answers),
                              gpu_source=gpu_source)
    sources.append(source)
    freshness, gpu, rps, *_, gpu_freshness = source.queries[:9]  # the signals' (`build_queries`), not the models'
    series = series_at(TRITON.namespace, now)
    policy = RuntimePolicy(max_staleness_s=30)

    def answer(stamp: float, busy: dict[str, float]) -> None:
        """Both pods' load sampled at `stamp`, at 10 req/s; the GPU busy of the pods in `busy`, 1 s older."""
        answers[freshness] = [series("a-1", stamp), series("a-2", stamp)]
        answers[rps] = [series("a-1", 10.0), series("a-2", 10.0)]
        answers[gpu] = [series(pod, value) for pod, value in busy.items()]
        answers[gpu_freshness] = [series(pod, stamp - 1) for pod in busy]

    answer(now - 5, {"a-1": 0.9, "a-2": 0.3})
    [first] = await source.collect(now)
    answer(now + 10, {"a-1": 0.9})  # a-2's GPU gone from the answer; its load read
    [second] = await source.collect(now + 15)
    answer(now + 40, {"a-1": 0.9})
    [third] = await source.collect(now + 45)

    a2 = second.pods[1]
    assert (a2.gpu_busy, a2.gpu_sampled_at, a2.gpu_held) == (0.3, now - 6, True), a2  # its last reading, its time
    assert (a2.sampled_at, a2.requests_per_second) == (now + 10, 10.0), a2  # its load, read as ever
    before = aggregate(first.pods, policy, now)
    during = aggregate(second.pods, policy, now + 15)
    assert during.gpu_busy == pytest.approx(before.gpu_busy), (before.gpu_busy, during.gpu_busy)
    # Missing at once (a reviewer: taken as fresh until max_staleness, a hot pod's real fall beside it lowered the
    # GPU's values within those 45 s, where DESIGN §6 says a signal absent while the pod reported it is missing).
    assert during.signals["gpu"].missing == 1
    later = aggregate(third.pods, policy, now + 45)  # 51 s old: stale, counted at it and holding the GPU's values
    assert later.gpu_busy == pytest.approx(before.gpu_busy) and later.signals["gpu"].missing == 1


async def test_a_pod_whose_load_leaves_the_answer_keeps_its_last_load_beside_its_gpu_read(
        aiohttp_server: AiohttpServer, sources: list[PrometheusSource], now: float) -> None:
    """The other way round: a pod's exporter restarted and its ModelMesh collector fails from the start (no
    `last_success_timestamp_seconds{collector="modelmesh"}`, no rate: no load freshness at all) while its GPU is read.
    Was: the whole last sample held, its GPU busy too, 0.3 at its old time, where 0.8 was read fresh. Now the last
    good load, at its old time, beside the GPU busy read, as the scrape source holds it."""
    answers: dict[str, list[dict[str, object]]] = {}
    source = PrometheusSource(two_pods(TRITON), await answering_prometheus(aiohttp_server, answers))
    sources.append(source)
    freshness, gpu, rps, *_, gpu_freshness = source.queries[:9]
    series = series_at(TRITON.namespace, now)
    answers[freshness] = [series("a-1", now - 5), series("a-2", now - 5)]
    answers[rps] = [series("a-1", 10.0), series("a-2", 30.0)]
    answers[gpu] = [series("a-1", 0.9), series("a-2", 0.3)]
    answers[gpu_freshness] = [series("a-1", now - 6), series("a-2", now - 6)]
    await source.collect(now)
    answers[freshness] = [series("a-1", now + 10)]  # a-2 has no load freshness, nor a rate
    answers[rps] = [series("a-1", 10.0)]
    answers[gpu] = [series("a-1", 0.9), series("a-2", 0.8)]
    answers[gpu_freshness] = [series("a-1", now + 9), series("a-2", now + 9)]
    [second] = await source.collect(now + 15)

    a2 = second.pods[1]
    assert (a2.gpu_busy, a2.gpu_sampled_at) == (0.8, now + 9), a2
    assert (a2.sampled_at, a2.requests_per_second) == (now - 5, 30.0), a2  # its last good load, at its old time


@pytest.mark.parametrize("gpu_source", ["exporter", "dcgm"])
async def test_a_gpu_read_again_while_the_load_is_held_is_fresh(
        aiohttp_server: AiohttpServer, sources: list[PrometheusSource], now: float, gpu_source: GpuSource) -> None:
    """A reviewer: a pod's GPU busy gone (kept, marked held), then its load gone while its GPU is read again: the
    mark stayed with the held load, and /debug said its GPU stale ("gpu missing on 1 of 2 ready pods") at every
    refresh while the reading was 6 s old."""
    answers: dict[str, list[dict[str, object]]] = {}
    source = PrometheusSource(two_pods(TRITON), await answering_prometheus(aiohttp_server, answers),
                              gpu_source=gpu_source)
    sources.append(source)
    freshness, gpu, rps, *_, gpu_freshness = source.queries[:9]
    series = series_at(TRITON.namespace, now)
    policy = RuntimePolicy(max_staleness_s=30)

    def answer(stamp: float, load: list[str], busy: dict[str, float]) -> None:
        answers[freshness] = [series(pod, stamp) for pod in load]
        answers[rps] = [series(pod, 10.0) for pod in load]
        answers[gpu] = [series(pod, value) for pod, value in busy.items()]
        answers[gpu_freshness] = [series(pod, stamp - 1) for pod in busy]

    answer(now - 5, ["a-1", "a-2"], {"a-1": 0.9, "a-2": 0.9})
    await source.collect(now)
    answer(now + 10, ["a-1", "a-2"], {"a-1": 0.9})  # a-2's GPU gone: kept, held
    await source.collect(now + 15)
    answer(now + 25, ["a-1"], {"a-1": 0.1, "a-2": 0.1})  # a-2's load gone, its GPU read again
    [snapshot] = await source.collect(now + 30)

    a2 = snapshot.pods[1]
    assert (a2.gpu_busy, a2.gpu_sampled_at, a2.gpu_held) == (0.1, now + 24, False), a2
    assert aggregate(snapshot.pods, policy, now + 30).signals["gpu"].missing == 0
