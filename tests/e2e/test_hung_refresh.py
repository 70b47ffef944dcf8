"""A refresh process that hangs (SIGSTOP here; a deadlock or a wait that never ends in a cluster) is not dead:
its serving workers' pipes stay open, so they would serve its last values forever, Ready and live, while the
load moves on. The workers notice that no snapshot came for longer than the adapter calls data stale, answer
503 (the HPA holds), fail /readyz (the Service sends the HPA to the other replica) and /livez (the kubelet
restarts the pod), and say so in the log; a refresh process that comes back is served again."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.e2e.conftest import data_path_running
from tests.support.fork_server import command_line
from tests.support.processes import http_get, poll

pytestmark = pytest.mark.slow


def test_a_hung_refresh_process_makes_the_pod_unready_and_not_live_instead_of_serving_frozen_values(
        tmp_path: Path) -> None:
    # refresh every 1 s, data stale after 3 s: a snapshot older than 3 + 1 s, and at least 10 s, is a stall
    with data_path_running(tmp_path, adapter_args=["--workers", "1"]) as path:
        poll(lambda: path.value("modelmesh_request_load"), timeout=30)
        with refresh_stopped(path.adapter_url):
            _, text = poll(lambda: refused(path.served("modelmesh_request_load")), timeout=25)
            assert "ServiceUnavailable" in text and "not been refreshed" in text, text
            assert http_get(path.adapter_url + "/readyz")[0] == 503
            assert http_get(path.adapter_url + "/livez")[0] == 503
            poll(lambda: "no new values from the refresh process for" in path.adapter_log(), timeout=30)
        poll(lambda: path.value("modelmesh_request_load"), timeout=15)
        assert http_get(path.adapter_url + "/readyz")[0] == 200
        assert http_get(path.adapter_url + "/livez")[0] == 200
        poll(lambda: "values from the refresh process arrive again" in path.adapter_log(), timeout=30)


def refused(answer: tuple[int, float | str]) -> tuple[int, str] | None:
    code, text = answer
    return (code, str(text)) if code != 0 else None


@contextmanager
def refresh_stopped(adapter_url: str) -> Iterator[None]:
    """The adapter's refresh process stopped (SIGSTOP: hung, as far as its workers can tell) for the block."""
    pid = refresh_process(adapter_url)
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def refresh_process(adapter_url: str) -> int:
    """The adapter this test started (`python -m autoscaler.cli serve --listen ...:PORT`): the refresh process,
    the parent of its spawned serving workers."""
    listen = adapter_url.removeprefix("https://").encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = command_line(int(entry.name))  # (a forked test server's as it was asked)
            except OSError:
                continue
            if b"autoscaler.cli" in command and listen in command:
                return int(entry.name)
    raise AssertionError(f"no adapter process listening on {listen!r}")
