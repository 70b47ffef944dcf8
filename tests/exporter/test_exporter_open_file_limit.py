"""An exporter at its open-file limit says so once, not once per refused connection, and serves again after.

At `ulimit -n 30` with 60 idle connections held to its port, the exporter wrote about 89,000 lines in 10 s:
asyncio's `socket.accept() out of system resource` traceback, up to 128 times per wake-up (its accept loop goes
on after the error, and schedules a retry each time, so the retries multiplied), and at a stop `ValueError:
Invalid file descriptor: -1` from the retries left over. That buried everything else in `kubectl logs` and spent
CPU. The real exporter runs here with a low RLIMIT_NOFILE, and the test holds the connections.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.open_file_limit import SAID, held_connections, lines, open_files_limit
from tests.support.processes import (
    TEST_PROCESS_ENV,
    free_port,
    http_get,
    poll,
    stop,
    wait_until_answers,
    wait_until_logged,
)

LIMIT = 30
"""The exporter's open-file limit, soft and hard: a few files over what it opens to serve."""

HELD = 60
"""Idle connections the test holds open: more than the limit lets the exporter accept."""

WATCHED_S = 3.0
"""How long the log is watched at the limit: three of asyncio's one-second retries."""


def _low_open_file_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


@contextmanager
def exporter_at_a_low_limit(log: Path, port: int, soft: int = LIMIT,
                            hard: int = LIMIT) -> Iterator[subprocess.Popen[bytes]]:
    """The real exporter started at `soft` open files under a hard limit of `hard` (`LIMIT` both by default)."""
    with open(log, "ab") as output:
        exporter = subprocess.Popen(
            [sys.executable, "-m", "exporter.cli", "--listen", f"127.0.0.1:{port}", "--modelmesh-url",
             "http://127.0.0.1:1/metrics", "--no-gpu"], stdout=output, stderr=subprocess.STDOUT,
            env={**os.environ, **TEST_PROCESS_ENV},
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard)))
    try:
        wait_until_answers(f"http://127.0.0.1:{port}/healthz", exporter, log)
        yield exporter
    finally:
        stop(exporter)


def test_at_its_open_file_limit_it_says_so_once_and_serves_again_once_connections_close(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "exporter.log"
    with exporter_at_a_low_limit(log, port) as exporter:
        before = len(lines(log))
        with held_connections(port, HELD):
            wait_until_logged(exporter, log, SAID, timeout=60)
            time.sleep(WATCHED_S)  # asyncio retries the accept every second: the flood came at each retry
            at_the_limit = lines(log)[before:]
        said = [line for line in at_the_limit if SAID in line]
        assert len(said) == 1, "\n".join(at_the_limit[:40])
        assert len(at_the_limit) <= 5, "\n".join(at_the_limit[:40])
        assert "Traceback" not in "\n".join(at_the_limit)
        warning = said[0]
        assert "WARNING" in warning
        assert f"open-file limit ({LIMIT}" in warning, warning  # the number the operator compares
        assert "RLIMIT_NOFILE" in warning and "ulimit" in warning, warning  # what to raise
        assert f":{port}" in warning, warning  # which port's clients to look for
        # Once the clients let go, it accepts again: /metrics answers, and the outage's end is said with its count.
        assert poll(lambda: http_get(f"http://127.0.0.1:{port}/metrics", timeout=5)[0] == 200, timeout=60)
        wait_until_logged(exporter, log, "accepting connections again", timeout=60)
        back = next(line for line in lines(log) if "accepting connections again" in line)
        assert "refused" in back, back
        exporter.send_signal(signal.SIGTERM)
        assert exporter.wait(timeout=60) == 0
    text = log.read_text()
    assert "Traceback" not in text
    assert text.count(SAID) == 1, text  # the backlog accepted as files free up is one outage, not one per file


def test_the_exporter_raises_a_low_soft_limit_to_the_hard_one_and_says_so_once(tmp_path: Path) -> None:
    """As `serve` does: under a container runtime's soft 1,024 below a higher hard limit (some containerd 2
    installations), the exporter stayed at 1,024, where its clients' connections (Prometheus, the adapter, a
    client that leaks them) run it out of files while the kernel allows more."""
    hard = min(4096, open_files_limit(os.getpid())[1])
    soft = hard // 2  # 1,024 where the hard limit is 2,048 or more
    port = free_port()
    log = tmp_path / "exporter.log"
    with exporter_at_a_low_limit(log, port, soft, hard) as exporter:
        assert open_files_limit(exporter.pid) == (hard, hard)  # what `cat /proc/PID/limits` shows the operator
    said = [line for line in lines(log) if "open-file limit" in line]
    assert len(said) == 1, log.read_text()
    assert "INFO" in said[0], said[0]
    assert f"open-file limit raised from {soft} to {hard} (the hard limit)" in said[0], said[0]


CLOSED_IN_AN_OUTAGE = """
import asyncio, logging, sys
from exporter.accept_limit import quiet_accept_errors
from exporter.listen import bind_listeners

async def serve() -> None:
    loop = asyncio.get_running_loop()
    quiet_accept_errors(loop)  # as the exporter's app and the adapter's site do
    server = await loop.create_server(asyncio.Protocol, sock=bind_listeners("127.0.0.1", int(sys.argv[1]))[0])
    print("ready", flush=True)
    await loop.run_in_executor(None, sys.stdin.readline)  # the test's word that the outage is said
    server.close()  # a stop: the port closes, and the process winds down for longer than asyncio's retry delay
    await asyncio.sleep(2)
    print("wound down", flush=True)

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
asyncio.run(serve())
"""


def test_a_port_closed_in_an_outage_winds_down_without_a_traceback(tmp_path: Path) -> None:
    """asyncio's retry of the accept, left scheduled when a stop closes the port in an outage, ran on the closed
    socket: `ValueError: Invalid file descriptor: -1`, once per retry left (858 of them in a review). The exporter
    and the adapter both close the port first and wind down after; here a server on the same sockets and handler
    winds down for two seconds, past the retry."""
    port = free_port()
    log = tmp_path / "server.log"
    with open(log, "ab") as output:
        server = subprocess.Popen([sys.executable, "-c", CLOSED_IN_AN_OUTAGE, str(port)], stdin=subprocess.PIPE,
                                  stdout=output, stderr=subprocess.STDOUT, preexec_fn=_low_open_file_limit)
    try:
        wait_until_logged(server, log, "ready", timeout=60)
        with held_connections(port, HELD):
            wait_until_logged(server, log, SAID, timeout=60)
            server.communicate(b"close\n", timeout=60)  # stdin closed after, so nothing is left open here
            assert server.returncode == 0, log.read_text()[-4000:]
    finally:
        stop(server)
    text = log.read_text()
    assert "wound down" in text, text[-4000:]
    assert "Traceback" not in text, text[-4000:]
    assert text.count(SAID) == 1, text[-4000:]
