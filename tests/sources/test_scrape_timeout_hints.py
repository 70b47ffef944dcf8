"""A scrape that times out says what to check, as a refused connection does, and the 404 hint names the port
the adapter scrapes, not the default.

Seen on call: a NetworkPolicy that drops the adapter's packets and an exporter sidecar hung (SIGSTOP) both logged
`no answer before the refresh deadline of 2 s` and nothing more, while a refused connection named the sidecar,
--exporter-port and NetworkPolicies; and an adapter scraping port 23100 was told `is the port the exporter's
(9187)`. Real sockets: a server that accepts and never answers (what the kernel does for a stopped process, and
what a connection kept from before meets behind a policy that now drops), an aiohttp one that answers 404.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from autoscaler.model import RuntimeKey
from tests.sources.test_scrape_hints import said

KEY = RuntimeKey("ml", "modelmesh-serving-triton")


@pytest.fixture
async def silent_port() -> AsyncIterator[int]:
    """A port that accepts connections and never answers: a hung exporter."""
    held: list[asyncio.StreamWriter] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize(("timeout_s", "deadline_s"), [(0.2, 5.0), (5.0, 0.2)], ids=["scrape-timeout", "deadline"])
async def test_a_hung_exporter_says_what_a_timeout_means(silent_port: int, timeout_s: float, deadline_s: float,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "autoscaler.sources.scrape")
    reason, detail = await said(f"http://127.0.0.1:{silent_port}/metrics", timeout_s=timeout_s,
                                deadline_s=deadline_s)
    assert reason == "timeout"
    [line] = [record.getMessage() for record in caplog.records if "failed (timeout)" in record.getMessage()]
    for told in (detail, line):
        assert "NetworkPolicy" in told and "drops" in told, told
        assert "hung" in told and "exporter sidecar" in told, told


async def test_a_404_names_the_port_scraped(aiohttp_server: AiohttpServer) -> None:
    async def not_found(request: web.Request) -> web.Response:
        return web.Response(status=404)

    app = web.Application()
    app.router.add_get("/{tail:.*}", not_found)
    server = await aiohttp_server(app)
    reason, detail = await said(f"http://127.0.0.1:{server.port}/metrics", timeout_s=5.0, deadline_s=5.0)
    assert reason == "http"
    assert f"port {server.port}" in detail and "--exporter-port" in detail, detail
    assert "9187" not in detail, detail
