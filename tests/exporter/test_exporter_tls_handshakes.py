"""Clients that open a TCP connection to the exporter's HTTPS port and never finish the TLS handshake cost it a
bounded number of handshakes, for seconds.

asyncio gave such a handshake 60 s, and the `ConnectionCap` counts a connection only once its handshake is over:
1,000 clients that connected and sent no ClientHello held the sidecar at 361 MiB (its limit is 256Mi) for that
minute, and nothing counted them. Now a handshake not over within its bound is closed by the exporter and counted
(`handshake_timeout`), and at the most under way (four times `--max-connections`, at least 64) a new one takes the
place of the oldest if that one is stuck (under way a second: `handshake_displaced`), else is refused; a real
client is answered throughout, and a burst of scrapers above a small cap is not reset mid-handshake. Checked
with raw sockets that send nothing, as such a client does, against the real `serve`, with a short bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading
import time
import urllib.request

import pytest
import trustme

from exporter import names, tls_handshakes
from exporter.tls_handshakes import (
    DISPLACE_AFTER_S,
    HANDSHAKE_TIMEOUT_S,
    HANDSHAKES_AT_LEAST,
    HANDSHAKES_PER_PLACE,
)
from tests.exporter.test_exporter_stuck_readers import Served, series, served_many_models
from tests.support.certificates import issue_cert
from tests.support.waiting import eventually

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
        # Each connection's age is read from before its connect, so that the exporter cannot have accepted it
        # sooner: one closed within the bound reads younger than BOUND_S, however late a loaded machine sees it.
        connected: dict[socket.socket, float] = {}
        for _ in range(12):
            before = time.monotonic()
            connected[await asyncio.to_thread(silent_client, served.port)] = before
        silent = list(connected)
        assert await asyncio.to_thread(get, f"https://127.0.0.1:{served.port}/healthz", client) == "ok\n"
        closed_at: dict[socket.socket, float] = {}
        hang_guard = time.monotonic() + BOUND_S + 30.0
        while len(closed_at) < len(silent) and time.monotonic() < hang_guard:
            await asyncio.sleep(0.05)
            closed_at |= {each: time.monotonic() for each in silent
                          if each not in closed_at and closed_by_the_exporter(each)}
        assert len(closed_at) == len(silent), f"{len(silent) - len(closed_at)} silent connections still open 30 s " \
                                              f"past the {BOUND_S} s bound"
        ages = sorted(round(closed_at[each] - connected[each], 2) for each in silent)
        assert ages[0] >= BOUND_S, f"closed within the bound: {ages} s after their connect"
        text = await asyncio.to_thread(get, f"https://127.0.0.1:{served.port}/metrics", client)
        dropped = series(text, names.CONNECTIONS_DROPPED_TOTAL)
        assert dropped[f'{names.CONNECTIONS_DROPPED_TOTAL}{{reason="handshake_timeout"}}'] == 12, dropped
        assert dropped[f'{names.CONNECTIONS_DROPPED_TOTAL}{{reason="made_room"}}'] == 0, dropped
    finally:
        for each in silent:
            each.close()
        served.stopped.set()
        await served.task


async def test_at_the_most_handshakes_a_new_one_waits_out_the_young_and_displaces_the_stuck(
        tls: tuple[ssl.SSLContext, ssl.SSLContext], monkeypatch: pytest.MonkeyPatch) -> None:
    """Young: while no handshake is under way DISPLACE_AFTER_S, here an hour, so that a loaded machine's slow
    connects (74 of them, one by one) cannot age the first past it. Stuck: at the real DISPLACE_AFTER_S, waited out."""
    server, client = tls
    cap = 2
    most = max(HANDSHAKES_AT_LEAST, HANDSHAKES_PER_PLACE * cap)
    served = served_many_models(ssl_context=server, handshake_timeout_s=30.0, max_connections=cap)
    silent: list[socket.socket] = []
    try:
        await asyncio.sleep(0.2)
        monkeypatch.setattr(tls_handshakes, "DISPLACE_AFTER_S", 3600.0)
        for _ in range(most + 10):
            silent.append(await asyncio.to_thread(silent_client, served.port))
        dropped = served.counts.dropped
        await eventually(lambda: dropped["refused"] + dropped["handshake_displaced"] == 10)  # each one past `most`
        closed = [closed_by_the_exporter(each) for each in silent]
        assert closed == [False] * most + [True] * 10, closed  # none under way an hour yet: the new ones refused
        assert served.counts.dropped["refused"] == 10
        assert served.counts.dropped["handshake_displaced"] == 0
        monkeypatch.setattr(tls_handshakes, "DISPLACE_AFTER_S", DISPLACE_AFTER_S)
        await asyncio.sleep(DISPLACE_AFTER_S)
        newer = [await asyncio.to_thread(silent_client, served.port) for _ in range(10)]
        silent += newer
        await asyncio.sleep(0.3)
        closed = [closed_by_the_exporter(each) for each in silent[:most] + newer]
        assert closed == [True] * 10 + [False] * (most - 10) + [False] * 10, closed  # the stuck oldest displaced
        assert await asyncio.to_thread(get, f"https://127.0.0.1:{served.port}/healthz", client) == "ok\n"
        assert served.counts.dropped["handshake_displaced"] == 11  # the client's own took one more place
        assert served.counts.dropped["made_room"] == 0
        assert served.counts.dropped["handshake_timeout"] == 0
    finally:
        for each in silent:
            each.close()
        served.stopped.set()
        with contextlib.suppress(asyncio.CancelledError):
            await served.task


async def test_scrapers_at_once_above_a_small_cap_are_all_answered(
        tls: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    """At `--max-connections 1` five scrapers at once (one placed, four in line), ten times: each handshake is over
    (none reset for another), each scraper waits its turn and reads its answer. 4 handshakes under way at most
    reset 4 of each 5."""
    server, client = tls
    served = served_many_models(ssl_context=server, max_connections=1)
    try:
        await asyncio.sleep(0.2)
        for _ in range(10):
            together = threading.Barrier(5)
            answers: list[str] = []

            def scrape(barrier: threading.Barrier = together, answers: list[str] = answers) -> None:
                barrier.wait()
                try:
                    answers.append(get(f"https://127.0.0.1:{served.port}/metrics", client))
                except OSError as error:
                    answers.append(repr(error))

            scrapers = [threading.Thread(target=scrape) for _ in range(5)]
            for scraper in scrapers:
                scraper.start()
            for scraper in scrapers:
                await asyncio.to_thread(scraper.join, 60)
            assert len(answers) == 5
            assert all("model-02999" in answer for answer in answers), (
                [answer[:60] for answer in answers], served.counts.dropped)
        assert served.counts.dropped["handshake_displaced"] == 0
    finally:
        served.stopped.set()
        await served.task


def test_the_exporter_bounds_a_handshake_as_the_adapter_its_header_read_timeout() -> None:
    """The bound the exporter serves with: the adapter's `--header-read-timeout` default, far above a real
    handshake's milliseconds and far below asyncio's 60 s."""
    from autoscaler.settings import ServeSettings

    assert HANDSHAKE_TIMEOUT_S == ServeSettings().header_read_timeout_s == 10.0

