"""Partial answers (Thanos Query's `warnings` about a store it could not reach, VictoriaMetrics' `isPartial`)
where the operator looks: the adapter's own /metrics counts them, and /debug of a runtime whose pods they left
out says so, with the backend's words and since when.

Before: a partial answer was one log line when it started, and nothing else. The runtimes of the missing store
went stale and then 503 while every self-metric said the source was fine (no error counted, the refresh good),
and /debug showed stale pods with no reason.

A real Prometheus behind a small server that plays Thanos dropping one namespace's series.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from pytest_aiohttp import AiohttpServer

from autoscaler.api.app import build_api_app
from autoscaler.model import RuntimeKey
from autoscaler.policies.config import PolicyBook
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.prometheus import PrometheusSource
from tests.fakes.prometheus import PrometheusServer, create_blocks, openmetrics_text
from tests.sources.test_prometheus_source import MLSERVER, TRITON, cluster_samples, discovery

Client = TestClient[Any, Any]
ClientFactory = Callable[..., Awaitable[Client]]
STORE_DOWN = "receive: store 10.0.3.7:10901 unavailable: rpc error: code = Unavailable"


@pytest.fixture
async def prometheus(tmp_path: Path) -> AsyncIterator[PrometheusServer]:
    tsdb = create_blocks(openmetrics_text(cluster_samples(time.time())), tmp_path / "tsdb")
    async with PrometheusServer(tsdb_dir=tsdb, workdir=tmp_path) as prom:
        yield prom


class Thanos:
    """Answers as Thanos Query does while the store holding team-b is down (when `partial`)."""

    def __init__(self, prometheus: PrometheusServer) -> None:
        self.prometheus = prometheus
        self.partial = False

    async def __call__(self, request: web.Request) -> web.Response:
        async with aiohttp.ClientSession() as session, session.get(
                f"{self.prometheus.url}/api/v1/query", params=request.query) as answer:
            payload = await answer.json()
        if self.partial and payload["data"]["resultType"] == "vector":  # not the scalar of `time()`
            payload["data"]["result"] = [item for item in payload["data"]["result"]
                                         if item["metric"].get("namespace") != MLSERVER.namespace]
            payload["warnings"] = [STORE_DOWN]
        return web.json_response(payload)


def partial_answers(metrics: AdapterMetrics) -> float | None:
    return metrics.registry.get_sample_value("modelmesh_autoscaler_source_partial_answers_total",
                                             {"source": "prometheus"})


async def test_partial_answers_are_counted_and_shown_in_debug_of_the_runtimes_they_leave_out(
    prometheus: PrometheusServer, aiohttp_server: AiohttpServer, aiohttp_client: ClientFactory
) -> None:
    thanos = Thanos(prometheus)
    app = web.Application()

    async def query(request: web.Request) -> web.Response:
        return await thanos(request)

    app.router.add_route("GET", "/api/v1/query", query)
    url = str((await aiohttp_server(app)).make_url(""))
    clock = [time.time()]
    source = PrometheusSource(discovery(), url, clock=lambda: clock[0])
    metrics = AdapterMetrics()
    refresher = Refresher(source, PolicyBook(), metrics, clock=lambda: clock[0], monotonic=lambda: clock[0])
    client = await aiohttp_client(build_api_app(refresher, metrics))

    async def problems(key: Any) -> list[dict[str, Any]]:
        async with client.get(f"/debug/runtimes/{key.namespace}/{key.deployment}") as response:
            shown: list[dict[str, Any]] = (await response.json())["source"]["problems"]
            return shown

    try:
        await refresher.refresh_once()
        assert partial_answers(metrics) in (None, 0.0)
        thanos.partial = True
        started = clock[0] = clock[0] + 15
        await refresher.refresh_once()
        clock[0] += 15
        await refresher.refresh_once()

        assert partial_answers(metrics) == 2.0  # one per refresh answered partial, not one per query
        [problem] = await problems(MLSERVER)
        assert problem["reason"] == "partial" and STORE_DOWN in problem["detail"], problem
        assert problem["since"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(started)))
        assert await problems(TRITON) == []  # its pods are all in the answer
        assert metrics.registry.get_sample_value("modelmesh_autoscaler_source_errors_total",
                                                 {"source": "prometheus", "reason": "partial"}) is None

        thanos.partial = False
        clock[0] += 15
        await refresher.refresh_once()
        assert partial_answers(metrics) == 2.0
        assert await problems(MLSERVER) == []
    finally:
        await source.close()


async def test_debug_says_prometheus_has_no_series_for_a_runtime_it_does_not_scrape(
    prometheus: PrometheusServer, aiohttp_client: ClientFactory
) -> None:
    """A namespace Prometheus does not scrape (a PodMonitor's namespaceSelector): its runtime's pods have no
    series while other runtimes' do. The log says so once, after two minutes; /debug says it from the first
    refresh, with since when, so that the operator looking at its 503 is not left with pods that have 'no data'."""
    unscraped = RuntimeKey("team-c", "modelmesh-serving-triton")
    found = discovery()
    found.set_runtime(RuntimeInventory(unscraped, (PodTarget("c-1", ready=True, url=None),)))
    clock = [time.time()]
    source = PrometheusSource(found, prometheus.url, clock=lambda: clock[0])
    refresher = Refresher(source, PolicyBook(), AdapterMetrics(), clock=lambda: clock[0],
                          monotonic=lambda: clock[0])
    client = await aiohttp_client(build_api_app(refresher, refresher.metrics))
    try:
        started = clock[0]
        await refresher.refresh_once()
        clock[0] += 15
        await refresher.refresh_once()
        async with client.get(f"/debug/runtimes/{unscraped.namespace}/{unscraped.deployment}") as response:
            [problem] = (await response.json())["source"]["problems"]
        assert problem["reason"] == "unseen", problem
        assert "team-c" in problem["detail"] and "namespaceSelector" in problem["detail"], problem
        assert problem["since"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(started)))
        async with client.get(f"/debug/runtimes/{TRITON.namespace}/{TRITON.deployment}") as response:
            assert (await response.json())["source"]["problems"] == []
    finally:
        await source.close()


async def test_the_log_names_a_runtime_prometheus_has_no_series_for_with_its_first_pods_and_how_many_more(
    prometheus: PrometheusServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The line for a runtime none of whose Ready pods Prometheus has series for names three of them and counts
    the rest: `..., c-2 and 2 more`, not `..., c-2, ...`, which left the operator to count them in /debug."""
    unscraped = RuntimeKey("team-c", "modelmesh-serving-triton")
    found = discovery()
    found.set_runtime(RuntimeInventory(unscraped, tuple(PodTarget(f"c-{index}", ready=True, url=None)
                                                         for index in range(5))))
    clock = [time.time()]
    source = PrometheusSource(found, prometheus.url, clock=lambda: clock[0])
    try:
        with caplog.at_level(logging.WARNING, logger="autoscaler.sources.prometheus"):
            await source.collect(clock[0])
            clock[0] += 121
            await source.collect(clock[0])
    finally:
        await source.close()
    [line] = [r.getMessage() for r in caplog.records if "is it scraping that namespace" in r.getMessage()]
    assert "runtime team-c/modelmesh-serving-triton (5 Ready pods: c-0, c-1, c-2 and 2 more)" in line, line
