"""With `--source prometheus`, a pod whose series has a NaN, an infinity or a negative value: the value was left
absent and one WARNING said so, but /debug showed nothing for the pod (only a value above its signal's ceiling
was a `garbage` problem there), so an operator looking at a runtime held for "requests missing on 1 of 2 ready
pods" an hour later had to find that one log line. It is a `garbage` problem in /debug as the scrape source's
garbled answers are (the same fields: `reason`, `detail` naming the series and the value, `since`, `pod`),
since the first such reading, and gone once the pod's values are good again.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from pytest_aiohttp import AiohttpServer

from autoscaler.kube.timestamps import rfc3339
from autoscaler.source_problems import REASON_GARBAGE
from autoscaler.sources import prometheus as source_module
from autoscaler.sources.prometheus import PrometheusSource
from exporter import names
from tests.api.builders import served_source
from tests.sources.conftest import StartPrometheus
from tests.sources.prometheus_stub import two_pods, two_pods_answering
from tests.sources.test_prometheus_source import AGE_S, TRITON, exporter_series, signals
from tests.support.clock import SteppedClock

Client = TestClient[Any, Any]
ClientFactory = Callable[..., Awaitable[Client]]
DEBUG = f"/debug/runtimes/{TRITON.namespace}/{TRITON.deployment}"


async def source_problems(client: Client) -> list[dict[str, Any]]:
    async with client.get(DEBUG) as response:
        assert response.status == 200
        document: dict[str, Any] = await response.json()
    assert document["source"]["name"] == "prometheus"
    problems: list[dict[str, Any]] = document["source"]["problems"]
    return problems


@pytest.mark.slow
async def test_nan_infinite_or_negative_values_from_prometheus_are_a_debug_problem_of_the_pod(
        start_prometheus: StartPrometheus, sources: list[PrometheusSource], aiohttp_client: ClientFactory,
        caplog: pytest.LogCaptureFixture, now: float) -> None:
    at = now - AGE_S
    prom = await start_prometheus([
        *exporter_series("team-a", "a-1", at,
                         signals(rps=math.nan, queue=-0.5, misses=0.1, cache=0.5, models=2, lru=math.inf),
                         gpus=[0.5], last_success=at),
        *exporter_series("team-a", "a-2", at, signals(rps=10, queue=0.01, misses=0.1, cache=0.5, models=2),
                         gpus=[0.5], last_success=at),
    ])
    clock = SteppedClock(now)
    source = PrometheusSource(two_pods(TRITON), prom.url, clock=clock)
    sources.append(source)
    refresher, client = await served_source(source, clock, aiohttp_client)
    with caplog.at_level(logging.WARNING, logger=source_module.__name__):
        await refresher.refresh_once()
        clock.now += 15
        await refresher.refresh_once()  # still garbled: the same problem, since the first refresh; said once

    [problem] = await source_problems(client)
    assert (problem["pod"], problem["reason"], problem["since"]) == ("a-1", "garbage", rfc3339(now)), problem
    for said in (f"{names.REQUESTS_PER_SECOND} NaN", f"{names.QUEUE_DELAY_SECONDS} -0.5",
                 f"{names.LRU_AGE_SECONDS} +Inf"):
        assert said in problem["detail"], problem["detail"]
    assert prom.url.rstrip("/") in problem["detail"], problem["detail"]
    lines = [record.getMessage() for record in caplog.records if "team-a/a-1" in record.getMessage()]
    assert len(lines) == 3, lines  # one per series, at its onset


async def test_the_problem_goes_when_the_values_are_good_and_keeps_its_start_meanwhile(
        aiohttp_server: AiohttpServer, sources: list[PrometheusSource], now: float) -> None:
    """Prometheus answers NaN for a pod (as the stand-in writes it), then -1, then a good rate: one problem since
    the NaN, then none."""
    stub = await two_pods_answering(aiohttp_server, TRITON, now, sources)
    source, answer = stub.source, stub.answer
    answer(now - 5, math.nan)
    await source.collect(now)
    [first] = source.problems(TRITON)
    answer(now + 10, -1.0)
    await source.collect(now + 15)
    [second] = source.problems(TRITON)
    answer(now + 25, 41.0)
    [good] = await source.collect(now + 30)

    assert (first.pod, first.reason, first.since) == ("a-1", "garbage", now), first
    assert f"{names.REQUESTS_PER_SECOND} nan" in first.detail, first.detail
    assert (second.pod, second.since) == ("a-1", now) and f"{names.REQUESTS_PER_SECOND} -1.0" in second.detail, second
    assert good.pods[0].requests_per_second == 41.0
    assert source.problems(TRITON) == ()


async def test_a_garbled_freshness_series_says_the_pods_last_good_sample_is_held(
        aiohttp_server: AiohttpServer, sources: list[PrometheusSource], now: float) -> None:
    """Without a usable freshness time the whole reading is not believed: /debug says the sample is held."""
    stub = await two_pods_answering(aiohttp_server, TRITON, now, sources)
    source, answers, series = stub.source, stub.answers, stub.series
    stub.answer(now - 5, 40.0)
    [good] = await source.collect(now)
    answers[stub.freshness] = [series("a-1", math.inf), series("a-2", now + 10)]
    [held] = await source.collect(now + 15)

    [problem] = source.problems(TRITON)
    assert (problem.pod, problem.reason) == ("a-1", "garbage"), problem
    assert f'{names.LAST_SUCCESS_TIMESTAMP}{{collector="modelmesh"}} inf' in problem.detail, problem.detail
    assert "holding its last good sample" in problem.detail, problem.detail
    assert held.pods[0] == good.pods[0]


@pytest.mark.slow
async def test_an_exporter_without_its_rates_yet_is_no_garbage_as_with_the_scrape_source(
        start_prometheus: StartPrometheus, sources: list[PrometheusSource], caplog: pytest.LogCaptureFixture,
        now: float) -> None:
    """An exporter after its first ModelMesh read (a new pod, a sidecar restarted) publishes its success time and
    none of its rates, which need two reads. Prometheus has no rate series of the pod then: its request rate is
    absent (which holds the values that use it), with no `garbage` problem, count or WARNING, as the scrape source
    now reads the same answer (tests/e2e/test_exporter_start_not_garbage_e2e.py)."""
    at = now - AGE_S
    first_read = {names.CACHE_USED_RATIO: 0.5, names.MODELS_LOADED: 2}
    prom = await start_prometheus([
        *exporter_series("team-a", "a-1", at, first_read, gpus=[0.5], last_success=at),
        *exporter_series("team-a", "a-2", at, signals(rps=10, queue=0.01, misses=0.1, cache=0.5, models=2),
                         gpus=[0.5], last_success=at),
    ])
    source = PrometheusSource(two_pods(TRITON), prom.url)
    sources.append(source)
    with caplog.at_level(logging.WARNING, logger=source_module.__name__):
        [snapshot] = await source.collect(now)

    pod = next(pod for pod in snapshot.pods if pod.name == "a-1")
    assert pod.requests_per_second is None and pod.models_loaded == 2, pod
    assert source.problems(TRITON) == ()
    assert source.errors[REASON_GARBAGE] == 0, source.errors
    assert [record.getMessage() for record in caplog.records if "a-1" in record.getMessage()] == []
