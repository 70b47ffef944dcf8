"""A targets file naming one pod twice in a runtime is refused at start: one line, exit status 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.hardening.adapter import write_targets
from tests.support.processes import free_port


def test_a_pod_listed_twice_stops_start_up_with_one_line(tmp_path: Path) -> None:
    targets = write_targets(tmp_path / "targets.yaml", ["http://127.0.0.1:1/metrics", "http://127.0.0.1:2/metrics"],
                            names=["pod-0", "pod-0"])
    result = subprocess.run(
        [sys.executable, "-m", "autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{free_port()}",
         "--targets", str(targets)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert "cannot start:" in result.stderr and "'pod-0' is listed twice" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
