"""The private parts of aiohttp that the exporter's serving reads: an upgrade that removes or renames one fails here,
loudly, not in a pod.

`exporter.connection_cap` judges a connection busy by aiohttp's `RequestHandler._request_in_progress` and
`_messages` (read with `getattr` and a default: gone, every connection would look idle, closed to make room even in
the middle of its answer, and a stop would not wait for answers in flight), and a request's answer handed
over by `_waiter` pending (gone, a connection once asked would never look idle, its place never made room
with); `exporter.app._CappedSite` starts its own listening server in place of `SockSite.start`'s, through
`BaseSite.start` and the site's `_server`, and `_backlog` (over TLS its connections are upgraded by
`exporter.tls_handshakes`, not by the site's `_ssl_context`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import inspect
import socket
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web

from exporter.app import _CappedSite
from exporter.connection_cap import ConnectionCap, ConnectionCounts


@contextlib.asynccontextmanager
async def connected_to(handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]],
                       ) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """A client's connection to aiohttp's own low-level server answering with `handler`."""
    server = web.Server(handler)
    listening = await asyncio.get_running_loop().create_server(server, "127.0.0.1", 0)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", listening.sockets[0].getsockname()[1])
        yield reader, writer
        writer.close()
    finally:
        listening.close()
        await server.shutdown(1)


async def test_the_request_handler_marks_a_request_in_progress_and_queues_parsed_ones() -> None:
    seen: list[tuple[object, object]] = []
    answering = asyncio.Event()

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        protocol = request.protocol
        seen.append((getattr(protocol, "_request_in_progress", "missing"), type(getattr(protocol, "_messages",
                                                                                          "missing"))))
        answering.set()
        return web.Response(text="ok\n")

    async with connected_to(handler) as (reader, writer):
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        await asyncio.wait_for(answering.wait(), 5)
        await reader.read()
    assert seen == [(True, collections.deque)], (
        "aiohttp's RequestHandler no longer has _request_in_progress (a bool, True while a request is answered) "
        f"or _messages (a deque of parsed requests): exporter.connection_cap reads both; saw {seen}")


async def test_the_request_handler_waits_for_the_next_request_on_a_pending_waiter() -> None:
    protocols: list[object] = []

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        protocols.append(request.protocol)
        return web.Response(text="ok\n")

    async with connected_to(handler) as (reader, writer):
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")  # kept alive
        await reader.readuntil(b"ok\n")
        await asyncio.sleep(0.05)
        waiter = getattr(protocols[0], "_waiter", "missing")
        pending = isinstance(waiter, asyncio.Future) and not waiter.done()
    assert pending, (
        "aiohttp's RequestHandler no longer waits for a kept-alive connection's next request on _waiter (a pending "
        f"future): exporter.connection_cap reads it to tell an answered request; saw {waiter!r}")


async def test_a_capped_site_has_the_sockets_parts_it_starts_its_server_with() -> None:
    assert "start" in vars(web.BaseSite) and inspect.iscoroutinefunction(web.BaseSite.start)
    runner = web.AppRunner(web.Application(), handle_signals=False)
    await runner.setup()
    listening = socket.create_server(("127.0.0.1", 0))
    try:
        assert runner.server is not None
        site = _CappedSite(runner, listening, ConnectionCap(runner.server, ConnectionCounts()))
        parts = {name: hasattr(site, name) for name in ("_server", "_backlog")}
        assert all(parts.values()), f"aiohttp's SockSite lost parts exporter.app._CappedSite uses: {parts}"
        await site.start()
        assert isinstance(site._server, asyncio.AbstractServer)
        await site.stop()
    finally:
        await runner.cleanup()
        listening.close()
