"""`serve` stops cleanly on every stopping signal, however many come: its log says so, it exits 0, and its
scratch directories (the generated private key, the workers' metrics files) are gone from TMPDIR.

A second SIGTERM a few milliseconds after the first (the demo sent one after the group's) came after the event
loop had put SIGTERM back to its default action, while the workers were being stopped: exit 143, every worker's
ERROR "the refresh process has gone", the key directory left. SIGHUP (a terminal closed) killed it at once with
no line. Here the real `serve` runs in a subprocess with its own TMPDIR and is sent the signals.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.hardening.adapter import write_targets
from tests.support.processes import start, wait_until_logged


def _serve(tmp_path: Path, workers: int) -> tuple[subprocess.Popen[bytes], Path, Path]:
    """`serve --workers N` with TMPDIR its own; (process, log, TMPDIR) once it serves."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    targets = write_targets(tmp_path / "targets.yaml", ["http://127.0.0.1:1/metrics"])
    log = tmp_path / "adapter.log"
    adapter = start(["autoscaler.cli", "serve", "--insecure-dev", "--listen", "127.0.0.1:0", "--targets",
                     str(targets), "--refresh-interval", "3600", "--workers", str(workers)], log,
                    env={"TMPDIR": str(scratch)})
    wait_until_logged(adapter, log, "serving external.metrics.k8s.io")
    return adapter, log, scratch


def _stopped_cleanly(adapter: subprocess.Popen[bytes], log: Path, scratch: Path, signum: signal.Signals) -> None:
    said = log.read_text()
    assert adapter.returncode == 0, said
    assert f"{signum.name}: stopping" in said, said
    assert "stopped (exit code 0)" in said, said
    assert "ERROR" not in said, said
    assert sorted(path.name for path in scratch.iterdir()) == [], said


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signals_that_keep_coming_while_it_stops_do_not_cut_the_clean_up_short(
        tmp_path: Path, signum: signal.Signals) -> None:
    adapter, log, scratch = _serve(tmp_path, workers=2)
    try:
        adapter.send_signal(signum)
        deadline = time.monotonic() + 60  # a hang guard only
        while adapter.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
            adapter.send_signal(signum)
        assert adapter.wait(timeout=60) is not None
        _stopped_cleanly(adapter, log, scratch, signum)
    finally:
        if adapter.poll() is None:
            adapter.kill()
            adapter.wait(timeout=60)


@pytest.mark.parametrize("workers", [0, 2])
def test_sighup_stops_it_as_sigterm_does(tmp_path: Path, workers: int) -> None:
    adapter, log, scratch = _serve(tmp_path, workers=workers)
    try:
        os.kill(adapter.pid, signal.SIGHUP)
        adapter.wait(timeout=60)
        _stopped_cleanly(adapter, log, scratch, signal.SIGHUP)
    finally:
        if adapter.poll() is None:
            adapter.kill()
            adapter.wait(timeout=60)
