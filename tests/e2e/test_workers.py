"""`serve --workers N`: serving processes fed by the refresh process, and a crash of either side ends the pod
(issue 12). Real processes; the one runtime's exporter is absent, which is all these tests need."""

from __future__ import annotations

import contextlib
import functools
import gzip
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.api.runtimes import KEDA_ROUTE
from tests.support.processes import (
    TEST_PROCESS_ENV,
    free_port,
    http_get,
    poll,
    running,
    serving_workers,
    stop,
    wait_until_answers,
    wait_until_logged,
)

pytestmark = pytest.mark.slow

RUNTIME = "/keda/v1/namespaces/default/runtimes/modelmesh-serving-demo"


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def serve_args(port: int, targets: Path) -> list[str]:
    """`serve` with two workers over the targets file (module and arguments, for `python -m`)."""
    return ["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{port}", "--targets", str(targets),
            "--workers", "2", "--deletion-cost", "off"]


def write_targets(path: Path) -> Path:
    path.write_text(yaml.safe_dump({"runtimes": [{
        "namespace": "default", "deployment": "modelmesh-serving-demo",
        "pods": [{"name": "pod-0", "url": f"http://127.0.0.1:{free_port()}/metrics"}]}]}))
    return path


@pytest.fixture
def targets(tmp_path: Path) -> Path:
    return write_targets(tmp_path / "targets.yaml")


@contextlib.contextmanager
def adapter_running(workdir: Path, targets: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """Two workers and the refresh process, once both workers have a snapshot; the log is workdir/adapter.log."""
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    # --refresh-nice as shipped: the processes the tests start get 0 (tests/support/processes.TEST_PROCESS_ENV).
    with running([*serve_args(port, targets), "--refresh-interval", "1", "--refresh-nice", "10"], url + "/healthz",
                 workdir / "adapter.log") as process:
        poll(lambda: all(http_get(url + "/readyz")[0] == 200 for _ in range(10)), timeout=60)  # both have one
        yield process, url


@pytest.fixture
def adapter(tmp_path: Path, targets: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """An adapter of the test's own: for the tests that kill or stop it, or count its requests."""
    with adapter_running(tmp_path, targets) as running_adapter:
        yield running_adapter


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    """One adapter for the tests that only look at it (its processes, answers, /metrics and log): none of them
    changes what another one checks, so they need not start one each. Also yields its log."""
    workdir = tmp_path_factory.mktemp("watched-adapter")
    with adapter_running(workdir, write_targets(workdir / "targets.yaml")) as (process, url):
        yield process, url, workdir / "adapter.log"


def test_every_worker_serves_the_refresh_processes_snapshot(
        watched: tuple[subprocess.Popen[bytes], str, Path]) -> None:
    process, url, _ = watched
    assert len(serving_workers(process.pid)) == 2
    # 503 for the known runtime (its exporter is absent), 404 for one nobody knows: the snapshot arrived.
    for _ in range(20):  # connections spread over both workers
        assert http_get(url + RUNTIME)[0] == 503
        assert http_get(url + "/keda/v1/namespaces/default/runtimes/nobody")[0] == 404
    assert http_get(url + "/readyz")[0] == 200


def niceness(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[16])  # field 19 of proc(5)


def test_the_refresh_process_yields_the_cpu_to_the_serving_workers(
        watched: tuple[subprocess.Popen[bytes], str, Path]) -> None:
    """Where cores are short, requests run first and the refresh waits (--refresh-nice, default 10)."""
    process, _, log = watched
    mine = os.nice(0)
    assert niceness(process.pid) == min(19, mine + 10)
    assert [niceness(worker) for worker in serving_workers(process.pid)] == [mine, mine]
    assert f"refresh process niceness {min(19, mine + 10)}" in log.read_text()


def test_a_worker_that_dies_ends_the_adapter_and_the_log_says_how(
        adapter: tuple[subprocess.Popen[bytes], str], tmp_path: Path) -> None:
    """The line named the worker's exit code as `None`: read before the worker was reaped."""
    process, _ = adapter
    worker = serving_workers(process.pid)[0]
    os.kill(worker, signal.SIGKILL)
    assert process.wait(timeout=15) == 1
    text = (tmp_path / "adapter.log").read_text()
    assert "exited with code -9 (killed by SIGKILL);" in text, text[-4000:]


def test_a_hung_worker_ends_the_adapter(adapter: tuple[subprocess.Popen[bytes], str], tmp_path: Path) -> None:
    """A serving worker whose event loop is stuck (stopped here; a deadlock or a blocking call in a cluster) keeps
    its share of the port: about one new connection in two hung, the probes mostly passed on its sibling, and
    nothing was logged. It takes no more snapshots, so the refresh process notices and ends the pod, as when a
    worker dies, and Kubernetes restarts it."""
    process, _ = adapter
    worker = serving_workers(process.pid)[0]
    os.kill(worker, signal.SIGSTOP)
    try:
        assert process.wait(timeout=90) == 1
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker, signal.SIGKILL)
    poll(lambda: not alive(worker), timeout=15)
    log = (tmp_path / "adapter.log").read_text()
    assert "ERROR autoscaler.workers: serving worker serving-worker-" in log, log
    assert "it is hung; stopping so that Kubernetes restarts the pod" in log, log


def test_workers_end_when_the_refresh_process_dies(adapter: tuple[subprocess.Popen[bytes], str]) -> None:
    process, url = adapter
    workers = [pid for pid in serving_workers(process.pid) if alive(pid)]
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    poll(lambda: not any(alive(pid) for pid in workers), timeout=15)
    with pytest.raises(OSError):
        http_get(url + "/healthz", timeout=1)


def test_a_port_in_use_stops_start_up_in_one_line(tmp_path: Path, targets: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", *serve_args(port, targets)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "cannot start: cannot listen on 127.0.0.1" in result.stderr
    assert "Traceback" not in result.stderr
    assert time.monotonic() - started < 30


def test_metrics_of_a_worker_hold_its_own_series_and_the_refresh_processes_each_once(
        watched: tuple[subprocess.Popen[bytes], str, Path]) -> None:
    _, url, _ = watched
    http_get(url + "/healthz")
    status, text = http_get(url + "/metrics")
    assert status == 200
    types = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
    assert len(types) == len(set(types)), "a family appears twice"
    assert "modelmesh_autoscaler_api_requests_total" in types  # the worker's own
    assert "modelmesh_autoscaler_refresh_duration_seconds" in types  # the refresh process's
    count = next(line for line in text.splitlines()
                 if line.startswith("modelmesh_autoscaler_refresh_duration_seconds_count"))
    assert float(count.split()[1]) >= 1


def test_metrics_are_gzipped_for_a_scraper_that_asks_as_prometheus_does(
        watched: tuple[subprocess.Popen[bytes], str, Path]) -> None:
    """Prometheus asks with `Accept-Encoding: gzip`; at 5,000 runtimes the page is 4-5.5 MB of text. A worker
    answers it compressed, as `prometheus_client`'s own handlers do (and the single-process adapter did), and the
    same page uncompressed to a client that does not ask."""
    _, url, _ = watched
    request = urllib.request.Request(url + "/metrics", headers={"Accept-Encoding": "gzip"})
    insecure = ssl.create_default_context()  # the test adapter's certificate is self-signed
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
    with urllib.request.urlopen(request, timeout=5, context=insecure) as response:
        assert response.headers["Content-Encoding"] == "gzip"
        page = gzip.decompress(response.read()).decode()
    families = {family.name for family in text_string_to_metric_families(page)}
    assert {"modelmesh_autoscaler_api_requests", "modelmesh_autoscaler_refresh_duration_seconds"} <= families
    status, plain = http_get(url + "/metrics")
    assert status == 200 and "modelmesh_autoscaler_refresh_duration_seconds_count" in plain


def requests_counted(text: str, path: str, code: str) -> float:
    """`modelmesh_autoscaler_api_requests_total` of one route and status code on a /metrics page (0 if absent)."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if (sample.name == "modelmesh_autoscaler_api_requests_total" and sample.labels.get("path") == path
                    and sample.labels.get("code") == code):
                return sample.value
    return 0.0


def test_request_counters_are_the_pods_whichever_worker_answers_the_scrape(
        adapter: tuple[subprocess.Popen[bytes], str]) -> None:
    """Prometheus scrapes the pod through one port; the kernel hands each connection to some worker. Each page
    must count every worker's requests, or the counter jumps between scrapes and `rate()` reads resets. A
    worker hands its counts over every second (`autoscaler.request_tally`): a page counts every request answered
    more than a second before it."""
    _, url = adapter
    sent = 40
    for _ in range(sent):  # a connection each: spread over both workers
        assert http_get(url + RUNTIME)[0] == 503
    # Every worker hands its counts over each second (FLUSH_INTERVAL_S), unless a loaded machine stalls it: wait until
    # twelve pages in a row (whichever workers answer them) all count every request; one that keeps counting only
    # its own worker's never does.
    poll(lambda: all(requests_counted(http_get(url + "/metrics")[1], KEDA_ROUTE, "503") == sent for _ in range(12)),
         timeout=60)


def test_sigterm_stops_every_process_quietly(adapter: tuple[subprocess.Popen[bytes], str], tmp_path: Path) -> None:
    process, _ = adapter
    workers = serving_workers(process.pid)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    poll(lambda: not any(alive(pid) for pid in workers), timeout=30)
    log = (tmp_path / "adapter.log").read_text()
    assert "ERROR" not in log
    assert "SIGTERM: stopping" in log
    assert log.rstrip().endswith("stopped (exit code 0)")


def scratch_directories(tmp: Path) -> set[str]:
    return {path.name for path in tmp.iterdir() if path.name.startswith("mm-autoscaler-")}


def test_a_start_removes_what_a_killed_adapter_left_in_the_temporary_directory(
        tmp_path: Path, targets: Path) -> None:
    """SIGKILL runs no clean-up: the self-signed key and the workers' metric files stay in /tmp (an emptyDir
    that outlives the container in the shipped Deployment) until the next start removes them."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()

    def start(log: str) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
        port = free_port()
        return running(serve_args(port, targets), f"https://127.0.0.1:{port}/healthz", tmp_path / log,
                       env={"TMPDIR": str(tmp)})

    with start("killed.log") as killed:
        workers = serving_workers(killed.pid)
        left = scratch_directories(tmp)
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        poll(lambda: not any(alive(pid) for pid in workers), timeout=15)
    assert {name.rsplit("-", 1)[0] for name in left} == {"mm-autoscaler-cert", "mm-autoscaler-metrics"}
    assert scratch_directories(tmp) == left
    assert any(path.name.endswith(".key") for name in left for path in (tmp / name).iterdir())

    unrelated = tmp / "mm-autoscaler-metrics-not-an-adapters"  # no owner file: not ours to judge
    unrelated.mkdir()
    with start("next.log"):
        now = scratch_directories(tmp)
        assert not now & left
        assert unrelated.name in now
        assert len(now) == 3  # the new adapter's two, and the unrelated one
        log = (tmp_path / "next.log").read_text()
        for name in left:
            assert f"removed {tmp / name}, left by process {killed.pid}, which ended without cleaning up" in log

        with start("beside.log"):  # a second adapter beside a live one leaves the live one's directories
            assert now <= scratch_directories(tmp)
    assert scratch_directories(tmp) == {unrelated.name}


@pytest.mark.parametrize("signum, to_the_group, while_workers_import", [
    (signal.SIGTERM, False, False), (signal.SIGINT, True, False), (signal.SIGINT, True, True)], ids=[
    "SIGTERM to the adapter (a pod deleted while it starts)",
    "Ctrl-C in a terminal (SIGINT to the process group) as the workers start",
    "Ctrl-C in a terminal while the workers import"])
def test_a_stop_while_starting_stops_every_process_and_leaves_nothing_behind(
        tmp_path: Path, targets: Path, signum: signal.Signals, to_the_group: bool, while_workers_import: bool,
) -> None:
    """A stop before the adapter serves stops the workers it started and removes its scratch directories,
    quietly (no traceback from any process), as a stop once serving does."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    log = tmp_path / "adapter.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", *serve_args(free_port(), targets)], stdout=output, stderr=subprocess.STDOUT,
            env={**os.environ, "TMPDIR": str(tmp)}, start_new_session=to_the_group)
    try:
        if while_workers_import:  # a terminal's Ctrl-C reaches them too
            poll(lambda: len(serving_workers(process.pid)) == 2, timeout=30, interval=0.005)
        else:  # the serving key's directory is made just before the first worker starts
            poll(lambda: scratch_directories(tmp), timeout=30, interval=0.005)
        workers = serving_workers(process.pid)
        if to_the_group:
            os.killpg(process.pid, signum)
        else:
            process.send_signal(signum)
        assert process.wait(timeout=15) == 0
    finally:
        stop(process)
    poll(lambda: not any(alive(pid) for pid in workers), timeout=15)
    assert scratch_directories(tmp) == set()
    text = log.read_text()
    assert f"{signum.name} while starting: stopped" in text
    assert "Traceback" not in text


@pytest.mark.parametrize("workers", ["0", "2"])
def test_listen_port_0_serves_on_one_free_port_that_the_log_names(tmp_path: Path, targets: Path,
                                                                  workers: str) -> None:
    """`--listen 127.0.0.1:0` ("any free port", as in a script that starts the adapter): the log must say which
    port, and with several workers they must share it (each binding port 0 would get a port of its own)."""
    log = tmp_path / "adapter.log"
    with open(log, "ab") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "autoscaler.cli", "serve", "--insecure-dev", "--listen", "127.0.0.1:0",
             "--targets", str(targets), "--workers", workers, "--deletion-cost", "off"],
            stdout=output, stderr=subprocess.STDOUT)
    try:
        line = poll(lambda: next((line for line in log.read_text().splitlines()
                                  if "serving external.metrics.k8s.io on" in line), None), timeout=30)
        port = int(line.split("https://127.0.0.1:")[1].split()[0])
        assert port != 0, line
        url = f"https://127.0.0.1:{port}"
        assert poll(lambda: all(http_get(url + "/healthz")[0] == 200 for _ in range(10)), timeout=10)
    finally:
        stop(process)


def healthz_counted(url: str, at_least: int) -> float | None:
    """The /healthz answers the /metrics page counts, once they are `at_least` (each worker hands its counts over
    every second)."""
    count = requests_counted(http_get(url + "/metrics")[1], "/healthz", "200")
    return count if count >= at_least else None


def test_reading_serve_flags_leaves_prometheus_client_unimported_so_an_inherited_multiproc_dir_can_be_dropped() -> None:
    """prometheus_client picks file-backed values at import when PROMETHEUS_MULTIPROC_DIR is set; `serve` drops the
    variable after reading its flags. A flag's range imported from the exporter's settings (which import its
    connection cap, and prometheus_client with it) made `serve` with the variable set exit with a TypeError from
    prometheus_client before it served anything."""
    code = ("import sys; from autoscaler.cli import build_parser; build_parser(); "
            "print('prometheus_client' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.strip() == "False", result.stderr


@pytest.mark.parametrize("workers", ["0", "1", "2"])
def test_counters_of_a_restarted_adapter_start_from_zero_whatever_prometheus_multiproc_dir_says(
        tmp_path: Path, targets: Path, workers: str) -> None:
    """PROMETHEUS_MULTIPROC_DIR in the environment (an image's, a shell's): with one worker its /metrics summed
    every counter file in that directory, so a restarted adapter counted the requests of its earlier runs (and
    of any other process writing there), and every run left its files behind. The adapter keeps its own counts,
    in a private directory where several workers share them."""
    inherited = tmp_path / "multiproc"
    inherited.mkdir()
    for run, sent in enumerate((5, 1)):
        port = free_port()
        url = f"https://127.0.0.1:{port}"
        # ready once it answers at all (/readyz): a request to /healthz would count
        with running([*serve_args(port, targets), "--workers", workers], url + "/readyz", tmp_path / f"run-{run}.log",
                     env={"PROMETHEUS_MULTIPROC_DIR": str(inherited)}):
            for _ in range(sent):
                assert http_get(url + "/healthz")[0] == 200
            assert poll(functools.partial(healthz_counted, url, sent), timeout=30) == sent, f"run {run}"
        assert "PROMETHEUS_MULTIPROC_DIR is set: ignored" in (tmp_path / f"run-{run}.log").read_text()
    assert sorted(path.name for path in inherited.iterdir()) == []


def status_or_refused(url: str) -> int:
    """The status a GET of `url` is answered with; 0 when nothing answers (the port closed)."""
    try:
        return http_get(url, timeout=5)[0]
    except OSError:
        return 0


def test_a_sigterm_to_the_whole_process_group_keeps_answering_for_the_shutdown_delay(
        tmp_path: Path, targets: Path) -> None:
    """systemd's default KillMode and `kill -TERM -PGID` signal every process of the adapter. The serving workers
    stopped at once and the port refused connections, while the refresh process logged that it kept serving for
    --shutdown-delay. They keep answering, /readyz failing, until the refresh process stops them."""
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    log = tmp_path / "adapter.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", *serve_args(port, targets), "--refresh-interval", "1", "--shutdown-delay", "60s"],
            stdout=output, stderr=subprocess.STDOUT, env={**os.environ, **TEST_PROCESS_ENV}, start_new_session=True)
    try:
        wait_until_answers(url + "/healthz", process, log)
        poll(lambda: all(http_get(url + "/readyz")[0] == 200 for _ in range(10)), timeout=60)  # both have values
        workers = serving_workers(process.pid)
        os.killpg(process.pid, signal.SIGTERM)
        wait_until_logged(process, log, "serving 60 s more (--shutdown-delay)", timeout=30)
        assert poll(lambda: all(status_or_refused(url + "/readyz") == 503 for _ in range(10)), timeout=10)
        assert [status_or_refused(url + RUNTIME) for _ in range(10)] == [503] * 10  # answered (its exporter is absent)

        os.killpg(process.pid, signal.SIGTERM)  # a second one ends the delay
        assert process.wait(timeout=30) == 0
        poll(lambda: not any(alive(pid) for pid in workers), timeout=15)
    finally:
        stop(process)
    text = log.read_text()
    assert "ERROR" not in text and "Traceback" not in text, text
    assert text.rstrip().endswith("stopped (exit code 0)")
