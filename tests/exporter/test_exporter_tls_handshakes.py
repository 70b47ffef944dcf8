"""Clients that open a TCP connection to the exporter's HTTPS port and never finish the TLS handshake cost it a
bounded number of handshakes, for seconds.

asyncio gave such a handshake 60 s, and the `ConnectionCap` counts a connection only once its handshake is over:
1,000 clients that connected and sent no ClientHello held the sidecar at 361 MiB (its limit is 256Mi) for that
minute, and nothing counted them. Now a handshake not over within its bound is closed by the exporter and counted
(`handshake_timeout`), and at four times `--max-connections` under way a new one takes the oldest's place
(`made_room`); a real client is answered throughout. Checked with raw sockets that send nothing, as such a client
does, against the real `serve`, with a short bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import time
import urllib.request

import pytest
import trustme

from exporter import names
from exporter.tls_handshakes import HANDSHAKE_TIMEOUT_S, HANDSHAKES_PER_PLACE
from tests.exporter.test_exporter_stuck_readers import Served, series, served_many_models
from tests.support.certificates import issue_cert

BOUND_S = 1.0
"""The handshake bound the tests serve with, in place of `HANDSHAKE_TIMEOUT_S`, so that they take a second."""


@pytest.fixture
def tls() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """The exporter's server context and a client's that trusts it, for 127.0.0.1."""
    authority = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    issue_cert(authority, "127.0.0.1").configure_cert(server)
    client = ssl.create_default_context()
    authority.configure_trust(client)
    return server, client


def silent_client(port: int) -> socket.socket:
    """A TCP connection to the exporter's port that never sends a ClientHello."""
    client = socket.create_connection(("127.0.0.1", port), timeout=5)
    client.settimeout(0)
    return client


def closed_by_the_exporter(client: socket.socket) -> bool:
    """The exporter closed it: end of file or a reset, where a connection still open has nothing to read."""
    try:
        return client.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def get(url: str, context: ssl.SSLContext) -> str:
    with urllib.request.urlopen(url, timeout=10, context=context) as response:
        return str(response.read().decode())


async def test_handshakes_not_over_within_the_bound_are_closed_and_counted(
        tls: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    server, client = tls
    served: Served = served_many_models(ssl_context=server, handshake_timeout_s=BOUND_S, max_connections=4)
    silent: list[socket.socket] = []
    try:
        await asyncio.sleep(0.2)
        began = time.monotonic()
        silent = [await asyncio.to_thread(silent_client, served.port) for _ in range(12)]
        await asyncio.sleep(0.1)
        assert not any(closed_by_the_exporter(each) for each in silent)  # within the bound: left alone
        assert await asyncio.to_thread(get, f"https://127.0.0.1:{served.port}/healthz", client) == "ok\n"
        open_ones = list(silent)
        while open_ones and time.monotonic() - began < BOUND_S + 5.0:
            await asyncio.sleep(0.05)
            open_ones = [each for each in open_ones if not closed_by_the_exporter(each)]
        assert open_ones == [], f"{len(open_ones)} silent connections still open 5 s past the {BOUND_S} s bound"
        assert time.monotonic() - began >= BOUND_S
        text = await asyncio.to_thread(get, f"https://127.0.0.1:{served.port}/metrics", client)
        dropped = series(text, names.CONNECTIONS_DROPPED_TOTAL)
        assert dropped[f'{names.CONNECTIONS_DROPPED_TOTAL}{{reason="handshake_timeout"}}'] == 12, dropped
        assert dropped[f'{names.CONNECTIONS_DROPPED_TOTAL}{{reason="made_room"}}'] == 0, dropped
    finally:
        for each in silent:
            each.close()
        served.stopped.set()
        await served.task


async def test_at_most_four_handshakes_a_place_are_under_way_and_a_client_is_still_answered(
        tls: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    server, client = tls
    cap = 2
    most = HANDSHAKES_PER_PLACE * cap
    served = served_many_models(ssl_context=server, handshake_timeout_s=30.0, max_connections=cap)
    silent: list[socket.socket] = []
    try:
        await asyncio.sleep(0.2)
        for _ in range(3 * most):
            silent.append(await asyncio.to_thread(silent_client, served.port))
            await asyncio.sleep(0.01)  # accepted in turn, oldest first
        await asyncio.sleep(0.3)
        closed = [closed_by_the_exporter(each) for each in silent]
        assert closed == [True] * (2 * most) + [False] * most, closed  # the newest under way, the oldest dropped
        assert await asyncio.to_thread(get, f"https://127.0.0.1:{served.port}/healthz", client) == "ok\n"
        assert served.counts.dropped["made_room"] == 2 * most + 1  # the client's own took one more place
        assert served.counts.dropped["handshake_timeout"] == 0
    finally:
        for each in silent:
            each.close()
        served.stopped.set()
        with contextlib.suppress(asyncio.CancelledError):
            await served.task


def test_the_exporter_bounds_a_handshake_as_the_adapter_its_header_read_timeout() -> None:
    """The bound the exporter serves with: the adapter's `--header-read-timeout` default, far above a real
    handshake's milliseconds and far below asyncio's 60 s."""
    from autoscaler.settings import ServeSettings

    assert HANDSHAKE_TIMEOUT_S == ServeSettings().header_read_timeout_s == 10.0
