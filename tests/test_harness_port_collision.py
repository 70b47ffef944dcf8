"""The harness's readiness: a server a test starts is ready when IT answers, not when anything on its port does.

In CI, another checkout's test run shared this run's port block; its ModelMesh stand-in (answering every path with
its body) took the port an exporter test had chosen, the exporter could not bind it, and `running` took the
stand-in's answer at /healthz for the exporter being up: the test then asserted on someone else's server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.exporter.modelmesh_wire import answering_in_a_thread
from tests.support.ports import machine_has_ipv6
from tests.support.processes import PortTakenError, free_port, http_get, running, start, stop, wait_until_answers


def test_a_port_held_by_a_server_answering_every_path_is_not_the_server_we_started(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with answering_in_a_thread(lambda path: b"someone else's body\n") as other:
        port = urlsplit(other).port
        with pytest.raises(PortTakenError) as refused, running(
                ["http.server", "--bind", "127.0.0.1", str(port)], f"http://127.0.0.1:{port}/healthz", log):
            pass
    said = str(refused.value)
    assert f"port {port} is held by another process (pid {os.getpid()}: " in said
    assert "not the http.server we started" in said
    assert "TEST_PORT_BLOCK_OFFSET" in said


def test_a_server_listening_on_every_address_is_ready_at_its_loopback_url(tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / "healthz").write_text("ok\n")
    with running(["http.server", "--directory", str(tmp_path), str(port)], f"http://127.0.0.1:{port}/healthz",
                 tmp_path / "server.log"):
        assert http_get(f"http://127.0.0.1:{port}/healthz") == (200, "ok\n")


@pytest.mark.parametrize(("held_on", "ours_on", "host"), [
    ("127.0.0.74", "127.0.0.74", "127.0.0.74"),  # a pod's own loopback address, as cluster mode gives each pod
    ("0.0.0.0", "127.0.0.1", "127.0.0.1"),  # a holder on every address takes the port on loopback too
    pytest.param("::1", "::1", "[::1]", marks=pytest.mark.skipif(not machine_has_ipv6(), reason="no IPv6 here")),
])
def test_another_process_holding_the_address_is_named(tmp_path: Path, held_on: str, ours_on: str,
                                                        host: str) -> None:
    port = free_port()
    holder = start(["http.server", "--bind", held_on, str(port)], tmp_path / "holder.log")
    try:
        wait_until_answers(f"http://{host}:{port}/", holder, tmp_path / "holder.log")
        with pytest.raises(PortTakenError, match=rf"port {port} is held by another process \(pid {holder.pid}: "), \
                running(["http.server", "--bind", ours_on, str(port)], f"http://{host}:{port}/healthz",
                        tmp_path / "ours.log"):
            pass
    finally:
        stop(holder)


def test_two_test_runs_sharing_a_port_block_are_never_handed_the_same_port() -> None:
    """Two checkouts whose offsets wrap onto one block (or that were given the same offset) each ask for ports
    while the other still holds its own, not yet bound: the second run is handed none of the first's."""
    asking = ("import sys; from tests.support.ports import free_port; print(*(free_port() for _ in range(3)), "
              "flush=True); sys.stdin.read()")
    env = {**os.environ, "PYTEST_XDIST_WORKER": "gw0", "TEST_PORT_BLOCK_OFFSET": os.environ.get(
        "TEST_PORT_BLOCK_OFFSET", "0")}
    runs = [subprocess.Popen([sys.executable, "-c", asking], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             env=env, text=True) for _ in range(2)]
    try:
        handed = [set(map(int, run.stdout.readline().split())) for run in runs if run.stdout is not None]
    finally:
        for run in runs:
            run.communicate("")
    assert len(handed[0]) == len(handed[1]) == 3
    assert not handed[0] & handed[1]
