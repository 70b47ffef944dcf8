"""An exporter that closes the connection is told apart from one that went away. An exporter serving HTTPS closes
a plain-HTTP connection (older ones, without the 400 `exporter.refused_handshakes` sends), so a pod that does that
gets the hint to scrape it over https. But a pod scraped over http for minutes that then drops the connection (its
pod deleted, its sidecar restarting) got that hint too, 44 lines in a churn soak, sending an operator to rename
ports on a fleet that worked. A pod that answered over plain http before is said as having gone away.

Real parts: the adapter's scrape source, an exporter on a real socket that answers, then closes connections.
"""

from __future__ import annotations

from aiohttp import web
from pytest_aiohttp import AiohttpServer

from autoscaler.model import RuntimeKey
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.scrape import ScrapeSource
from tests.sources.static_discovery import StaticDiscovery
from tests.support.exporter_texts import load_lines

KEY = RuntimeKey("ml", "modelmesh-serving-triton")
NOW = 1_700_000_000.0
TLS_HINT_WORDS = ("https-exporter", "--exporter-scheme https")


class Exporter:
    """An exporter that answers `/metrics` while `up`, and otherwise closes each connection without a word."""

    def __init__(self) -> None:
        self.up = True
        self.now = NOW

    async def metrics(self, request: web.Request) -> web.Response:
        if self.up:
            return web.Response(text="\n".join(load_lines(self.now)) + "\n")
        assert request.transport is not None
        request.transport.close()
        raise web.HTTPServiceUnavailable  # never sent: the connection is closed


async def scrape_problem(source: ScrapeSource, now: float) -> str | None:
    """The detail /debug shows for the pod after a refresh at `now`, None when its scrape succeeded."""
    await source.collect(now)
    problems = source.problems(KEY)
    return problems[0].detail if problems else None


async def exporter_source(aiohttp_server: AiohttpServer, exporter: Exporter) -> ScrapeSource:
    app = web.Application()
    app.router.add_get("/metrics", exporter.metrics)
    server = await aiohttp_server(app)
    url = f"http://127.0.0.1:{server.port}/metrics"
    return ScrapeSource(StaticDiscovery([RuntimeInventory(KEY, (PodTarget("p-0", True, url),))]), timeout_s=5.0,
                        clock=lambda: exporter.now)


async def test_a_pod_scraped_over_http_that_drops_the_connection_is_not_sent_to_https(
    aiohttp_server: AiohttpServer,
) -> None:
    exporter = Exporter()
    source = await exporter_source(aiohttp_server, exporter)
    try:
        assert await scrape_problem(source, NOW) is None
        exporter.up, exporter.now = False, NOW + 15.0
        detail = await scrape_problem(source, exporter.now)
    finally:
        await source.close()
    assert detail is not None
    assert not any(words in detail for words in TLS_HINT_WORDS), detail
    assert "answered over plain http before" in detail, detail


async def test_a_pod_that_never_answered_over_http_and_closes_the_connection_gets_the_https_hint(
    aiohttp_server: AiohttpServer,
) -> None:
    exporter = Exporter()
    exporter.up = False
    source = await exporter_source(aiohttp_server, exporter)
    try:
        detail = await scrape_problem(source, NOW)
    finally:
        await source.close()
    assert detail is not None
    assert all(words in detail for words in TLS_HINT_WORDS), detail
