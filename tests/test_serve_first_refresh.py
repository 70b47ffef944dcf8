"""The first refresh runs as `serve` starts, not one `--refresh-interval` later: docs/operations.md tells a user
whose pod is not Ready how long to wait, and a replica of a rolling update is Ready as soon as it has values."""

from __future__ import annotations

import os
import re
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.support.processes import TEST_PROCESS_ENV

REPO = Path(__file__).resolve().parent.parent
OPERATIONS = (REPO / "docs" / "operations.md").read_text()

TARGETS = """runtimes:
  - namespace: default
    deployment: modelmesh-serving-demo
    pods:
      - {name: demo-0, url: "http://127.0.0.1:1/metrics"}
"""


def readyz(port: int) -> int:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=context, timeout=5) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_a_new_adapter_is_ready_long_before_one_refresh_interval(tmp_path: Path) -> None:
    """With an hour between refreshes, /readyz answers 200 well within a minute: the first refresh does not
    wait for the interval (an exporter that refuses connections fails fast; one that hangs is cut at
    --scrape-timeout)."""
    (tmp_path / "targets.yaml").write_text(TARGETS)
    log = tmp_path / "adapter.log"
    with log.open("w") as out:
        adapter = subprocess.Popen(
            [sys.executable, "-m", "autoscaler.cli", "serve", "--insecure-dev", "--listen", "127.0.0.1:0",
             "--targets", str(tmp_path / "targets.yaml"), "--refresh-interval", "3600", "--workers", "0"],
            stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path,
            env={**os.environ, **TEST_PROCESS_ENV, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 120  # generous for a loaded machine; the interval is 3600 s
        port = None
        while port is None:
            found = re.search(r"serving external\.metrics\.k8s\.io on https://127\.0\.0\.1:(\d+)", log.read_text())
            port = int(found.group(1)) if found else None
            assert port or adapter.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"the adapter never said where it serves:\n{log.read_text()}"
            time.sleep(0.2)
        while readyz(port) != 200:
            assert time.monotonic() < deadline, "not Ready: the first refresh waited for the refresh interval"
            time.sleep(0.2)
    finally:
        adapter.terminate()
        adapter.wait(timeout=60)


def test_the_operations_guide_does_not_tell_a_user_to_wait_a_refresh_interval_for_the_first_refresh() -> None:
    """It said "/readyz answers 503 until the first refresh is done, which takes one --refresh-interval" and
    "wait one --refresh-interval": the first refresh starts at once and takes seconds."""
    assert "which takes one `--refresh-interval`" not in OPERATIONS
    assert "first refresh yet\"**: wait one `--refresh-interval`" not in OPERATIONS
