"""While pod discovery is out of date for a runtime's namespace, what the user reads says what fails and what the HPA
does, the same in each place: the Kubernetes API (pod discovery), not the metric source, and every value unknown
(503), so the HPA holds its replicas, no scale-up and no scale-down.

Before, the exporters all answering, the 503 and the refresher's WARNING blamed the metric source ('metric source
down', '1 ready pods, none read'), and /debug's `discovery` problem said 'values cannot fall until it recovers', as
if they were served held and could still rise: every value was 503.

The real scrape source reads a healthy exporter (in this process); discovery is a fixed inventory turned out of date.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from pytest_aiohttp import AiohttpServer

from autoscaler.model import RuntimeKey
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.scrape import ScrapeSource
from tests.api.builders import served_source
from tests.sources.static_discovery import StaticDiscovery
from tests.support.exporter_texts import load_lines

ClientFactory = Callable[..., Awaitable[TestClient[Any, Any]]]
KEY = RuntimeKey("ml", "modelmesh-serving-triton")
T0 = 1_700_000_000.0
DEBUG = f"/debug/runtimes/{KEY.namespace}/{KEY.deployment}"
METRIC = (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{KEY.namespace}/modelmesh_desired_replicas"
          f"?labelSelector=deployment={KEY.deployment}")
WATCH_ERROR = ("pod watch of namespace ml failing: watch pods in namespace ml: Cannot connect to host "
               "kubernetes.default.svc:443")


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def outage(aiohttp_client: ClientFactory, aiohttp_server: AiohttpServer,
                 ) -> Any:
    """A runtime of two pods whose exporters answer, served once, then its namespace's pod discovery out of date
    (the pod watch failing, its words as `KubePodDiscovery.problems` has them) and refreshed again: the refresher,
    the API's client and the clock."""
    clock = Clock()

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text="\n".join(load_lines(clock.now)) + "\n")

    exporter = web.Application()
    exporter.router.add_get("/metrics", metrics)
    server = await aiohttp_server(exporter)
    url = str(server.make_url("/metrics"))
    discovery = StaticDiscovery([RuntimeInventory(KEY, tuple(PodTarget(name, ready=True, url=url)
                                                              for name in ("triton-0", "triton-1")), replicas=2)])
    source = ScrapeSource(discovery, clock=clock)
    refresher, client = await served_source(source, clock, aiohttp_client)
    try:
        await refresher.refresh_once()
        async with client.get(METRIC) as response:
            assert response.status == 200, await response.text()  # served while discovery is current
        discovery.healthy = False
        discovery.problems = ((KEY.namespace, WATCH_ERROR),)  # type: ignore[attr-defined]
        clock.now += 5
        yield refresher, client
    finally:
        await source.close()


async def test_the_503_names_pod_discovery_not_the_metric_source(outage: Any) -> None:
    refresher, client = outage
    await refresher.refresh_once()
    async with client.get(METRIC) as response:
        assert response.status == 503
        message: str = (await response.json())["message"]
    assert "pod discovery" in message and "Kubernetes API" in message, message
    assert "metric source" not in message, message
    assert "the HPA holds its current replicas" in message, message


async def test_debug_says_every_value_is_unknown_and_the_hpa_holds(outage: Any) -> None:
    refresher, client = outage
    await refresher.refresh_once()
    async with client.get(DEBUG) as response:
        document = await response.json()
    [problem] = [p for p in document["source"]["problems"] if p["reason"] == "discovery"]
    detail: str = problem["detail"]
    assert WATCH_ERROR in detail, detail
    assert "unknown (503)" in detail and "no scale-up, no scale-down" in detail, detail
    assert "cannot fall" not in detail and "held" not in detail, detail
    assert document["known"] is False and document["held"] == {}, document  # nothing served held: unknown
    assert "metric source" not in document["reason"], document["reason"]


async def test_the_refreshers_warning_says_the_pods_were_read_and_discovery_is_out_of_date(
        outage: Any, caplog: pytest.LogCaptureFixture) -> None:
    refresher, _ = outage
    caplog.set_level(logging.INFO, logger="autoscaler.refresher")
    await refresher.refresh_once()
    [line] = [record.getMessage() for record in caplog.records
              if record.name == "autoscaler.refresher" and record.levelno == logging.WARNING
              and str(KEY) in record.getMessage()]
    assert line.startswith(f"runtime {KEY}: 2/2 ready pods fresh; pod discovery out of date"), line
    assert "none read" not in line and "metric source" not in line, line
    assert "values unknown (503), HPA holds" in line, line
