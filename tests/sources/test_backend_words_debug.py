"""What a backend says when it fails reaches /debug (and the log) in the source's problem: Prometheus's own error
(`errorType`, `error`), an error page's title, a partial answer's warnings, an exporter's broken answer as aiohttp
quotes it. A backend may say anything there: /debug said a Prometheus `errorType` of 50 KB whole, raw terminal
escapes and NULs from an error page's title or an `error`, every one of 3,000 warnings, and 128 KB of an exporter's
garbage status line. Each is now told as an exporter's words are (`backend_said`): cut short, with its length, and
with what is not printable escaped.

Real sources against stand-in backends on real sockets, read through the real API's /debug.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from pytest_aiohttp import AiohttpServer

from autoscaler.model import RuntimeKey
from autoscaler.sources.base import MetricSource, PodTarget, RuntimeInventory
from autoscaler.sources.prometheus import PrometheusSource
from autoscaler.sources.scrape import ScrapeSource
from tests.api.builders import served_source
from tests.sources.prometheus_stub import two_pods
from tests.sources.static_discovery import StaticDiscovery
from tests.sources.test_prometheus_source import TRITON
from tests.support.clock import SteppedClock

Client = TestClient[Any, Any]
ClientFactory = Callable[..., Awaitable[Client]]

HOSTILE = "\x1b[31mred\x1b[0m\r\nFAKE adapter LOG LINE\x00\u202e"
"""A terminal colour, a line break that starts a forged line, a NUL, a right-to-left override."""
READABLE_CHARS = 2000
"""More than any problem's own words and hints; far less than what the backends send."""


def readable(detail: str) -> bool:
    return len(detail) <= READABLE_CHARS and detail.isprintable()


async def debug_details(source: MetricSource, key: RuntimeKey, aiohttp_client: ClientFactory,
                        now: float) -> list[str]:
    """The problems /debug shows for `key` after one refresh of `source`."""
    clock = SteppedClock(now)
    refresher, client = await served_source(source, clock, aiohttp_client)
    await refresher.refresh_once()
    async with client.get(f"/debug/runtimes/{key.namespace}/{key.deployment}") as response:
        document = json.loads(await response.text())
    details = [problem["detail"] for problem in document["source"]["problems"]]
    assert details, document["source"]
    return details


async def prometheus_details(app: web.Application, aiohttp_server: AiohttpServer, aiohttp_client: ClientFactory,
                             sources: list[PrometheusSource], now: float) -> list[str]:
    """The problems /debug shows for TRITON after one refresh of a Prometheus source of `app`; each readable."""
    server = await aiohttp_server(app)
    source = PrometheusSource(two_pods(TRITON), str(server.make_url("")))
    sources.append(source)
    details = await debug_details(source, TRITON, aiohttp_client, now)
    assert all(readable(detail) for detail in details), [detail[:300] for detail in details]
    return details


def seen_pod(now: float) -> list[dict[str, object]]:
    """Every query's answer: pod a-1 of the runtime, fresh; a-2 left out."""
    return [{"metric": {"namespace": TRITON.namespace, "pod": "a-1"}, "value": [now, repr(now)]}]


BODIES: dict[str, Callable[[float], tuple[int, str, str]]] = {
    "error in a 200": lambda now: (200, "application/json", json.dumps(
        {"status": "error", "errorType": HOSTILE + "K" * 50_000, "error": HOSTILE})),
    "error in a 422": lambda now: (422, "application/json", json.dumps(
        {"status": "error", "errorType": "bad_data", "error": HOSTILE + "e" * 100_000})),
    "error page title": lambda now: (503, "text/html", f"<html><title>{HOSTILE}</title>" + "x" * 100_000),
    "partial warnings": lambda now: (200, "application/json", json.dumps(
        {"status": "success", "warnings": [f"{HOSTILE} store {number} unreachable" for number in range(3000)],
         "data": {"resultType": "vector", "result": seen_pod(now)}})),
}


@pytest.mark.parametrize("body", list(BODIES))
async def test_prometheus_words_reach_debug_bounded_and_readable(
        body: str, aiohttp_server: AiohttpServer, aiohttp_client: ClientFactory, sources: list[PrometheusSource],
        now: float) -> None:
    status, content_type, text = BODIES[body](now)

    async def query(request: web.Request) -> web.Response:
        return web.Response(status=status, text=text, content_type=content_type)

    app = web.Application()
    app.router.add_get("/api/v1/query", query)
    details = await prometheus_details(app, aiohttp_server, aiohttp_client, sources, now)
    assert any("\\x1b[31mred" in detail for detail in details), details  # said, escaped


async def test_where_prometheus_redirected_reaches_debug_bounded(
        aiohttp_server: AiohttpServer, aiohttp_client: ClientFactory, sources: list[PrometheusSource],
        now: float) -> None:
    """A proxy in front of Prometheus that redirects to a Location of 20 KB: /debug said all of it."""

    async def query(request: web.Request) -> web.Response:
        raise web.HTTPFound("/login/" + "p" * 20_000)

    async def login(request: web.Request) -> web.Response:
        return web.Response(status=503, text="<html><title>Sign in</title></html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/api/v1/query", query)
    app.router.add_get("/login/{rest:.*}", login)
    details = await prometheus_details(app, aiohttp_server, aiohttp_client, sources, now)
    assert any("(redirected to 'http://" in detail and "/login/ppp" in detail for detail in details), details


@pytest.fixture
async def garbage_exporter() -> AsyncIterator[str]:
    """The /metrics URL of a server whose answer is no HTTP: a status line of a megabyte, escapes in it."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(65536)
        writer.write(b"\x1b[31mGARBAGE " + b"A" * 1_000_000 + b"\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/metrics"
    server.close()
    await server.wait_closed()


async def test_an_exporters_broken_answer_reaches_debug_bounded_and_readable(
        garbage_exporter: str, aiohttp_client: ClientFactory, now: float) -> None:
    key = RuntimeKey("tenant-b", "modelmesh-serving-evil")
    source = ScrapeSource(StaticDiscovery([RuntimeInventory(key, (PodTarget("b-0", True, garbage_exporter),))]),
                          timeout_s=5.0)
    try:
        [detail] = await debug_details(source, key, aiohttp_client, now)
    finally:
        await source.close()
    assert readable(detail), detail[:300]
    assert "b-0" in detail or detail.startswith(garbage_exporter), detail[:300]
