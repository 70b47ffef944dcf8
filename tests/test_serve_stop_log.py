"""`serve` says in its log that SIGTERM stops it and how it ended, in one process as with workers.

With `--workers N` the refresh process logs `SIGTERM: stopping` and `stopped (exit code 0)`; with `--workers 0`
the same stop left no line at all, so an operator reading a terminated pod's log could not tell a clean stop
from a kill. The real `serve` runs here in a subprocess, is sent SIGTERM, and its log is read.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.hardening.adapter import write_targets
from tests.support.processes import start, wait_until_logged


@pytest.mark.parametrize("workers", [0, 1])
def test_sigterm_is_logged_and_so_is_the_exit_code(tmp_path: Path, workers: int) -> None:
    targets = write_targets(tmp_path / "targets.yaml", ["http://127.0.0.1:1/metrics"])
    log = tmp_path / "adapter.log"
    adapter = start(["autoscaler.cli", "serve", "--insecure-dev", "--listen", "127.0.0.1:0", "--targets",
                     str(targets), "--refresh-interval", "3600", "--workers", str(workers)], log)
    try:
        wait_until_logged(adapter, log, "serving external.metrics.k8s.io")
        adapter.send_signal(signal.SIGTERM)
        assert adapter.wait(timeout=60) == 0, log.read_text()
        said = log.read_text()
        assert "SIGTERM: stopping" in said, said
        assert "stopped (exit code 0)" in said, said
        assert said.index("SIGTERM: stopping") < said.index("stopped (exit code 0)"), said
    finally:
        if adapter.poll() is None:
            adapter.kill()
            adapter.wait(timeout=60)
