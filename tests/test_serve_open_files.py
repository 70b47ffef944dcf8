"""`serve` raises its open-file limit to the hard limit, as Go programs do: the refresh keeps a connection per
exporter scraped, and under a container runtime's soft 1,024 a fleet of about 900 pods failed its scrapes with
"Too many open files" (docs/performance.md, File descriptors)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support.processes import TEST_PROCESS_ENV, poll, serving_workers, stop

REPO = Path(__file__).resolve().parent.parent

TARGETS = """runtimes:
  - namespace: default
    deployment: modelmesh-serving-demo
    pods:
      - {name: demo-0, url: "http://127.0.0.1:1/metrics"}
"""


def open_files_limit(pid: int) -> tuple[int, int]:
    """(soft, hard) as the kernel shows them in /proc/PID/limits, what `cat /proc/PID/limits` tells an operator."""
    line = next(line for line in Path(f"/proc/{pid}/limits").read_text().splitlines()
                if line.startswith("Max open files"))
    soft, hard = re.findall(r"\d+", line)[:2]
    return int(soft), int(hard)


def serve_under(tmp_path: Path, nofile: str) -> tuple[subprocess.Popen[bytes], Path]:
    (tmp_path / "targets.yaml").write_text(TARGETS)
    log = tmp_path / "adapter.log"
    with log.open("w") as out:
        adapter = subprocess.Popen(
            ["prlimit", f"--nofile={nofile}", sys.executable, "-m", "autoscaler.cli", "serve", "--insecure-dev",
             "--listen", "127.0.0.1:0", "--targets", str(tmp_path / "targets.yaml"), "--refresh-interval", "3600"],
            stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path,
            env={**os.environ, **TEST_PROCESS_ENV, "PYTHONPATH": str(REPO)})
    return adapter, log


def test_serve_raises_a_low_soft_limit_to_the_hard_one_for_itself_and_its_workers(tmp_path: Path) -> None:
    hard = min(4096, open_files_limit(os.getpid())[1])
    soft = hard // 2  # 1,024 where the hard limit is 2,048 or more
    adapter, log = serve_under(tmp_path, f"{soft}:{hard}")
    try:
        poll(lambda: "serving external.metrics.k8s.io" in log.read_text() or adapter.poll() is not None, 120)
        assert adapter.poll() is None, log.read_text()
        assert open_files_limit(adapter.pid) == (hard, hard)
        workers = serving_workers(adapter.pid)
        assert workers and all(open_files_limit(worker) == (hard, hard) for worker in workers)
        assert f"open-file limit raised from {soft} to {hard} (the hard limit)" in log.read_text()
    finally:
        stop(adapter)


def test_serve_says_nothing_of_a_limit_already_at_its_hard_limit(tmp_path: Path) -> None:
    adapter, log = serve_under(tmp_path, "2048:2048")
    try:
        poll(lambda: "serving external.metrics.k8s.io" in log.read_text() or adapter.poll() is not None, 120)
        assert adapter.poll() is None, log.read_text()
        assert open_files_limit(adapter.pid) == (2048, 2048)
        assert "open-file limit" not in log.read_text()
    finally:
        stop(adapter)
