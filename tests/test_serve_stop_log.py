"""`serve` says in its log that SIGTERM stops it and how it ended, in one process as with workers.

With `--workers N` the refresh process logs `SIGTERM: stopping` and `stopped (exit code 0)`; with `--workers 0`
the same stop left no line at all, so an operator reading a terminated pod's log could not tell a clean stop
from a kill. The real `serve` runs here in a subprocess, is sent SIGTERM, and its log is read.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.processes import TEST_PROCESS_ENV

REPO = Path(__file__).resolve().parent.parent

TARGETS = """runtimes:
  - namespace: default
    deployment: modelmesh-serving-demo
    pods:
      - {name: demo-0, url: "http://127.0.0.1:1/metrics"}
"""


@pytest.mark.parametrize("workers", [0, 1])
def test_sigterm_is_logged_and_so_is_the_exit_code(tmp_path: Path, workers: int) -> None:
    (tmp_path / "targets.yaml").write_text(TARGETS)
    log = tmp_path / "adapter.log"
    with log.open("w") as out:
        adapter = subprocess.Popen(
            [sys.executable, "-m", "autoscaler.cli", "serve", "--insecure-dev", "--listen", "127.0.0.1:0",
             "--targets", str(tmp_path / "targets.yaml"), "--refresh-interval", "3600", "--workers", str(workers)],
            stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path,
            env={**os.environ, **TEST_PROCESS_ENV, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 120  # generous for a loaded machine
        while "serving external.metrics.k8s.io" not in log.read_text():
            assert adapter.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"the adapter never started serving:\n{log.read_text()}"
            time.sleep(0.2)
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
