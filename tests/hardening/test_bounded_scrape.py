"""Scrape mode does bounded work whatever the pods do: a pod streaming a 64 MiB body leaves the adapter
small, black-holed pods cannot stretch a refresh or starve healthy pods, and a concurrency of 0 is refused
at start instead of deadlocking."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path

import pytest

from tests.hardening.adapter import DEPLOYMENT, Adapter, adapter_running, write_targets
from tests.support.processes import free_port, http_get, poll, running

pytestmark = pytest.mark.slow

ERRORS = re.compile(r'modelmesh_autoscaler_source_errors_total\{reason="(\w+)",source="scrape"\} (\S+)')


def source_errors(adapter: Adapter) -> dict[str, float]:
    _, text = http_get(f"{adapter.url}/metrics")
    return {reason: float(value) for reason, value in ERRORS.findall(text)}


def peak_rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmHWM:\s+(\d+) kB", status)
    assert match is not None
    return int(match.group(1)) / 1024


def test_a_pod_streaming_64_mib_bodies_leaves_the_adapter_small(tmp_path: Path) -> None:
    port = free_port()
    with running(["tests.hardening.fake_exporter", "--port", str(port), "--megabytes", "64"],
                 f"http://127.0.0.1:{port}/healthz", tmp_path / "hostile.log"), \
         adapter_running(tmp_path, [f"http://127.0.0.1:{port}/metrics"],
                         ["--refresh-interval", "1", "--scrape-timeout", "10"],
                         fork=False) as adapter:  # its memory measured: a fresh interpreter's
        poll(lambda: source_errors(adapter).get("too_large", 0) >= 3, timeout=60)
        peak = peak_rss_mib(adapter.process.pid)
        log = adapter.log_text()
    assert peak < 120, f"adapter peak RSS {peak:.0f} MiB"
    assert "too_large" in log and "holding its last good sample" in log


@contextmanager
def black_holes(count: int) -> Iterator[list[str]]:
    """Exporter URLs whose SYNs go unanswered, like pods on a lost node: a listening socket whose one-slot
    accept queue is already full."""
    with ExitStack() as stack:
        urls = []
        for _ in range(count):
            server = stack.enter_context(socket.socket())
            server.bind(("127.0.0.1", 0))
            server.listen(0)
            for _ in range(3):
                filler = stack.enter_context(socket.socket())
                filler.setblocking(False)
                with suppress(BlockingIOError):
                    filler.connect(server.getsockname())
            urls.append(f"http://127.0.0.1:{server.getsockname()[1]}/metrics")
        yield urls


def test_black_holed_pods_neither_stretch_a_refresh_nor_starve_a_healthy_pod(tmp_path: Path) -> None:
    mm_port, exporter_port = free_port(), free_port()
    healthy = f"http://127.0.0.1:{exporter_port}/metrics"
    with black_holes(12) as dead, \
         running(["autoscaler.demo.fake_modelmesh", "--listen", f"127.0.0.1:{mm_port}", "--rps", "40", "--http"],
                 f"http://127.0.0.1:{mm_port}/metrics", tmp_path / "modelmesh.log"), \
         running(["exporter.cli", "--listen", f"127.0.0.1:{exporter_port}", "--no-gpu",
                  "--modelmesh-url", f"http://127.0.0.1:{mm_port}/metrics",
                  "--modelmesh-interval", "0.5", "--load-window", "2"],
                 f"http://127.0.0.1:{exporter_port}/healthz", tmp_path / "exporter.log"):
        # The exporter needs two ModelMesh reads before it has a rate.
        poll(lambda: "modelmesh_pod_requests_per_second" in http_get(healthy)[1], timeout=15)
        # The healthy pod is listed last, behind twelve dead ones, and only two scrapes run at once.
        with adapter_running(tmp_path, [*dead, healthy],
                             ["--refresh-interval", "2", "--scrape-timeout", "5", "--scrape-concurrency", "2",
                              "--min-coverage", "0.05"]) as adapter:
            base = f"{adapter.url}/apis/external.metrics.k8s.io/v1beta1/namespaces/default"
            debug = f"{adapter.url}/debug/runtimes/default/{DEPLOYMENT}"

            def healthy_pod_fresh_with_its_rate() -> bool:
                code, body = http_get(debug)
                if code != 200:
                    return False
                shown = json.loads(body)["pods"][-1]
                return bool(shown["name"] == "pod-12" and shown["fresh"] and (shown["requests_per_second"] or 0) > 0)

            # Without a deadline the first refresh alone takes 12 / 2 x 5 s = 30 s.
            poll(healthy_pod_fresh_with_its_rate, timeout=20)
            # The one pod seen is enough to serve the recommendation (coverage 1/13 >= 0.05) once the adapter's
            # warm-up grace period is over; its request load alone would say nothing of the twelve pods it
            # cannot see, so that stays unknown, naming them.
            desired = f"{base}/modelmesh_desired_replicas?labelSelector=deployment%3D{DEPLOYMENT}"
            poll(lambda: http_get(desired)[0] == 200, timeout=20)
            assert healthy_pod_fresh_with_its_rate()
            code, body = http_get(f"{base}/modelmesh_request_load?labelSelector=deployment%3D{DEPLOYMENT}")
            assert code == 503 and "requests not fresh on pod-0, pod-1, pod-2 and 9 more" in body, body
            _, text = http_get(f"{adapter.url}/metrics")
    durations = re.findall(r'modelmesh_autoscaler_refresh_duration_seconds_bucket\{le="([^"]+)"\} (\S+)', text)
    counts = {le: float(count) for le, count in durations}
    # Each refresh ends at its deadline, the 2 s interval (without one, 12 / 2 x 5 s = 30 s): the 10 s bucket holds
    # them all, a hang detector; the 2.5 s one a loaded CI machine's refresh can pass over, its clock stretched.
    assert counts["10.0"] == counts["+Inf"], f"a refresh took longer than 10 s: {counts}"


def test_a_scrape_concurrency_of_zero_is_refused_at_start(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{free_port()}",
         "--targets", str(write_targets(tmp_path / "targets.yaml", ["http://127.0.0.1:1/metrics"])),
         "--scrape-concurrency", "0"],
        capture_output=True, text=True, timeout=20,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert "--scrape-concurrency" in lines[-1] and "must be at least 1" in lines[-1], result.stderr
    assert "Traceback" not in result.stderr
