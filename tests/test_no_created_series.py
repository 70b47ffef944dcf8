"""Neither /metrics carries `_created` series. prometheus_client writes one beside every counter, histogram and
summary series by default (a second series each, in both exposition formats); they are in none of the metric
lists of docs/design.md or docs/operations.md, no dashboard or rule reads them, and Prometheus users turn them
off. Each scrape is checked as Prometheus would take it: the text format and OpenMetrics, and promtool."""

from __future__ import annotations

import asyncio
import re
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from prometheus_client import enable_created_metrics

from autoscaler.api.app import build_api_app
from exporter import names
from exporter.app import build_app
from exporter.settings import ExporterSettings
from tests.api.builders import KEY, refresher_with, runtime_view
from tests.fakes.prometheus import PROMTOOL_BIN
from tests.support.processes import free_port

AiohttpClient = Callable[[web.Application], Awaitable[TestClient[Any, Any]]]
OPENMETRICS = "application/openmetrics-text; version=1.0.0"


@pytest.fixture(autouse=True)
def library_default() -> Iterator[None]:
    """Each test starts as a fresh process does: prometheus_client's switch is one per process, on by default."""
    enable_created_metrics()  # type: ignore[no-untyped-call]
    yield
    enable_created_metrics()  # type: ignore[no-untyped-call]


async def scrape(client: TestClient[Any, Any], accept: str = "text/plain") -> str:
    async with client.get("/metrics", headers={"Accept": accept}) as response:
        assert response.status == 200
        return await response.text()


def promtool_check(text: str) -> tuple[int, str]:
    done = subprocess.run([PROMTOOL_BIN, "check", "metrics"], input=text, capture_output=True, text=True,
                          timeout=30, check=False)
    return done.returncode, (done.stdout + done.stderr).strip()


def created_lines(text: str) -> list[str]:
    """The samples, HELP and TYPE lines of `_created` series."""
    return [line for line in text.splitlines() if re.match(r"(# (HELP|TYPE) )?[a-zA-Z_:][a-zA-Z0-9_:]*_created\b",
                                                           line)]


async def test_the_adapters_metrics_have_no_created_series(aiohttp_client: AiohttpClient) -> None:
    refresher = refresher_with(runtime_view(KEY))
    client = await aiohttp_client(build_api_app(refresher, refresher.metrics))
    path = f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{KEY.namespace}/modelmesh_gpu_busy"
    async with client.get(path, params={"labelSelector": f"deployment={KEY.deployment}"}) as answer:
        assert answer.status == 200  # a served request: the request counter and latency histogram have series
    await scrape(client)

    text = await scrape(client)
    assert "modelmesh_autoscaler_api_requests_total{" in text
    assert created_lines(text) == []
    assert created_lines(await scrape(client, OPENMETRICS)) == []
    assert promtool_check(text) == (0, "")


async def test_the_exporters_metrics_have_no_created_series(aiohttp_client: AiohttpClient, tmp_path: Path) -> None:
    """With ModelMesh not answering: its scrape-error counter has a series."""
    settings = ExporterSettings(listen_host="127.0.0.1", listen_port=0,
                                modelmesh_url=f"http://127.0.0.1:{free_port()}/metrics",
                                modelmesh_interval_s=0.05, gpu_enabled=False)
    client = await aiohttp_client(build_app(settings))
    async with asyncio.timeout(30):
        while f"{names.SCRAPE_ERRORS_TOTAL}{{" not in (text := await scrape(client)):
            await asyncio.sleep(0.05)
    assert created_lines(text) == []
    assert created_lines(await scrape(client, OPENMETRICS)) == []
    assert promtool_check(text) == (0, "")


@pytest.mark.parametrize("accept", ["text/plain", OPENMETRICS])
async def test_a_counter_made_after_the_app_is_built_has_no_created_series(
    aiohttp_client: AiohttpClient, accept: str
) -> None:
    """Every series the adapter adds later (a new path, a new runtime's labels) is written the same way."""
    refresher = refresher_with(runtime_view(KEY))
    client = await aiohttp_client(build_api_app(refresher, refresher.metrics))
    refresher.metrics.requests.labels(path="/later", code="200").inc()
    text = await scrape(client, accept)
    assert 'path="/later"' in text
    assert created_lines(text) == []
