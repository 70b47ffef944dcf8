"""The Prometheus source and a value no real pod reaches (1e308 requests a second, a queue delay of eleven days):
it was read as a real load, silently, and scaled the runtime to its maximum. It is refused: the pod's last good
sample is held (none yet: no load data, never a huge one), its problem is in /debug (`garbage`, naming the
series, the value and the ceiling), and one WARNING line says so; the other pods are read as usual.
"""

from __future__ import annotations

import logging

import pytest
from pytest_aiohttp import AiohttpServer

from autoscaler.sources import prometheus as source_module
from autoscaler.sources.prometheus import PrometheusSource
from exporter import names
from tests.sources.conftest import StartPrometheus
from tests.sources.prometheus_stub import two_pods, two_pods_answering
from tests.sources.test_prometheus_source import AGE_S, TRITON, exporter_series, signals


@pytest.mark.slow
async def test_a_value_no_pod_reaches_from_prometheus_is_refused_and_said(
        start_prometheus: StartPrometheus, sources: list[PrometheusSource], caplog: pytest.LogCaptureFixture,
        now: float) -> None:
    at = now - AGE_S
    prom = await start_prometheus([
        *exporter_series("team-a", "a-1", at, signals(rps=1e308, queue=0.01, misses=0.1, cache=0.5, models=2),
                         gpus=[0.5], last_success=at),
        *exporter_series("team-a", "a-2", at, signals(rps=10, queue=1e6, misses=0.1, cache=0.5, models=2),
                         gpus=[0.5], last_success=at),
    ])
    source = PrometheusSource(two_pods(TRITON), prom.url)
    sources.append(source)
    with caplog.at_level(logging.WARNING, logger=source_module.__name__):
        [snapshot] = await source.collect(now)
        await source.collect(now + 15)  # still garbage: said once

    a1, a2 = snapshot.pods
    assert (a1.sampled_at, a1.requests_per_second) == (None, None), a1  # no load data, not a huge one
    assert (a2.sampled_at, a2.queue_delay_s, a2.requests_per_second) == (None, None, None), a2
    problems = {problem.pod: problem for problem in source.problems(TRITON)}
    assert {pod: problem.reason for pod, problem in problems.items()} == {"a-1": "garbage", "a-2": "garbage"}
    assert f"{names.REQUESTS_PER_SECOND} 1e+308 is above 1e+06" in problems["a-1"].detail, problems["a-1"]
    assert f"{names.QUEUE_DELAY_SECONDS} 1e+06 is above 3600" in problems["a-2"].detail, problems["a-2"]
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 2, lines
    assert "team-a/a-1" in lines[0] and "1e+308 is above 1e+06" in lines[0], lines
    assert "team-a/a-2" in lines[1] and "is above 3600" in lines[1], lines


async def test_a_pod_that_read_well_holds_its_last_good_sample_and_recovers(
        aiohttp_server: AiohttpServer, sources: list[PrometheusSource], now: float) -> None:
    """Prometheus answers 1e308 for a pod that read 40 a refresh before: the 40 is held, with its stamp."""
    stub = await two_pods_answering(aiohttp_server, TRITON, now, sources)
    source, answer = stub.source, stub.answer
    answer(now - 5, 40.0)
    [first] = await source.collect(now)
    answer(now + 10, 1e308)
    [second] = await source.collect(now + 15)
    [problem] = [problem for problem in source.problems(TRITON) if problem.pod is not None]
    answer(now + 25, 41.0)
    [third] = await source.collect(now + 30)

    assert second.pods[0] == first.pods[0] and first.pods[0].requests_per_second == 40.0
    assert second.pods[1].requests_per_second == 10.0 and second.pods[1].sampled_at == now + 10
    assert problem.pod == "a-1" and problem.reason == "garbage"
    assert third.pods[0].requests_per_second == 41.0
    assert [problem for problem in source.problems(TRITON) if problem.pod is not None] == []
