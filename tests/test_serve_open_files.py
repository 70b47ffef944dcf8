"""`serve` raises its open-file limit to the hard limit, as Go programs do: the refresh keeps a connection per
exporter scraped, and under a container runtime's soft 1,024 a fleet of about 900 pods failed its scrapes with
"Too many open files" (docs/performance.md, File descriptors)."""

from __future__ import annotations

import http.client
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from autoscaler.workers import HUNG_WORKER_FLOOR_S
from tests.support.open_file_limit import SAID, held_connections, lines, open_files_limit
from tests.support.processes import (
    _INSECURE,
    TEST_PROCESS_ENV,
    free_port,
    http_get,
    poll,
    serving_workers,
    stop,
    wait_until_logged,
)

REPO = Path(__file__).resolve().parent.parent

TARGETS = """runtimes:
  - namespace: default
    deployment: modelmesh-serving-demo
    pods:
      - {name: demo-0, url: "http://127.0.0.1:1/metrics"}
"""


def serve_under(tmp_path: Path, nofile: str, listen: str = "127.0.0.1:0",
                *options: str) -> tuple[subprocess.Popen[bytes], Path]:
    """`serve` under the open-file limit `nofile` (`soft:hard`), refreshing hourly unless `options` say otherwise."""
    (tmp_path / "targets.yaml").write_text(TARGETS)
    log = tmp_path / "adapter.log"
    with log.open("w") as out:
        adapter = subprocess.Popen(
            ["prlimit", f"--nofile={nofile}", sys.executable, "-m", "autoscaler.cli", "serve", "--insecure-dev",
             "--listen", listen, "--targets", str(tmp_path / "targets.yaml"), "--refresh-interval", "3600",
             *options],
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


def test_serve_at_its_hard_open_file_limit_says_so_once_and_serves_again_once_connections_close(
        tmp_path: Path) -> None:
    """The soft limit raised, the hard one can still be reached: at 64 with 200 idle connections held, the adapter
    wrote about 176,000 lines in 6 s, asyncio's `socket.accept() out of system resource` traceback per attempt."""
    port = free_port()
    adapter, log = serve_under(tmp_path, "64:64", f"127.0.0.1:{port}")
    try:
        poll(lambda: "serving external.metrics.k8s.io" in log.read_text() or adapter.poll() is not None, 120)
        assert adapter.poll() is None, log.read_text()
        before = len(lines(log))
        with held_connections(port, 200):
            wait_until_logged(adapter, log, SAID, timeout=60)
            time.sleep(3)  # asyncio retries the accept every second: the flood came at each retry
            at_the_limit = lines(log)[before:]
        assert sum(SAID in line for line in at_the_limit) == 1, "\n".join(at_the_limit[:40])
        assert len(at_the_limit) <= 5, "\n".join(at_the_limit[:40])
        assert "open-file limit (64; RLIMIT_NOFILE, hard limit 64)" in "\n".join(at_the_limit)
        assert poll(lambda: http_get(f"https://127.0.0.1:{port}/healthz", timeout=5)[0] == 200, timeout=60)
        wait_until_logged(adapter, log, "accepting connections again", timeout=60)
    finally:
        stop(adapter)
    text = log.read_text()
    assert text.count(SAID) == 1, text[-4000:]
    assert "Traceback" not in text, text[-4000:]


def test_serve_stopped_at_its_hard_open_file_limit_exits_0_without_a_traceback(tmp_path: Path) -> None:
    """A pod deleted while clients hold the adapter's port at its limit: the outage said once, then the stop, exit 0
    and no traceback (asyncio's retries left scheduled ran on the closed port: `Invalid file descriptor: -1`)."""
    port = free_port()
    adapter, log = serve_under(tmp_path, "64:64", f"127.0.0.1:{port}")
    try:
        poll(lambda: "serving external.metrics.k8s.io" in log.read_text() or adapter.poll() is not None, 120)
        assert adapter.poll() is None, log.read_text()
        with held_connections(port, 200):
            wait_until_logged(adapter, log, SAID, timeout=60)
            adapter.send_signal(signal.SIGTERM)  # a pod deleted while its clients hold the port
            assert adapter.wait(timeout=60) == 0, log.read_text()[-4000:]
    finally:
        stop(adapter)
    text = log.read_text()
    assert "Traceback" not in text, text[-4000:]
    assert "stopped (exit code 0)" in text, text[-4000:]


SKIPPED_SAID = "out of file descriptors: cannot take the refresh process's new values"
"""What a serving worker logs, once an outage, when it has no file for the snapshot the refresh process passes."""


def test_workers_at_their_open_file_limit_skip_new_values_then_fail_health_past_the_stall_limit_and_never_stop(
        tmp_path: Path) -> None:
    """Each snapshot reaches a worker as a file descriptor; at its limit the kernel drops it. The worker raised
    `received 0 items of ancdata` and exited 1, and the whole adapter with it: a connection flood killed the
    adapter. Now the worker keeps its values, says so once, and past the stall limit (10 s at a 1 s refresh) answers
    503 and fails /readyz and /livez on the connections it has, as with a hung refresh."""
    port = free_port()
    adapter, log = serve_under(tmp_path, "64:64", f"127.0.0.1:{port}", "--workers", "2", "--refresh-interval", "1")
    kept_alive = [http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=_INSECURE) for _ in range(12)]
    try:
        poll(lambda: "serving external.metrics.k8s.io" in log.read_text() or adapter.poll() is not None, 120)
        assert adapter.poll() is None, log.read_text()
        assert poll(lambda: http_get(f"https://127.0.0.1:{port}/readyz", timeout=5)[0] == 200, timeout=60)

        def status(connection: http.client.HTTPSConnection, path: str) -> int:
            connection.request("GET", path)
            with connection.getresponse() as response:
                response.read()
                return response.status

        assert [status(connection, "/readyz") for connection in kept_alive] == [200] * len(kept_alive)
        # each worker closes a connection that sends nothing within --header-read-timeout (10 s) and accepts the
        # next waiting: 600 keep both at their limit past HUNG_WORKER_FLOOR_S, with moments of free files between
        with held_connections(port, 600):
            wait_until_logged(adapter, log, SKIPPED_SAID, timeout=90)
            skipping_since = time.monotonic()
            wait_until_logged(adapter, log, "skipped its new values for want of files", timeout=90)
            # the stalled worker answers 503 on its connections; the other may have taken a snapshot between
            # batches of connections closing (its values fresh, 200), so the kept connections answer one or both
            for path in ("/readyz", "/livez"):
                answers: set[int] = set()

                def a_503(path: str = path, answers: set[int] = answers) -> bool:
                    answers.update(status(connection, path) for connection in kept_alive)
                    return 503 in answers

                assert poll(a_503, timeout=30), answers
                assert answers <= {200, 503}, answers
            # skipped snapshots are acknowledged: not taken for a hung worker, which stops the adapter
            time.sleep(max(0.0, skipping_since + HUNG_WORKER_FLOOR_S + 3 - time.monotonic()))
            assert adapter.poll() is None, log.read_text()[-4000:]
        wait_until_logged(adapter, log, "taking the refresh process's new values again", timeout=60)
        assert poll(lambda: http_get(f"https://127.0.0.1:{port}/readyz", timeout=5)[0] == 200, timeout=60)
        adapter.send_signal(signal.SIGTERM)
        assert adapter.wait(timeout=60) == 0, log.read_text()[-4000:]
    finally:
        for connection in kept_alive:
            connection.close()
        stop(adapter)
    text = log.read_text()
    said = [line for line in text.splitlines() if SKIPPED_SAID in line]
    for worker in ("[worker 0]", "[worker 1]"):  # once an outage, not at every refresh: its end said once too
        assert sum(worker in line for line in said) <= text.count(f"{worker}: taking the refresh process's new") + 1
    skipped = sum(int(count) for count in re.findall(r"new values again: (\d+) skipped", text))
    assert skipped > len(said), text[-4000:]
    assert all("WARNING" in line and "open-file limit (64; RLIMIT_NOFILE, hard limit 64)" in line
               and "ss -tn" in line for line in said), said
    assert "Traceback" not in text and "ancdata" not in text, text[-4000:]
    assert "stopped (exit code 0)" in text, text[-4000:]
