"""A serving worker that cannot take a snapshot says what failed, not that the refresh process has gone.

A failure-injection run found it: with libfaketime preloaded (`FAKETIME=+0s`), every worker logged `ERROR ... the
refresh process has gone` and the adapter exited 1, though the refresh process was alive: a call in the receive
path failed with OSError(22), and every OSError was read as the pipe's end.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from autoscaler.api import packed
from autoscaler.api.snapshot import SnapshotHolder
from autoscaler.serving_worker import _receive_snapshots
from autoscaler.skipped_snapshots import SkippedSnapshots
from tests.fakes.node_clock import clock_off_env
from tests.hardening.adapter import write_targets
from tests.support.processes import free_port, http_get, start, wait_until_answers


async def test_a_snapshot_that_cannot_be_mapped_is_said_with_the_call_and_errno(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The refresh side passes, through the real pipe, a descriptor nothing can map (a directory's): the worker's
    receive loop says mmap failed and why, and ends as a failure, not as the pipe's end."""
    ours, theirs = multiprocessing.Pipe(duplex=True)
    directory = os.open(tmp_path, os.O_RDONLY)
    try:
        packed.send(ours, directory)
        with caplog.at_level(logging.ERROR, logger="autoscaler.workers"):
            pipe_ended = await _receive_snapshots(theirs, SnapshotHolder(), SkippedSnapshots("127.0.0.1:6443", None))
    finally:
        os.close(directory)
        ours.close()
        theirs.close()

    [line] = [record.getMessage() for record in caplog.records]
    assert pipe_ended is False
    assert "mmap.mmap(" in line and "[Errno 19] ENODEV" in line, line
    assert "(it is running)" in line and "LD_PRELOAD" in line, line
    assert "has gone" not in line


async def test_the_pipes_end_is_still_the_refresh_process_gone() -> None:
    ours, theirs = multiprocessing.Pipe(duplex=True)
    ours.close()
    try:
        assert await _receive_snapshots(theirs, SnapshotHolder(), SkippedSnapshots("127.0.0.1:6443", None)) is True
    finally:
        theirs.close()


def test_workers_serve_under_libfaketime(tmp_path: Path) -> None:
    """The report's own case: the real `serve` with two workers and libfaketime preloaded (a node clock test's
    setup) answers /readyz from its workers once they hold the first refresh's snapshot, and never says the
    refresh process has gone."""
    targets = write_targets(tmp_path / "targets.yaml", ["http://127.0.0.1:1/metrics"])
    log, port = tmp_path / "adapter.log", free_port()
    adapter = start(["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{port}", "--targets",
                     str(targets), "--refresh-interval", "3600", "--workers", "2"], log, env=clock_off_env(0))
    try:
        wait_until_answers(f"https://127.0.0.1:{port}/healthz", adapter, log)
        # Each connection reaches one of the two workers; the snapshot reaches them one after the other, so a first
        # 200 may come from one while the other still says 503. Ready means ten 200s in a row: both workers hold it.
        deadline, in_a_row = time.monotonic() + 60, 0  # a hang guard only
        while in_a_row < 10:
            assert adapter.poll() is None and time.monotonic() < deadline, log.read_text()
            in_a_row = in_a_row + 1 if http_get(f"https://127.0.0.1:{port}/readyz")[0] == 200 else 0
            time.sleep(0.05)
    finally:
        adapter.terminate()
        adapter.wait(timeout=60)
    said = log.read_text()
    assert "ERROR" not in said and "has gone" not in said, said
    assert adapter.returncode == 0, said
