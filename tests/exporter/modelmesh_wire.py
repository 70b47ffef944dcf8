"""A ModelMesh `mm` container's metrics endpoint as the real one behaves over its life, for lifecycle tests.

Unlike the demo's stand-in (`autoscaler.demo.fake_modelmesh`, which serves a steady state), this one follows
what kserve/modelmesh does, read from its source (`Metrics.PrometheusMetrics`, `ModelMesh.java`,
`prometheus/NettyServer.java`, simpleclient 0.9's `TextFormat.write004`):

- the text: `# HELP`/`# TYPE` per family, a comma after every label (`{code="OK",}`), Java's doubles
  (`1.0`, `1.764614112E9`), no Content-Type header;
- a labelled histogram (the invoke histogram; every histogram with per-model metrics on) has no series
  until its first observation; an unlabelled one (queue delay, cache miss) is there from the start at 0;
- the instance gauges read 0 from the start until ModelMesh first publishes its instance record, and change
  only when it publishes one (`logInstanceStats`: on a record change worth publishing, at most every 2 s, and
  from the janitor every 6 minutes), so `modelmesh_instance_lru_age_seconds` is the LRU model's age *at the
  last publish*, while `modelmesh_instance_lru_seconds` is its last-use time (epoch seconds; with no model,
  `Long.MAX_VALUE / 1000`);
- a restart starts all of that again: `restart()`;
- `/metrics?name[]=...` as simpleclient 0.9's `filteredMetricFamilySamples`: the collectors with a family of
  that name (a histogram's also by its `_count`, `_sum`, `_bucket`), with only the samples of those names;
- with per-model metrics on, every histogram has a series per model used here, buckets included
  (`add_models`), the families the exporter does not read as well; the request histograms label it
  `method, code, modelId, vModelId` in that order (`Metrics.PrometheusMetrics`), the others `modelId, vModelId`
  with an empty `vModelId` (`logTimingMetricDuration`), and a request without a model id is labelled `""`;
- label values escaped as simpleclient's `writeEscapedLabelValue` does: `\\`, `\"` and `\n`;
- the queue-delay histogram times a request only where the model server limits each model's concurrency
  (`RuntimeStatusResponse.limitModelConcurrency`: ModelMesh then makes `MaxConcCacheEntry`s, whose
  `beforeInvoke` alone records `QUEUE_DELAY`); elsewhere, the default of modelmesh-serving's built-in runtimes,
  it stays at 0 (or, with per-model metrics on, has no series): `queue_timed`.

Time is the caller's wall clock (`wall`), so the tests step it.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import ssl
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Final

from aiohttp import web
from yarl import URL

from autoscaler.demo.fake_modelmesh_metrics import NO_LRU_SECONDS
from exporter import names
from tests.support.ports import free_port

MS_TIME_BUCKETS: Final = (0.5, 1, 2, 5, 10, 20, 50, 75, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 60000,
                          120000, 300000)
GIB: Final = 1 << 30


def escape_label_value(value: str) -> str:
    """simpleclient's `TextFormat.writeEscapedLabelValue`: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def java_double(value: float) -> str:
    """`Collector.doubleToGoString`: Java's `Double.toString`, whose exponent form starts at 1e7."""
    if value == float("inf"):
        return "+Inf"
    if abs(value) >= 1e7:
        mantissa, exponent = f"{value:.16E}".split("E")
        digits = mantissa.rstrip("0").rstrip(".")
        return f"{digits if '.' in digits else digits + '.0'}E{int(exponent)}"
    return repr(float(value))


@dataclass
class _Series:
    count: float = 0.0
    total_ms: float = 0.0
    buckets: list[float] = field(default_factory=lambda: [0.0] * len(MS_TIME_BUCKETS))

    def observe(self, value_ms: float, times: float) -> None:
        self.count += times
        self.total_ms += value_ms * times
        for index, bound in enumerate(MS_TIME_BUCKETS):
            if value_ms <= bound:
                self.buckets[index] += times


@dataclass
class _Histogram:
    name: str
    help: str
    label_names: tuple[str, ...]
    series: dict[tuple[str, ...], _Series] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.label_names:
            self.series[()] = _Series()  # simpleclient's no-labels child: there from the start

    def render(self, out: list[str], include: frozenset[str]) -> None:
        wanted = {f"{self.name}{suffix}" for suffix in ("_bucket", "_count", "_sum")}
        if include:
            if not include & {*wanted, self.name}:
                return
            wanted &= include
        samples: list[str] = []
        for values, series in self.series.items():
            labels = "".join(f'{n}="{escape_label_value(v)}",'
                             for n, v in zip(self.label_names, values, strict=True))
            if f"{self.name}_bucket" in wanted:
                for bound, count in zip((*MS_TIME_BUCKETS, float("inf")), (*series.buckets, series.count),
                                        strict=True):
                    samples.append(f'{self.name}_bucket{{{labels}le="{java_double(bound)}",}} {java_double(count)}')
            for suffix, value in (("_count", series.count), ("_sum", series.total_ms)):
                if f"{self.name}{suffix}" in wanted:
                    samples.append(f"{self.name}{suffix}{{{labels}}} {java_double(value)}" if labels
                                   else f"{self.name}{suffix} {java_double(value)}")
        if samples or not include:
            out.extend((f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram", *samples))


class ModelMeshContainer:
    """One `mm` container's metrics state; `restart()` makes it a new container."""

    def __init__(self, wall: Callable[[], float], *, per_model: bool = False, queue_timed: bool = True) -> None:
        """`queue_timed`: the model server limits each model's concurrency (`limitModelConcurrency`), so ModelMesh
        times every request in its queue; False as modelmesh-serving's built-in runtimes run by default (no
        `perModelConcurrencyLimit` annotation on the ServingRuntime)."""
        self._wall = wall
        self.per_model = per_model
        self.queue_timed = queue_timed
        self.restart()

    def restart(self) -> None:
        """A new JVM: counters gone, instance gauges 0 until the first `publish`."""
        model = ("modelId", "vModelId") if self.per_model else ()
        self.invoke = _Histogram(names.MM_INVOKE_MODEL_MS, "Internal model server inference request time",
                                 ("method", "code", *model))
        self.queue = _Histogram(names.MM_QUEUE_DELAY_MS, "Time spent in inference request queue", model)
        self.cache_miss = _Histogram(names.MM_CACHE_MISS_MS, "Cache miss delay", model)
        self.unread = [  # ModelMesh's other histograms: per model with per-model metrics on
            _Histogram(name, "not read by the exporter", labels) for name, labels in (
                ("modelmesh_api_request_milliseconds", ("method", "code", *model)),
                ("modelmesh_request_size_bytes", ("method", "code", *model)),
                ("modelmesh_response_size_bytes", ("method", "code", *model)),
                (names.MM_LOAD_MODEL_MS, model), ("modelmesh_unloadmodel_milliseconds", model),
                ("modelmesh_loading_queue_delay_milliseconds", model), ("modelmesh_model_sizing_milliseconds", model),
                ("modelmesh_age_at_eviction_milliseconds", model), ("modelmesh_loaded_model_size_bytes", model),
            )
        ]
        self.gauges: dict[str, float] = dict.fromkeys(
            (names.MM_LRU_S, names.MM_LRU_AGE_S, names.MM_CAPACITY_BYTES, names.MM_USED_BYTES,
             "modelmesh_instance_used_bps", names.MM_MODELS_TOTAL), 0.0)

    def serve(self, requests: float, *, model: str = "model-0", code: str = "OK", latency_ms: float = 20.0,
              queue_ms: float = 1.0, method: str = "ModelInfer", vmodel: str = "") -> None:
        """`requests` inference requests of `model` ran here (queued `queue_ms` each); `vmodel`: the virtual
        model they were sent to ("" when sent to the model itself)."""
        per_model = (model, vmodel) if self.per_model else ()
        self.invoke.series.setdefault((method, code, *per_model), _Series()).observe(latency_ms, requests)
        self.queued(requests, model=model, queue_ms=queue_ms)

    def queued(self, requests: float, *, model: str = "model-0", queue_ms: float = 1.0) -> None:
        """`requests` of `model` left ModelMesh's queue (timed there, where it times it) and are still running:
        their request series comes when they end (`serve`)."""
        if self.queue_timed:
            self.queue.series.setdefault((model, "") if self.per_model else (), _Series()).observe(queue_ms, requests)

    def add_models(self, count: int, requests_each: float = 3.0) -> None:
        """`count` models each loaded, used, missed and evicted here once: their series in every histogram."""
        assert self.per_model
        for index in range(count):
            model = f"model-{index:05d}__isvc-{index * 7919 % 10**10:010d}"
            self.serve(requests_each, model=model)
            self.cache_miss.series.setdefault((model, ""), _Series()).observe(2000.0, 1)
            for histogram in self.unread:
                key = ("ModelInfer", "OK", model, "") if len(histogram.label_names) == 4 else (model, "")
                histogram.series.setdefault(key, _Series()).observe(10.0, 1)

    def publish(self, *, models: int, lru_time_s: float | None, capacity_bytes: float = 16 * GIB,
                used_bytes: float = 8 * GIB) -> None:
        """`logInstanceStats` of the record ModelMesh publishes now (`lru_time_s` None: no model)."""
        lru_ms = NO_LRU_SECONDS * 1000 if lru_time_s is None else int(lru_time_s * 1000)
        no_lru = lru_time_s is None
        self.gauges[names.MM_LRU_S] = float(lru_ms // 1000)
        self.gauges[names.MM_LRU_AGE_S] = 0.0 if no_lru else float((int(self._wall() * 1000) - lru_ms) // 1000)
        self.gauges[names.MM_CAPACITY_BYTES] = capacity_bytes
        self.gauges[names.MM_USED_BYTES] = used_bytes
        used_bps = int(used_bytes / capacity_bytes * 10_000) if capacity_bytes else 0
        self.gauges["modelmesh_instance_used_bps"] = float(used_bps)
        self.gauges[names.MM_MODELS_TOTAL] = float(models)

    def shut_down(self) -> None:
        """The last `logInstanceStats` of a stopping ModelMesh: an empty instance record."""
        self.publish(models=0, lru_time_s=None, capacity_bytes=0.0, used_bytes=0.0)

    def render(self, include: frozenset[str] = frozenset()) -> str:
        """The exposition; `include`: the `name[]` of the request (empty: everything)."""
        out: list[str] = []
        for histogram in (self.invoke, self.queue, self.cache_miss, *self.unread):
            histogram.render(out, include)
        for name, value in self.gauges.items():
            if not include or name in include:
                out.extend((f"# HELP {name} instance gauge", f"# TYPE {name} gauge", f"{name} {java_double(value)}"))
        return "\n".join(out) + "\n"


class MetricsPort:
    """The container's port 2112: up (serving `container`), or down (refusing connections)."""

    def __init__(self, container: ModelMeshContainer, ssl_context: ssl.SSLContext | None = None) -> None:
        self.container = container
        self.delay_s = 0.0
        self.garbage = False
        """Answer 200 with an HTML page instead of metrics (a proxy's error page)."""
        self.garble: Callable[[str], str] | None = None
        """Pass the text through this before answering: a body a broken proxy or a bug has cut or repeated."""
        self.port = 0
        self.requests: list[URL] = []
        self._ssl = ssl_context
        self._runner: web.AppRunner | None = None

    async def _metrics(self, request: web.Request) -> web.Response:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        self.requests.append(request.rel_url)
        if self.garbage:
            return web.Response(text="<html><body>502 Bad Gateway</body></html>\n")
        text = self.container.render(frozenset(request.query.getall("name[]", [])))
        response = web.Response(body=(text if self.garble is None else self.garble(text)).encode())
        response.headers.popall("Content-Type", None)  # NettyServer sets none
        return response

    async def up(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, ssl_context=self._ssl)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def down(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def url(self) -> str:
        return f"{'https' if self._ssl else 'http'}://127.0.0.1:{self.port}/metrics"


@contextlib.contextmanager
def served_in_a_thread(container: ModelMeshContainer) -> Iterator[str]:
    """`container`'s port 2112 for an exporter in its own process (plain http; the URL): served from a thread, so
    a test that drives the process with blocking calls (`tests.support.processes`) still gets every read
    answered. `MetricsPort` serves on the test's event loop instead, for the in-process exporter."""

    def body(path: str) -> bytes:
        return container.render(frozenset(urllib.parse.parse_qs(urllib.parse.urlsplit(path).query).get(
            "name[]", []))).encode()

    with answering_in_a_thread(body) as url:  # NettyServer sets no Content-Type
        yield url


@contextlib.contextmanager
def answering_in_a_thread(body: Callable[[str], bytes], content_type: str | None = None) -> Iterator[str]:
    """A plain-http server on a free port answering each GET with `body(path)` from a thread (the URL of its
    /metrics): for an exporter in its own process driven by blocking calls."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            answer = body(self.path)
            self.send_response(200)
            if content_type is not None:
                self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            with contextlib.suppress(ConnectionError):  # the exporter stopped mid-answer
                self.wfile.write(answer)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()
