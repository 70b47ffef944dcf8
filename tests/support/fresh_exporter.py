"""An exporter stand-in that always answers fresh load data: for tests of what the adapter does around it
(watches, deletions), where the exporter's own behaviour is not under test."""

from __future__ import annotations

import time

from aiohttp import web
from pytest_aiohttp import AiohttpServer

from tests.support.exporter_texts import load_lines


async def exporter_port(aiohttp_server: AiohttpServer) -> int:
    """The port of an exporter on 127.0.0.1 that answers with fresh load data."""
    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text="\n".join(load_lines(time.time())) + "\n")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    server = await aiohttp_server(app)
    assert server.port is not None
    return server.port
