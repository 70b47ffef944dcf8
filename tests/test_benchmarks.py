"""Every benchmark's small run in docs/performance.md runs: a user tries one before a full run of minutes, and
a script that no longer starts (a renamed import, a flag the docs still give) shows here, not in their hands.
The figures are not looked at: tests never assert timings. The load clients' counting of answers that are not
2xx is checked against a server that sends some: a run goes on and reports them rather than aborting."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trustme
from aiohttp import web

from bench import bench_fleet
from bench.apachebench import run_ab
from tests.support.certificates import issue_cert

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
SECTION = (REPO / "docs" / "performance.md").read_text().split("## A quick run of each benchmark\n", 1)[1]
ROWS = re.findall(r"^\| `(\w+\.py)` \| `python (bench/\S+\.py[^`]*)` \| ([^|]+) \|$", SECTION.split("\n## ")[0],
                  flags=re.M)


def test_every_benchmark_has_a_small_run() -> None:
    scripts = {p.name for p in (REPO / "bench").glob("bench_*.py")} | {"simulate_shapes.py"}
    assert {script for script, _, _ in ROWS} == scripts


QUICK_S = 10
"""Small runs up to this long run here; the longer ones (process start-ups and waits, 15-36 s each) would add a
minute to every CI run, and `tests/test_docs.py` still sees each of those scripts start and answer `--help`."""


def _seconds(took: str) -> float | None:
    took = took.strip()
    return float(took.removesuffix(" s")) if took.endswith(" s") else None


@pytest.mark.parametrize("command", [command for _, command, took in ROWS
                                     if (seconds := _seconds(took)) is not None and seconds <= QUICK_S],
                         ids=lambda command: command.split()[0].removeprefix("bench/"))
def test_the_small_run_runs(command: str) -> None:
    result = subprocess.run([sys.executable, *command.split()], capture_output=True, text=True, timeout=300,
                            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stdout.strip(), "printed no figures"


def test_a_normal_run_does_not_say_it_was_stopped() -> None:
    """bench_exporter.py re-runs itself as the servers it measures and ends them with SIGTERM when it is done with
    them: each printed "stopped by SIGTERM; stopping the processes it started" in the middle of every normal run,
    which a reader (or a grep of a CI log) takes for an interrupted run. Only a benchmark that is stopped says so
    (`test_a_fleet_run_stopped_with_sigterm_stops_the_adapter_it_started`)."""
    result = subprocess.run(
        [sys.executable, "bench/bench_exporter.py", "--gpus", "1", "--scrapes", "2", "--background-seconds", "0.2"],
        capture_output=True, text=True, timeout=300, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "== background sampling" in result.stdout, "the run went past its servers"
    # --scrapes is per server and connection pattern: 2 asked ran blocks of 100 (and 50 more to warm up) each
    assert result.stdout.count(", 2 scrapes each:") == 2, result.stdout
    assert "stopped by SIGTERM" not in result.stderr, result.stderr[-3000:]


def _modelmesh_bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "bench/bench_modelmesh_text.py", "--models", "20", *args],
                          capture_output=True, text=True, timeout=300, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def test_the_modelmesh_read_with_the_window_is_a_busy_pods_accepted_reads() -> None:
    """`--with-window` counts the exporter's whole read (the parse, then `CounterWindow.add` and its ceiling
    checks), which the parse alone missed. Its bodies' counts must rise as a real pod's do: a read the window
    refused (a ScrapeFailure) or none rising would count a path the exporter takes once, not every 5 s."""
    timed = _modelmesh_bench("--runs", "8", "--with-window")
    assert timed.returncode == 0, timed.stdout[-2000:] + timed.stderr[-3000:]
    rate = re.search(r"a read every 5 s: parse and window [\d,]+ µs, parse alone [\d,]+ µs; the window read "
                     r"([\d,.]+) req/s, ([\d.]+) cache misses/s over 30 s$", timed.stdout.strip())
    assert rate, timed.stdout
    assert float(rate[1].replace(",", "")) > 0 and float(rate[2]) > 0, timed.stdout
    counted = _modelmesh_bench("--parses-only", "10", "--with-window")
    assert counted.returncode == 0 and not counted.stdout, counted.stdout + counted.stderr[-3000:]


def test_the_modelmesh_window_count_with_too_few_bodies_says_how_many_to_render() -> None:
    """The bodies are rendered before the reads, the same number for the two runs compared: too few for N reads
    is refused at once, naming the `--bodies` to give both runs, not a StopIteration halfway under valgrind."""
    done = _modelmesh_bench("--parses-only", "12", "--bodies", "12", "--with-window")
    assert done.returncode == 2
    assert ("--bodies 12 is too few for --parses-only 12: give at least --bodies 13 (and the same to the run it "
            "is compared with)") in done.stderr, done.stderr


def _descendants(pid: int) -> set[int]:
    """Every process below `pid`, from /proc (no psutil here)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _running(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _command_line(pid: int) -> bytes:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes()
    except OSError:
        return b""


def test_a_fleet_run_stopped_with_sigterm_stops_the_adapter_it_started(tmp_path: Path) -> None:
    """`timeout 600 python bench/bench_fleet.py ...` or a cancelled job: before, the adapter (and its refresh of
    the fake fleet) went on running after the benchmark died, holding a port and a core for the next run."""
    with (tmp_path / "stderr").open("wb") as stderr_file:
        bench = subprocess.Popen(
            [sys.executable, "bench/bench_fleet.py", "--runtimes", "10", "--rounds", "1", "--seconds", "1",
             "--hpa-seconds", "1"],
            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.DEVNULL, stderr=stderr_file,
            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not any(b"autoscaler.cli" in _command_line(pid) for pid in _descendants(bench.pid)):
            assert bench.poll() is None, (tmp_path / "stderr").read_text()[-3000:]
            assert time.monotonic() < deadline, "the benchmark started no adapter within 120 s"
            time.sleep(0.2)
        started = _descendants(bench.pid)
        bench.send_signal(signal.SIGTERM)
        bench.wait(timeout=60)
        stderr = (tmp_path / "stderr").read_bytes()
        deadline = time.monotonic() + 10
        while (left := [pid for pid in started if _running(pid)]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not left, [_command_line(pid)[:200] for pid in left]
        assert bench.returncode == 128 + signal.SIGTERM, stderr[-3000:]
        assert b"stopped by SIGTERM" in stderr and b"Traceback" not in stderr, stderr[-3000:]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(bench.pid, signal.SIGKILL)
        bench.wait()


def test_a_fleet_run_with_more_workers_than_serving_cpus_says_which_cpus_it_needs() -> None:
    """`--workers 2` pinned both workers to the one `--serving-cpu`: two processes taking turns on a core, not
    what a second worker buys. They get one CPU each now, from `--serving-cpu` on; where those are not there
    (the last CPU and the one after it), the run stops at once saying which it needs."""
    last = max(os.sched_getaffinity(0))
    done = subprocess.run(
        [sys.executable, "bench/bench_fleet.py", "--runtimes", "10", "--workers", "2", "--serving-cpu", str(last)],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert (f"--serving-cpu {last} with --workers 2: needs CPUs {last},{last + 1} and at least one other"
            in done.stderr), done.stderr


class _EveryThird503:
    """A TLS server answering 503 to every third request and 200 to the others, counting what it sent."""

    def __init__(self) -> None:
        self.sent: Counter[int] = Counter()

    async def handler(self, request: web.Request) -> web.Response:
        status = 503 if sum(self.sent.values()) % 3 == 2 else 200
        self.sent[status] += 1
        return web.Response(status=status, body=b"{}" if status == 200 else b"unknown for now")


@contextlib.asynccontextmanager
async def _serving(server: _EveryThird503, tmp_path: Path) -> AsyncIterator[tuple[str, ssl.SSLContext, Path]]:
    ca = trustme.CA()
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    issue_cert(ca, "127.0.0.1").configure_cert(tls)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    client_pem = tmp_path / "client.pem"
    issue_cert(ca, common_name="front-proxy-client").private_key_and_cert_chain_pem.write_to_path(str(client_pem))
    client.load_cert_chain(str(client_pem))
    app = web.Application()
    app.router.add_get("/{tail:.*}", server.handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls).start()
    try:
        yield f"https://127.0.0.1:{runner.addresses[0][1]}/m", client, client_pem
    finally:
        await runner.cleanup()


@pytest.mark.skipif(shutil.which("ab") is None, reason="needs ApacheBench (apt-get install -y apache2-utils)")
async def test_ab_counts_answers_that_are_not_2xx_by_status_instead_of_failing(tmp_path: Path) -> None:
    server = _EveryThird503()
    async with _serving(server, tmp_path) as (url, _, client_pem):
        run = await asyncio.to_thread(run_ab, url, client_pem, {"X-Remote-User": "u"}, 1, 2)
    # ab stops at its time limit with up to one answer a connection (2 here) sent but not read.
    assert set(run.not_2xx) == {503} and 0 <= server.sent[503] - run.not_2xx[503] <= 2
    assert 0 <= sum(server.sent.values()) - run.requests <= 2
    assert run.failed == 0  # a 503's body of another length is not a failed request


async def test_the_python_clients_count_answers_that_are_not_2xx_and_time_only_the_2xx(tmp_path: Path) -> None:
    server = _EveryThird503()
    async with _serving(server, tmp_path) as (url, client, _):
        into = bench_fleet.Sample()
        await bench_fleet.load([url], client, 0.5, 2, into)
    assert into.answers.not_2xx == Counter({503: server.sent[503]})
    assert into.answers.total == sum(server.sent.values())
    assert len(into.latencies) == server.sent[200]
    assert into.answers.flagged  # a third of them: far more than a row may have unflagged
    assert into.answers.words().startswith(f"503 x {server.sent[503]:,} of ")
