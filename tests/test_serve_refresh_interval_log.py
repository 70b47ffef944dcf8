"""`serve` says how often it refreshes as it was told: `--refresh-interval 0.5` was logged `refresh every 0 s`,
which reads as a refresh that never waits (or never runs), in one process as with workers. The real `serve` runs
here in a subprocess and its log is read."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from tests.hardening.adapter import write_targets
from tests.support.processes import start, wait_until_logged


@pytest.mark.parametrize("workers", [0, 1])
@pytest.mark.parametrize(("interval", "says"), [("0.5", "0.5 s"), ("15", "15 s"), ("1m", "60 s")])
def test_the_start_line_says_the_refresh_interval_given(tmp_path: Path, workers: int, interval: str,
                                                        says: str) -> None:
    targets = write_targets(tmp_path / "targets.yaml", ["http://127.0.0.1:1/metrics"])
    log = tmp_path / "adapter.log"
    adapter = start(["autoscaler.cli", "serve", "--insecure-dev", "--listen", "127.0.0.1:0", "--targets",
                     str(targets), "--refresh-interval", interval, "--workers", str(workers)], log)
    try:
        wait_until_logged(adapter, log, "serving external.metrics.k8s.io")
        said = re.findall(r"refresh every [^)]*", log.read_text())
        assert said == [f"refresh every {says}"], log.read_text()
    finally:
        adapter.send_signal(signal.SIGTERM)
        adapter.wait(timeout=60)
