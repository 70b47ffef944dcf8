"""The exporter stops cleanly on SIGHUP, and on SIGTERM or SIGHUP while it waits for the kubelet at start.

SIGHUP (a terminal closed) killed a serving exporter with no line (exit 129), and a SIGTERM during the start-up
wait for the kubelet (up to `--gpu-pod-resources-wait`, 30 s) killed it with none either (exit 143), although
`serve` says `SIGTERM while starting: stopped` and exits 0 there. Signals repeated while it stops are said once and
ignored, through its whole clean-up. The real exporter runs in a subprocess here.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.exporter.gpu_rig import exporter_in_a_hung_pass
from tests.support.processes import free_port, running, start, wait_until_logged

REPEATS = 300
"""Stop signals sent after the first, one every 10 ms until the exporter exits: a supervisor repeating itself."""


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


def test_stop_signals_repeated_while_it_cleans_up_are_logged_and_ignored_and_it_exits_0(tmp_path: Path) -> None:
    """aiohttp's handlers raised its GracefulExit again at a second SIGTERM during the clean-up (exit 1), and were
    put back to the default as the clean-up ended, so one a moment later killed the exporter (exit 143): a pod
    deleted by a supervisor that repeats its SIGTERM read as crashed. The clean-up is held here by an NVML pass
    hung in the driver (a second, `STOP_WAIT_S`), so that repeated signals land in it and after it."""
    with exporter_in_a_hung_pass(tmp_path) as (exporter, log):
        exporter.send_signal(signal.SIGTERM)
        for _ in range(REPEATS):
            if exporter.poll() is not None:
                break
            exporter.send_signal(signal.SIGTERM)
            time.sleep(0.01)
        code = exporter.wait(timeout=60)
    text = log.read_text()
    assert code == 0, text
    assert "SIGTERM while stopping: ignored" in text, text
    assert "Traceback" not in text, text
