"""Connections cannot exhaust memory, and unparseable requests get a `Status` (issue 14): the adapter's API
behind its guarded listener, over real TLS sockets, with short limits so the tests run in a second."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from aiohttp import web

from autoscaler.api.app import build_api_app
from autoscaler.api.connections import ConnectionLimits, GuardedSite
from tests.api.builders import DEPLOYMENT, KEY, NAMESPACE, Pki, refresher_with, runtime_view
from tests.api.conftest import listening

METRIC = (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{NAMESPACE}/modelmesh_desired_replicas"
          f"?labelSelector=deployment%3D{DEPLOYMENT}")
LIMITS = ConnectionLimits(max_connections=5, header_read_timeout_s=0.5, keepalive_timeout_s=0.5)
CLOSED_BY_S = 10.0
"""A hang guard for reading the end of a connection closed before the answer that was just read (it was 1 s: a loaded
machine can stall a test process that long); far inside the 30 s keep-alive that would close it otherwise."""


@dataclass
class Listener:
    port: int
    client: ssl.SSLContext

    async def open(self, tls: bool = True) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection("127.0.0.1", self.port, ssl=self.client if tls else None)

    async def request(self, head: bytes) -> tuple[int, dict[str, object] | bytes]:
        """Send raw request bytes; (status, JSON body or raw bytes)."""
        reader, writer = await self.open()
        writer.write(head)
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        status_line, _, rest = raw.partition(b"\r\n")
        body = rest.partition(b"\r\n\r\n")[2]
        try:
            return int(status_line.split()[1]), json.loads(body)
        except ValueError:
            return int(status_line.split()[1]), body


@pytest.fixture
async def listener(pki: Pki) -> AsyncIterator[Listener]:
    refresher = refresher_with(runtime_view(KEY))
    async with listening(build_api_app(refresher, refresher.metrics), pki.server_context(), LIMITS) as port:
        yield Listener(port, pki.client_context())


def get(path: str, *headers: str) -> bytes:
    lines = [f"GET {path} HTTP/1.1", "Host: adapter", "Connection: close", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def test_a_request_is_served_through_the_guarded_listener(listener: Listener) -> None:
    status, body = await listener.request(get(METRIC))
    assert status == 200
    assert isinstance(body, dict) and body["kind"] == "ExternalMetricValueList"


async def test_a_url_over_the_limit_gets_a_431_status(listener: Listener) -> None:
    status, body = await listener.request(get(METRIC + "&pad=" + "a" * 9000))
    assert status == 431
    assert isinstance(body, dict)
    assert (body["kind"], body["code"], body["reason"]) == ("Status", 431, "BadRequest")  # metav1 has no 431 reason


async def test_a_header_over_the_limit_gets_a_431_status(listener: Listener) -> None:
    status, body = await listener.request(get(METRIC, "X-Padding: " + "b" * 9000))
    assert status == 431
    assert isinstance(body, dict) and body["kind"] == "Status"


async def test_a_malformed_request_gets_a_400_status(listener: Listener) -> None:
    status, body = await listener.request(b"GET /healthz HTTP/1.1\r\nHost: x\r\nBroken header line\r\n\r\n")
    assert status == 400
    assert isinstance(body, dict) and (body["kind"], body["code"]) == ("Status", 400)


async def test_a_client_sending_headers_slowly_is_disconnected(listener: Listener) -> None:
    reader, writer = await listener.open()
    loop = asyncio.get_running_loop()
    first_byte_sent = loop.time()
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    await writer.drain()
    dribbled = 0
    while dribbled < 50 and not reader.at_eof():  # each byte arrives well inside any per-read timeout
        await asyncio.sleep(0.1)
        with contextlib.suppress(ConnectionError):
            writer.write(b"X")
        dribbled += 1
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(reader.read(1), 0.001)  # reaches end of file once the adapter hangs up
    hung_up_by = loop.time() - first_byte_sent
    # Hung up while the client was still sending, long before it would have stopped on its own; and not before the
    # header deadline (0.5 s from the first byte). Asked of the time, not of a count of 0.1 s sleeps: a loaded
    # machine got through four of them in 0.5 s.
    assert reader.at_eof() and dribbled < 50, dribbled
    assert hung_up_by >= LIMITS.header_read_timeout_s, (hung_up_by, dribbled)
    writer.close()


async def test_a_connection_that_never_sends_is_closed(listener: Listener) -> None:
    reader, writer = await listener.open()
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()


async def test_an_idle_kept_alive_connection_is_closed(listener: Listener) -> None:
    reader, writer = await listener.open()
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    await writer.drain()
    assert (await reader.readline()).startswith(b"HTTP/1.1 200")
    await asyncio.wait_for(reader.read(), 5)  # the rest, then end of file once idle
    assert reader.at_eof()
    writer.close()


async def test_at_the_bound_slow_clients_make_room_for_a_client_that_sends_its_request(
        listener: Listener) -> None:
    held = []
    for _ in range(LIMITS.max_connections):
        reader, writer = await listener.open()
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # and never the end of the headers
        await writer.drain()
        held.append((reader, writer))
    status, _ = await listener.request(get(METRIC))
    assert status == 200
    oldest_reader, _ = held[0]
    # the longest-waiting one made room: closed before that answer, its end of file is there to read
    assert await asyncio.wait_for(oldest_reader.read(), CLOSED_BY_S) == b""
    for _, writer in held:
        writer.close()


async def kept_alive(listener: Listener) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection that has had one request answered and now sits idle, kept alive."""
    reader, writer = await listener.open()
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    await writer.drain()
    assert (await reader.readuntil(b"\r\n\r\nok")).startswith(b"HTTP/1.1 200")
    return reader, writer


async def test_at_the_bound_idle_kept_alive_connections_make_room_for_a_new_client(pki: Pki) -> None:
    """Idle keep-alive connections (one cheap request each, open paths need no credentials) cannot lock
    every new client out until their keep-alive timeout: the longest idle makes room."""
    refresher = refresher_with(runtime_view(KEY))
    limits = ConnectionLimits(max_connections=3, header_read_timeout_s=5, keepalive_timeout_s=30)
    async with listening(build_api_app(refresher, refresher.metrics), pki.server_context(), limits) as port:
        listener = Listener(port, pki.client_context())
        held = [await kept_alive(listener) for _ in range(limits.max_connections)]
        status, _ = await listener.request(get(METRIC))
        assert status == 200
        oldest_reader, _ = held[0]
        assert await asyncio.wait_for(oldest_reader.read(), CLOSED_BY_S) == b""  # closed before that answer
        for _, writer in held:
            writer.close()


async def test_a_client_that_stops_reading_its_answers_makes_room_and_is_disconnected(pki: Pki) -> None:
    """A client that pipelines requests and never reads the answers stalls its connection in a write that
    would never end: such connections cannot hold every place until the process restarts."""
    refresher = refresher_with(runtime_view(KEY))
    limits = ConnectionLimits(max_connections=3, header_read_timeout_s=30, keepalive_timeout_s=30,
                              write_stall_timeout_s=1.0)
    runner = web.AppRunner(build_api_app(refresher, refresher.metrics), access_log=None)
    await runner.setup()
    site = GuardedSite(runner, "127.0.0.1", 0, tls=pki.server_context(), limits=limits)
    await site.start()
    assert site.guard is not None
    listener, held = Listener(site.port, pki.client_context()), []
    try:
        for _ in range(limits.max_connections):
            client = socket.socket()
            client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # fills at once, as a stuck reader's
            client.connect(("127.0.0.1", site.port))
            _, writer = await asyncio.open_connection(sock=client, ssl=listener.client,
                                                           server_hostname="127.0.0.1")
            writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 2000)  # megabytes of answers, unread
            await writer.drain()
            held.append(writer)
        guard = site.guard

        def every_open_connection_stalled() -> bool:  # its answers backed up: sooner or later by the machine's load
            waiting = list(guard.waiting)
            return len(waiting) == guard.open and all(c._stalled is not None for c in waiting)

        deadline = time.monotonic() + 60
        while not every_open_connection_stalled() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert every_open_connection_stalled(), "the unread answers never backed up"
        status, _ = await listener.request(get(METRIC))
        assert status == 200  # a stalled one made room
        deadline = time.monotonic() + 10 * limits.write_stall_timeout_s
        while site.guard.open and time.monotonic() < deadline:  # the others are closed once stalled that long
            await asyncio.sleep(0.1)
        assert site.guard.open == 0
    finally:
        for writer in held:
            writer.close()
        await runner.cleanup()
