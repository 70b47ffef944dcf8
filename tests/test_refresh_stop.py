"""`serve` stops on SIGTERM even when its refresh goes on after the first cancel (`exporter/stopping.py`).

An HTTP client can turn a cancel that lands as its request's own timeout fires into that timeout (the
`kubernetes.aio` client over aiohttp did, tests/kube/test_session_close.py). In the refresh loop that is "refresh
failed; serving the previous values", then a sleep of one refresh interval: a stop that cancelled the loop once
and waited for it waited that long, and a pod being deleted waited for its grace period's SIGKILL (the Lease not
released, the last deletion costs maybe not written)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hardening.adapter import write_targets
from tests.support.processes import TEST_PROCESS_ENV, wait_until_logged

REPO = Path(__file__).resolve().parent.parent

SERVE_WITH_A_STUBBORN_SOURCE = '''
import sys

from autoscaler.sources.scrape import ScrapeSource
from tests.support.stubborn import StubbornRequest

request = None


async def collect(self, now):
    """Every refresh's read hangs; the first cancel comes out as the read's timeout."""
    global request
    request = request or StubbornRequest()
    print("collecting", flush=True)
    await request()


ScrapeSource.collect = collect

if __name__ == "__main__":  # the serving workers start by importing this file again
    from autoscaler.cli import main

    main(sys.argv[1:])
'''


@pytest.mark.parametrize("workers", [0, 1])
def test_sigterm_stops_serve_whose_refresh_takes_its_first_cancel_for_a_timeout(tmp_path: Path, workers: int) -> None:
    targets = write_targets(tmp_path / "targets.yaml", ["http://127.0.0.1:1/metrics"])
    (tmp_path / "stubborn_serve.py").write_text(SERVE_WITH_A_STUBBORN_SOURCE)
    log = tmp_path / "adapter.log"
    with log.open("w") as out:
        adapter = subprocess.Popen(
            [sys.executable, str(tmp_path / "stubborn_serve.py"), "serve", "--insecure-dev", "--listen",
             "127.0.0.1:0", "--targets", str(targets), "--refresh-interval", "3600",
             "--workers", str(workers)],
            stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path,
            env={**os.environ, **TEST_PROCESS_ENV, "PYTHONPATH": str(REPO)})
    try:
        wait_until_logged(adapter, log, "serving external.metrics.k8s.io", "collecting")
        adapter.send_signal(signal.SIGTERM)
        try:
            code = adapter.wait(timeout=60)  # the refresh interval is an hour
        except subprocess.TimeoutExpired:
            pytest.fail(f"serve --workers {workers} still running a minute after SIGTERM:\n{log.read_text()}")
        assert code == 0, log.read_text()
        assert "stopping: refresh went on after its cancel" in log.read_text()
    finally:
        if adapter.poll() is None:
            adapter.kill()
            adapter.wait(timeout=60)
