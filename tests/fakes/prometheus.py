"""A real Prometheus server for tests, and instant data for it.

Why a real one and not a fake HTTP API: what the adapter depends on is PromQL's behaviour (the 5-minute
lookback, staleness, NaN inside aggregations, `timestamp()`, how instant queries stamp their results), and a
fake would only repeat our own assumptions about it. Debian's `prometheus` 2.42 is ready in well under a
second.

Two ways to give it data:
- `create_blocks()` backfills OpenMetrics text with timestamps through `promtool tsdb create-blocks-from
  openmetrics`; Prometheus started on that directory answers queries about it as soon as `/-/ready` does.
  Samples from the last few minutes work: instant queries find them through the default 5-minute lookback.
- `scrape_targets` lets it scrape real test servers (`honor_labels: true`, so a target can set its own
  `namespace`/`pod` labels). The first scraped sample lands only about 6 s after start (the discovery
  manager's 5 s throttle, not configurable in 2.42), so wait with `wait_for()`, never with a fixed sleep.

Both on one TSDB work only if every backfilled timestamp is in the past: at start the head refuses samples
older than the newest block's end, so one future sample makes every scrape "out of bounds" (even `up`).

`stop()`/`kill()` and `start()` again reuse the same port and TSDB, to test a dead Prometheus coming back.
The process's output goes to `prometheus.log` in the work directory (pass pytest's `tmp_path` as `workdir`
to keep it after a failure); errors raised here quote its tail. Every process still running when the
interpreter exits is killed, so a crashed test leaves no stray Prometheus behind.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import math
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from tests.support.port_owner import someone_else_listens
from tests.support.ports import free_port

PROMETHEUS_BIN = "/usr/bin/prometheus"
PROMTOOL_BIN = "/usr/bin/promtool"

# One instant-query result item, as the HTTP API returns it: {"metric": {...}, "value": [ts, "v"]}.
QueryResult = list[dict[str, Any]]

_LIVE: set[subprocess.Popen[bytes]] = set()


@atexit.register
def _kill_leftovers() -> None:
    """Kill every Prometheus a test forgot to stop, so none outlives the test run."""
    for proc in list(_LIVE):
        proc.kill()
        proc.wait()
    _LIVE.clear()


class PrometheusTestError(RuntimeError):
    """The test server or promtool failed; the message carries its log."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One OpenMetrics sample with an explicit timestamp (Unix seconds), for `openmetrics_text()`."""

    name: str
    labels: Mapping[str, str]
    value: float
    timestamp: float
    type: str = "gauge"


def _format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def openmetrics_text(samples: Iterable[Sample]) -> str:
    """Render samples as OpenMetrics text ending in `# EOF`, grouped per family as the format requires.

    Timestamps are seconds (OpenMetrics), not the milliseconds of the Prometheus text format; within one
    series they must not decrease, so samples are sorted by time.
    """
    families: dict[str, list[Sample]] = {}
    for sample in samples:
        families.setdefault(sample.name, []).append(sample)
    lines: list[str] = []
    for name, members in families.items():
        lines.append(f"# TYPE {name} {members[0].type}")
        for sample in sorted(members, key=lambda s: s.timestamp):
            labels = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(sample.labels.items()))
            selector = f"{name}{{{labels}}}" if labels else name
            lines.append(f"{selector} {_format_value(sample.value)} {sample.timestamp:.3f}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def create_blocks(openmetrics: str, tsdb_dir: str | Path, *, promtool: str = PROMTOOL_BIN) -> Path:
    """Backfill OpenMetrics text (with timestamps, ending `# EOF`) into TSDB blocks under `tsdb_dir`.

    Runs `promtool tsdb create-blocks-from openmetrics FILE DIR`; start `PrometheusServer(tsdb_dir=...)` on
    the directory afterwards (a running server picks up new blocks only at its next reload, about a minute).
    Returns the directory. Raises `PrometheusTestError` with promtool's output when it refuses the text.
    """
    target = Path(tsdb_dir)
    target.mkdir(parents=True, exist_ok=True)
    text = openmetrics if openmetrics.rstrip().endswith("# EOF") else openmetrics.rstrip() + "\n# EOF\n"
    with tempfile.TemporaryDirectory(prefix="openmetrics-") as scratch:
        source = Path(scratch) / "input.om"
        source.write_text(text if text.endswith("\n") else text + "\n")
        done = subprocess.run(
            [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(target)],
            capture_output=True, text=True, timeout=60, check=False,
        )
    if done.returncode != 0:
        raise PrometheusTestError(
            f"promtool create-blocks-from failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        )
    return target


def _http_get(url: str, timeout_s: float) -> tuple[int, bytes]:
    """GET a URL; (status, body) for any HTTP answer, OSError for no answer. Closes every response."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read()


@dataclass
class _Job:
    scheme: str
    path: str
    targets: list[str] = field(default_factory=list)


def _scrape_jobs(targets: Sequence[str]) -> list[_Job]:
    """Group targets ("host:port" or full URLs) into one scrape job per scheme and path."""
    jobs: dict[tuple[str, str], _Job] = {}
    for target in targets:
        if "://" in target:
            parsed = urllib.parse.urlsplit(target)
            scheme, host, path = parsed.scheme, parsed.netloc, parsed.path or "/metrics"
        else:
            scheme, host, path = "http", target, "/metrics"
        jobs.setdefault((scheme, path), _Job(scheme, path)).targets.append(host)
    return list(jobs.values())


class PrometheusServer:
    """`/usr/bin/prometheus` on 127.0.0.1, a free port, a generated config and a temporary TSDB.

    Use as `async with PrometheusServer(...) as prom:`; `prom.url` is its base URL.
    """

    def __init__(
        self,
        scrape_targets: Sequence[str] = (),
        *,
        scrape_interval: str = "1s",
        tsdb_dir: str | Path | None = None,
        workdir: str | Path | None = None,
        honor_labels: bool = True,
        extra_args: Sequence[str] = (),
        binary: str = PROMETHEUS_BIN,
        start_timeout_s: float = 15.0,
        port: int | None = None,
        target_labels: Mapping[str, Mapping[str, str]] | None = None,
        extra_scrape_configs: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        """`scrape_targets` are "host:port" (path /metrics) or URLs. `tsdb_dir` defaults to a directory in
        `workdir`; `workdir` (config, log) defaults to a temporary directory removed by `close()`.
        `extra_args` go to the command line as they are (e.g. "--query.lookback-delta=1m").
        `port`: listen there (a client started earlier already points at it); default a free one.
        `target_labels`: "host:port" → labels Prometheus adds to that target's series (a static config's
        `labels`, as a PodMonitor adds `namespace` and `pod`).
        `extra_scrape_configs`: more jobs as Prometheus's `scrape_configs` entries, written as they are (a user's
        second job with its own interval or `metric_relabel_configs`).
        """
        self._targets = list(scrape_targets)
        self._scrape_interval = scrape_interval
        self._honor_labels = honor_labels
        self._extra_args = list(extra_args)
        self._binary = binary
        self._start_timeout_s = start_timeout_s
        self._own_workdir = workdir is None
        self.workdir = Path(tempfile.mkdtemp(prefix="prometheus-test-")) if workdir is None else Path(workdir)
        self.tsdb_dir = Path(tsdb_dir) if tsdb_dir is not None else self.workdir / "tsdb"
        self.log_path = self.workdir / "prometheus.log"
        self.config_path = self.workdir / "prometheus.yml"
        self._target_labels = {k: dict(v) for k, v in (target_labels or {}).items()}
        self._extra_scrape_configs = [dict(job) for job in extra_scrape_configs]
        self.port = port if port is not None else free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._proc: subprocess.Popen[bytes] | None = None

    # ---- lifecycle ----

    async def __aenter__(self) -> Self:
        try:
            await self.start()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    async def start(self) -> None:
        """Start (or restart, same port and data) and return once `/-/ready` answers 200."""
        if self.running:
            raise PrometheusTestError("Prometheus is already running")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.tsdb_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(json.dumps(self._config(), indent=2))  # JSON is YAML
        command = [
            self._binary,
            f"--config.file={self.config_path}",
            f"--storage.tsdb.path={self.tsdb_dir}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
            *self._extra_args,
        ]
        with self.log_path.open("ab") as log:
            log.write(f"---- starting: {' '.join(command)}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        _LIVE.add(self._proc)
        await self._wait_ready()

    async def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM (a clean shutdown that keeps the TSDB), SIGKILL if it does not exit in `timeout_s`."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                await asyncio.to_thread(proc.wait, timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                await asyncio.to_thread(proc.wait)
        _LIVE.discard(proc)
        self._proc = None

    async def kill(self) -> None:
        """SIGKILL: Prometheus dies as in a crash or an OOM kill; the WAL is replayed at the next start."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
            await asyncio.to_thread(proc.wait)
        _LIVE.discard(proc)
        self._proc = None

    async def close(self) -> None:
        """Stop the server and remove the temporary work directory this object made."""
        await self.stop()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def log_tail(self, lines: int = 40) -> str:
        """The end of Prometheus's own output, for failure messages."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    # ---- HTTP API ----

    async def query(self, promql: str, *, at: float | None = None) -> QueryResult:
        """One instant query; the `result` list. Raises `PrometheusTestError` on any non-success answer."""
        params = {"query": promql} | ({"time": repr(at)} if at is not None else {})
        status, body = await self.get("/api/v1/query?" + urllib.parse.urlencode(params))
        try:
            payload = json.loads(body)
        except ValueError as error:
            raise PrometheusTestError(f"query {promql!r}: HTTP {status}, not JSON: {body[:200]!r}") from error
        if status != 200 or payload.get("status") != "success":
            raise PrometheusTestError(f"query {promql!r}: HTTP {status}: {payload}")
        result: QueryResult = payload["data"]["result"]
        return result

    async def wait_for(
        self,
        promql: str,
        predicate: Callable[[QueryResult], bool] = bool,
        timeout: float = 15.0,
        interval: float = 0.1,
    ) -> QueryResult:
        """Poll an instant query until `predicate(result)` holds (default: a non-empty result); return it.

        Query errors while polling (not ready yet, restarting) count as "not yet". Raises TimeoutError with
        the last answer and the log tail. Scraped data needs about 6 s after start to appear.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        last: QueryResult | str = "no answer yet"
        while True:
            try:
                result = await self.query(promql)
                if predicate(result):
                    return result
                last = result
            except (PrometheusTestError, OSError) as error:
                last = str(error)
            if loop.time() >= deadline:
                raise TimeoutError(
                    f"{promql!r} did not satisfy the predicate in {timeout} s; "
                    f"last: {last}\n{self.log_tail()}"
                )
            await asyncio.sleep(interval)

    async def get(self, path: str, timeout_s: float = 5.0) -> tuple[int, bytes]:
        """GET a path on the server (e.g. "/metrics" for its own self-metrics): (status, body)."""
        return await asyncio.to_thread(_http_get, self.url + path, timeout_s)

    # ---- internals ----

    def _config(self) -> dict[str, Any]:
        jobs = [
            {
                "job_name": f"target-{index}",
                "scheme": job.scheme,
                "metrics_path": job.path,
                "honor_labels": self._honor_labels,
                "scrape_interval": self._scrape_interval,
                "scrape_timeout": self._scrape_interval,
                "static_configs": [
                    {"targets": [target], "labels": self._target_labels[target]}
                    if target in self._target_labels else {"targets": [target]}
                    for target in job.targets
                ],
            }
            for index, job in enumerate(_scrape_jobs(self._targets))
        ]
        interval = self._scrape_interval
        return {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "scrape_configs": [*jobs, *self._extra_scrape_configs],
        }

    async def _wait_ready(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._start_timeout_s
        while True:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                code = None if proc is None else proc.returncode
                if proc is not None:
                    _LIVE.discard(proc)
                self._proc = None
                raise PrometheusTestError(
                    f"Prometheus exited ({code}) before it was ready:\n{self.log_tail()}"
                )
            try:
                status, _ = await self.get("/-/ready", timeout_s=1.0)
                if status == 200:
                    # another run's server on a port of the same block answers too (tests/support/port_owner.py)
                    holder = someone_else_listens(self.url, proc.pid)
                    if holder is None:
                        return
                    await self.kill()
                    raise PrometheusTestError(
                        f"port {self.port} is held by another process ({holder}), not the Prometheus started here: "
                        "another test run on this machine took a port of the same block; give each checkout its "
                        "own TEST_PORT_BLOCK_OFFSET")
            except OSError:
                pass  # not listening yet
            if loop.time() >= deadline:
                await self.kill()
                raise PrometheusTestError(
                    f"Prometheus not ready in {self._start_timeout_s} s:\n{self.log_tail()}"
                )
            await asyncio.sleep(0.02)
