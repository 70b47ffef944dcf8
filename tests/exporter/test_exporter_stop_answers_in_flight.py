"""A stop lets the scrapes in flight finish: a scraper reads its whole answer, or is refused, never reset.

aiohttp's `run_app` closed the listening socket at SIGTERM with connections still in its backlog, and asyncio dropped
those it had accepted in the same wake-up (their transports cannot attach to a closed server): 10 scrapers running
read "connection reset by peer" from an exporter that exited 0 in 0.37 s. Here the real signal reaches the real
serving loop while scrapers hammer a 400 KB /metrics.
"""

from __future__ import annotations

import asyncio
import http.client
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from exporter.stop_signals import STOPPING_SIGNALS, StopSignals
from tests.exporter.test_exporter_stuck_readers import served_many_models

SCRAPERS = 10


@pytest.fixture
def signal_handlers_kept() -> Iterator[None]:
    """The serving loop takes the stopping signals for good; pytest's process gets its own back."""
    kept = {signum: signal.getsignal(signum) for signum in STOPPING_SIGNALS}
    yield
    for signum, handler in kept.items():
        signal.signal(signum, handler)


def scrape_until_refused(port: int, outcomes: list[str]) -> None:
    """One scraper: GET /metrics again and again, each on a new connection, until one cannot connect (refused, or
    reset in the handshake: no request was sent)."""
    while True:
        try:
            client = socket.create_connection(("127.0.0.1", port), timeout=10)
        except (ConnectionRefusedError, ConnectionResetError):  # reset: its handshake crossed the socket's close
            outcomes.append("refused")
            return
        try:
            client.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = bytearray()
            while chunk := client.recv(65536):
                answer += chunk
        except OSError as error:
            outcomes.append(f"{type(error).__name__} after {len(answer)} bytes")
            return
        finally:
            client.close()
        if not answer.endswith(b"\n") or b"model-02999" not in answer:
            outcomes.append(f"cut short at {len(answer)} bytes")
            return


@pytest.mark.parametrize("attempt", range(3))
async def test_scrapers_in_flight_at_sigterm_read_their_whole_answer(signal_handlers_kept: None, attempt: int) -> None:
    served = served_many_models(signals=StopSignals(), stopped=None)
    port, serving = served.port, served.task
    await asyncio.sleep(0.2)
    outcomes: list[str] = []
    scrapers = [threading.Thread(target=scrape_until_refused, args=(port, outcomes)) for _ in range(SCRAPERS)]
    for scraper in scrapers:
        scraper.start()
    await asyncio.sleep(0.5)
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.wait_for(serving, timeout=30)
    for scraper in scrapers:
        await asyncio.to_thread(scraper.join, 30)
    # A connection whose handshake the kernel completes between the stop's last accept and the socket's close is
    # reset with it, the scraper having read nothing, its request never read: refused in all but name. TCP's own
    # window, microseconds wide quiet (one scraper of ten in a clean-clone CI run), wider while a loaded machine
    # delays the loop between them (two of ten at load 7). Before, asyncio's dropped accepts and the backlog reset
    # every scraper running; no answer is ever cut.
    crossed = [outcome for outcome in outcomes if outcome == "ConnectionResetError after 0 bytes"]
    assert len(crossed) < SCRAPERS // 2, outcomes
    assert sorted(outcomes) == sorted(["refused"] * (SCRAPERS - len(crossed)) + crossed), outcomes


def scrape_kept_alive_until_refused(port: int, outcomes: list[str], stop: threading.Event) -> None:
    """One scraper on a kept-alive connection, as Prometheus and the adapter scrape: GET /metrics on it every 20 ms,
    a new connection when the exporter closes it, until one cannot connect."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    served = 0
    while not stop.is_set():
        try:
            connection.request("GET", "/metrics")
            response = connection.getresponse()
            response.read()
            served += 1
            if response.will_close:
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                served = 0
        except (ConnectionRefusedError, ConnectionResetError) as error:
            if served == 0:  # a new connection: refused, or reset in its handshake as the socket closed
                outcomes.append("refused")
                return
            outcomes.append(f"{type(error).__name__} on a kept-alive connection")
            return
        except (OSError, http.client.HTTPException) as error:
            outcomes.append(f"{type(error).__name__} on a {'kept-alive' if served else 'new'} connection")
            return
        time.sleep(0.02)


@pytest.mark.parametrize("attempt", range(3))
async def test_scrapers_on_kept_alive_connections_at_a_stop_are_refused_not_reset(attempt: int) -> None:
    """Before: the stop's grace ended with nothing in flight, and the idle kept-alive connections were closed under
    the scrapers' next requests: ConnectionResetError. Now the answers during the stop say `Connection: close`."""
    served = served_many_models()
    port, stopped, serving = served.port, served.stopped, served.task
    await asyncio.sleep(0.2)
    outcomes: list[str] = []
    stop = threading.Event()
    scrapers = [threading.Thread(target=scrape_kept_alive_until_refused, args=(port, outcomes, stop))
                for _ in range(6)]
    for scraper in scrapers:
        scraper.start()
    await asyncio.sleep(1.0)
    stopped.set()
    await asyncio.wait_for(serving, timeout=30)
    await asyncio.sleep(0.5)
    stop.set()
    for scraper in scrapers:
        await asyncio.to_thread(scraper.join, 30)
    assert outcomes == ["refused"] * 6, outcomes
