"""The exporter stops cleanly on SIGHUP, and on SIGTERM or SIGHUP while it waits for the kubelet at start.

SIGHUP (a terminal closed) killed a serving exporter with no line (exit 129), and a SIGTERM during the start-up
wait for the kubelet (up to `--gpu-pod-resources-wait`, 30 s) killed it with none either (exit 143), although
`serve` says `SIGTERM while starting: stopped` and exits 0 there. The real exporter runs in a subprocess here.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.support.processes import free_port, running, start, wait_until_logged


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_stops_a_serving_exporter_and_says_so(tmp_path: Path, signum: signal.Signals) -> None:
    port = free_port()
    log = tmp_path / "exporter.log"
    with running(["exporter.cli", "--listen", f"127.0.0.1:{port}", "--no-gpu", "--modelmesh-url",
                  "http://127.0.0.1:1/metrics"], f"http://127.0.0.1:{port}/healthz", log) as exporter:
        exporter.send_signal(signum)
        assert exporter.wait(timeout=60) == 0, log.read_text()
    text = log.read_text()
    assert text.rstrip().endswith("stopping: /metrics closes and the background sampling ends"), text
    assert "Traceback" not in text


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_while_it_waits_for_the_kubelet_is_logged_and_exits_0(tmp_path: Path, signum: signal.Signals) -> None:
    log = tmp_path / "exporter.log"
    exporter = start(["exporter.cli", "--listen", f"127.0.0.1:{free_port()}", "--modelmesh-url",
                      "http://127.0.0.1:1/metrics", "--gpu-pod-resources-socket", str(tmp_path / "kubelet.sock"),
                      "--gpu-pod-name", "p", "--gpu-pod-namespace", "ns"], log)
    try:
        wait_until_logged(exporter, log, "waiting for the kubelet")
        exporter.send_signal(signum)
        assert exporter.wait(timeout=60) == 0, log.read_text()
        text = log.read_text()
        assert text.rstrip().endswith(f"{signum.name} while starting: stopped"), text
    finally:
        if exporter.poll() is None:
            exporter.kill()
            exporter.wait(timeout=60)
