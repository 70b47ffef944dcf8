"""The exporter's HTTP surface and the background loops that feed it.

Collection happens in background tasks; a Prometheus scrape only renders the last values, so a slow
ModelMesh or GPU driver never makes `/metrics` slow. `/metrics` negotiates as prometheus_client's aiohttp handler
does (OpenMetrics for Prometheus) and gzips when the scraper asks for it; ModelMesh's families, most of a busy pod's
body, are rendered and gzipped once per ModelMesh read, not per scrape (`exporter.rendered_metrics`, see
`metrics_handler`). `bench/bench_exporter.py` measures the result against `start_http_server`, and
`bench/bench_exporter_models.py` the cost per scrape as the model count grows.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
import socket
import ssl
import zlib
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from typing import Any

from aiohttp import hdrs, web
from aiohttp.typedefs import Handler
from prometheus_client import CollectorRegistry, ProcessCollector, disable_created_metrics
from prometheus_client.aiohttp import make_aiohttp_handler
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from exporter import names
from exporter.accept_limit import quiet_accept_errors
from exporter.collectors.build_info import BuildInfoCollector
from exporter.collectors.health import CollectorHealth
from exporter.collectors.modelmesh import ModelMeshCollector
from exporter.collectors.pod import PodInfoCollector
from exporter.connection_cap import WRITE_DEADLINE_S, ConnectionCap, ConnectionCounts
from exporter.listen import KEEPALIVE_TIMEOUT_S, bind_listeners
from exporter.rendered_metrics import RenderedMetrics, Steady
from exporter.server_name import drop_server_name, nameless_handlers
from exporter.settings import MAX_CONNECTIONS, ExporterSettings
from exporter.stop_signals import StopSignals
from exporter.stopping import stop_tasks
from exporter.tls_handshakes import HANDSHAKE_TIMEOUT_S, TlsHandshakes

log = logging.getLogger(__name__)

HEALTH_KEY: web.AppKey[CollectorHealth] = web.AppKey("health", CollectorHealth)
REGISTRY_KEY: web.AppKey[CollectorRegistry] = web.AppKey("registry", CollectorRegistry)
CONNECTIONS_KEY: web.AppKey[ConnectionCounts] = web.AppKey("connections", ConnectionCounts)

STOP_GRACE_S = 1.5
"""After a stop signal, how long answers in flight (and requests already arriving) are given to finish before their
connections close: a scrape is answered in milliseconds, and the kubelet's grace period is 30 s. Background reads
(a hung NVML call, a ModelMesh read) are stopped after it, on their own clock (`exporter.stopping`), as before."""

KEPT_ALIVE_GRACE_S = 0.25
"""After a stop signal, how long connections kept alive between scrapes stay open, their answers saying
`Connection: close`, before they are closed: a scraper asking again within it reads its answer and then, on a new
connection, a refusal. Closed at once, one whose next request crossed the close read a reset (scrapers every 20 ms:
each of them). A scraper every 15 s asks again later, and a stop waits no longer for it."""

CUT_AFTER_GRACE_S = 0.25
"""What aiohttp's clean-up still gives an answer under way once `STOP_GRACE_S` is over (a client that stopped
reading it): short, so that a stuck reader adds little to the stop beyond the grace."""

Loop = Callable[[], Coroutine[Any, Any, None]]
"""Starts one background loop; called when the app starts, so an app that never runs leaves no coroutine."""


def modelmesh_ssl(settings: ExporterSettings) -> ssl.SSLContext | bool:
    """TLS for the ModelMesh scrape: verify by default, against a given CA, or not at all when asked."""
    if settings.modelmesh_insecure:
        return False
    if settings.modelmesh_ca_file is not None:
        return ssl.create_default_context(cafile=str(settings.modelmesh_ca_file))
    return True


def build_app(settings: ExporterSettings) -> web.Application:
    """The exporter: ModelMesh collector, GPU collector unless `--no-gpu`, self-metrics, and their loops."""
    # No `_created` series (a second series beside each counter, in no documented list): our families carry no
    # creation time, and this keeps it so for a prometheus_client Counter or Histogram added later.
    disable_created_metrics()  # type: ignore[no-untyped-call]
    registry = CollectorRegistry(auto_describe=False)
    health = CollectorHealth()
    modelmesh = ModelMeshCollector(
        health,
        settings.modelmesh_url,
        ssl_context=modelmesh_ssl(settings),
        timeout_s=settings.modelmesh_timeout_s,
        load_window_s=settings.load_window_s,
        model_recency_horizon_s=settings.model_recency_horizon_s,
        ca_file=settings.modelmesh_ca_file,
    )
    loops: list[Loop] = [functools.partial(modelmesh.run, settings.modelmesh_interval_s)]
    live: list[Collector] = []
    if settings.gpu_enabled and settings.gpu_unattributed is not None:
        # The pod's own GPUs could not be told: none is reported (other pods' GPUs would be wrong), said as a
        # failure, so the GPU alert fires; NVML is not touched.
        health.register(names.COLLECTOR_GPU)
        health.failed(names.COLLECTOR_GPU, names.REASON_CONNECT, settings.gpu_unattributed,
                      served="no GPU series until the exporter restarts with the kubelet's socket")
    elif settings.gpu_enabled:
        # `--no-gpu` publishes no GPU collector at all: a `collector="gpu"` success of 0 on every CPU-only pod
        # would read as a failing collector (dashboards, alerts) where there is nothing to collect.
        health.register(names.COLLECTOR_GPU)
        # Imported here so a CPU-only exporter (`--no-gpu`) never loads pynvml.
        from exporter.collectors.gpu import GpuCollector

        gpu = GpuCollector(health, window_s=settings.gpu_window_s, uuids=settings.gpu_uuids or None)
        live.append(gpu)
        loops.append(functools.partial(gpu.run, settings.gpu_interval_s))
    connections = ConnectionCounts()
    # process_* (start time, CPU, memory, open files): a sidecar restarting (OOM-killed at its limit, crash-
    # looping) showed only as its counters back at zero. Before the pod's family, which stays last.
    live += [health, connections, BuildInfoCollector(), ProcessCollector(registry=None)]
    # The pod's family stays last: the adapter's fast reader looks for it there (autoscaler/sources/exporter_text.py)
    if settings.identity.labels():  # none given (a sidecar patched before the variables): no series, read as before
        live.append(PodInfoCollector(settings.identity))
    # ModelMesh's families (one series per model served within the horizon: most of the body) are a function of
    # its last good read: rendered once per read and format, in a worker thread, the rest at every scrape
    # (`exporter.rendered_metrics`). Before the others, as they always were.
    steady = Steady(modelmesh, lambda: modelmesh.reads)
    for collector in (modelmesh, *live):
        registry.register(collector)
    return metrics_app(registry, health, loops, connections, rendered=RenderedMetrics([steady], live))


def metrics_handler(registry: CollectorRegistry, gzip_level: int = 6, rendered: RenderedMetrics | None = None,
                    ) -> Handler:
    """`registry`'s exposition, negotiated as prometheus_client's aiohttp handler does (OpenMetrics for Prometheus,
    else text 0.0.4), gzipped when asked; made by `rendered` (`exporter.rendered_metrics`: the part that changes
    only at a reading rendered once per reading, in a worker thread), by default all of `registry` per scrape.

    A `name[]` filter goes to the library's handler, which renders the families named (a rare, small request).
    The library's handler leaves gzip to aiohttp, and aiohttp hands every body over 4 KiB (ours with a few
    GPUs) to its thread pool: a thread hop per scrape that costs more CPU and latency than compressing the
    few KiB where we are (about 50 µs). Prometheus always asks for gzip.
    """
    filtered = make_aiohttp_handler(registry, disable_compression=True)
    whole = rendered if rendered is not None else RenderedMetrics((), [registry], gzip_level)

    async def metrics(request: web.Request) -> web.StreamResponse:
        accepted = gzip_accepted(request.headers.getall(hdrs.ACCEPT_ENCODING, ()))
        if "name[]" in request.query:
            response = await filtered(request)
            if accepted and isinstance(response, web.Response) and isinstance(response.body, bytes):
                response.body = gzipped(response.body, gzip_level)
                _say_gzip(response)
            return response
        encoder, content_type = choose_encoder(",".join(request.headers.getall(hdrs.ACCEPT, ())))
        response = web.Response(body=await whole.body(encoder, content_type, accepted),
                                headers={hdrs.CONTENT_TYPE: content_type})
        if accepted:
            _say_gzip(response)
        return response

    return metrics


def gzipped(body: bytes, level: int) -> bytes:
    """`body` as one gzip stream."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return compressor.compress(body) + compressor.flush()


def _say_gzip(response: web.Response) -> None:
    response.headers[hdrs.CONTENT_ENCODING] = "gzip"
    response.headers[hdrs.VARY] = hdrs.ACCEPT_ENCODING


def gzip_accepted(accept_encoding: Iterable[str]) -> bool:
    """Whether the `Accept-Encoding` header values ask for gzip: `gzip` (or its alias `x-gzip`) listed with a
    qvalue above 0 (RFC 9110, 12.5.3: `q=0` is "not acceptable"). `*` is not taken as gzip: the body is sent
    plain unless gzip is named, as before.

    Ours because neither library has it: prometheus_client's `gzip_accepted` and aiohttp's own compression take
    any `gzip` entry, `gzip;q=0` too, and a client that said it cannot read gzip got gzip."""
    for entry in ",".join(accept_encoding).split(","):
        coding, *parameters = (part.strip() for part in entry.split(";"))
        if coding.lower() not in ("gzip", "x-gzip"):
            continue
        quality = 1.0
        for parameter in parameters:
            name, _, value = parameter.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(value.strip())
                except ValueError:
                    quality = 0.0  # not a qvalue: not a request for gzip
        if quality > 0:
            return True
    return False


def _loop_name(loop: Loop) -> str:
    """`ModelMeshCollector.run` for `functools.partial(collector.run, interval)`: what a stop's log names."""
    function = loop.func if isinstance(loop, functools.partial) else loop
    return getattr(function, "__qualname__", repr(function))


def metrics_app(registry: CollectorRegistry, health: CollectorHealth, loops: Sequence[Loop] = (),
                connections: ConnectionCounts | None = None,
                rendered: RenderedMetrics | None = None) -> web.Application:
    """Serve `registry` at /metrics and liveness at /healthz, running `loops` while the app runs; `run` counts its
    connections in `connections` (registered in `registry` by the caller, where it is published). `rendered`:
    the same collectors cut where a part changes only at a reading (`metrics_handler`).

    Split from `build_app` so the benchmark serves exactly this surface over registries it fills itself.
    """

    async def background(app: web.Application) -> AsyncIterator[None]:
        tasks = [asyncio.create_task(loop(), name=_loop_name(loop)) for loop in loops]
        yield
        await stop_tasks(tasks)  # even a read that takes the stop for its own timeout

    async def healthz(request: web.Request) -> web.Response:
        # Alive as long as it serves; a failing collector is reported in /metrics, not by restarting the
        # pod: a restart would not fix ModelMesh or the GPU, and would lose the counters we carry.
        return web.Response(text="ok\n")

    app = web.Application()
    app[HEALTH_KEY] = health
    app[REGISTRY_KEY] = registry
    app[CONNECTIONS_KEY] = connections if connections is not None else ConnectionCounts()
    app.router.add_get("/metrics", metrics_handler(registry, rendered=rendered))
    app.router.add_get("/healthz", healthz)
    app.cleanup_ctx.append(background)
    app.on_shutdown.append(_log_stopping)
    app.on_response_prepare.append(drop_server_name)
    return app


async def _log_stopping(app: web.Application) -> None:
    """The last line a stopped exporter logs: it says the stop was asked for (SIGTERM or SIGINT), not a crash."""
    log.info("stopping: /metrics closes and the background sampling ends")


def _take_stop_signals(signals: StopSignals, stop: Callable[[], None],
                       ) -> Callable[[web.Application], Coroutine[Any, Any, None]]:
    """The `on_startup` hook that hands the stopping signals to the serving loop until its clean-up is over.

    aiohttp's own handlers (`run_app`'s) raised its GracefulExit again at a second SIGTERM during the clean-up,
    which cut it short, and were put back to the default as it ended: a supervisor that repeats its SIGTERM left
    the exporter exiting 1 or 143, or hung on an NVML pass it no longer waited for. Here the first of SIGTERM,
    SIGINT and SIGHUP stops the exporter (SIGHUP, a terminal closed, stopped it with no line at its default); one
    after it is said once and ignored, through the clean-up (the handlers go last, in `on_cleanup`) and after it
    (`StopSignals`: only noted, then `hold`)."""

    async def take(app: web.Application) -> None:
        taken = contextlib.ExitStack()
        received: list[signal.Signals] = []

        def stop_on(signum: signal.Signals) -> None:
            received.append(signum)
            if len(received) == 1:
                if signum == signal.SIGHUP:  # SIGTERM and SIGINT say so in `_log_stopping`, as before
                    log.info("SIGHUP: stopping")
                stop()  # `serve` stops serving, lets the answers in flight finish, then cleans up
            if len(received) == 2:
                log.info("%s while stopping: ignored (the clean-up goes on; more are ignored without a line)",
                         signum.name)

        taken.enter_context(signals.delivered(stop_on))
        signals.install()

        async def given_back(app: web.Application) -> None:
            taken.close()

        app.on_cleanup.append(given_back)

    return take


async def _quiet_accept_errors(app: web.Application) -> None:
    """At the open-file limit the listening sockets say so once (`exporter.accept_limit`), not asyncio per attempt."""
    quiet_accept_errors(asyncio.get_running_loop())


class _CappedSite(web.SockSite):
    """A listening socket whose connections go through the `ConnectionCap`; at its stop, the connections already
    waiting in its backlog are taken and answered, not reset with the socket."""

    def __init__(self, runner: web.BaseRunner, sock: socket.socket,
                 connections: ConnectionCap | TlsHandshakes) -> None:
        super().__init__(runner, sock)
        self._connections = connections
        """What each accepted connection is given to: the cap, or over TLS its handshake first."""
        self._listening = sock
        self._taken: list[asyncio.Task[Any]] = []

    async def start(self) -> None:
        await web.BaseSite.start(self)
        self._server = await asyncio.get_running_loop().create_server(
            self._connections, sock=self._listening, backlog=self._backlog)

    async def stop(self) -> None:
        """Stop accepting, let asyncio's accepts under way finish, take what waits in the backlog, then close.

        Closed at once (`asyncio.Server.close`), connections asyncio had accepted in the same wake-up but not yet
        made a transport for were dropped with their request unread: a reset for the scraper (CPython 3.11: the
        transport's `Server._attach` fails on a closed server, logged only in asyncio's debug mode)."""
        loop = asyncio.get_running_loop()
        if self._listening.fileno() != -1:
            loop.remove_reader(self._listening.fileno())
        for _ in range(3):  # asyncio's own accepts of the last wake-up make their transports
            await asyncio.sleep(0)
        # Then, with no await before the close, what waits in the backlog (the kernel resets it with the socket).
        with contextlib.suppress(OSError):  # closed already, or out of files: what waits is reset, as before
            while True:
                accepted, _ = self._listening.accept()
                accepted.setblocking(False)
                self._taken.append(
                    loop.create_task(loop.connect_accepted_socket(self._connections, accepted)))
        await super().stop()


async def serve(app: web.Application, sockets: Sequence[socket.socket], *, access_log: bool = False,
                ssl_context: ssl.SSLContext | None = None, signals: StopSignals | None = None,
                max_connections: int = MAX_CONNECTIONS, write_deadline_s: float = WRITE_DEADLINE_S,
                stop_grace_s: float = STOP_GRACE_S, stopped: asyncio.Event | None = None,
                handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S) -> None:
    """Serve `app` on `sockets` until a stop signal (taken from `signals`), then stop in order: no new connection
    (those already waiting in the backlog taken), up to `stop_grace_s` for the answers in flight and the requests
    arriving (every answer now saying `Connection: close`; connections kept alive between scrapes left open
    `KEPT_ALIVE_GRACE_S` of it), then aiohttp's clean-up, which closes the connections and stops the background
    loops. aiohttp's `run_app` closed every connection at once: scrapers in flight read "connection reset by peer".
    `stopped`, when given, stops it as a signal does. Over TLS each handshake has `handshake_timeout_s`, and at
    most four times `max_connections` (at least 64) are under way (`exporter.tls_handshakes`)."""
    stopped = stopped if stopped is not None else asyncio.Event()

    async def closing_once_stopped(request: web.BaseRequest, response: web.StreamResponse) -> None:
        if stopped.is_set():  # the scraper's next request goes to a new connection, refused
            response.force_close()  # closed once answered
            response.headers[hdrs.CONNECTION] = "close"  # said: aiohttp 3.14 prepares the headers before this hook

    app.on_response_prepare.append(closing_once_stopped)
    if signals is not None:
        app.on_startup.append(_take_stop_signals(signals, stopped.set))
    app.on_startup.append(_quiet_accept_errors)
    runner = web.AppRunner(app, handle_signals=False, keepalive_timeout=KEEPALIVE_TIMEOUT_S,
                           access_log=logging.getLogger("aiohttp.access") if access_log else None,
                           shutdown_timeout=CUT_AFTER_GRACE_S)
    await runner.setup()  # its clean-up closes every connection, giving what is still under way CUT_AFTER_GRACE_S
    try:
        assert runner.server is not None
        cap = ConnectionCap(nameless_handlers(runner.server), app[CONNECTIONS_KEY], max_connections,
                            write_deadline_s)
        connections = cap if ssl_context is None else TlsHandshakes(cap, ssl_context, handshake_timeout_s)
        sites = [_CappedSite(runner, sock, connections) for sock in sockets]
        for site in sites:
            await site.start()
        await stopped.wait()
        for site in sites:
            await site.stop()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + stop_grace_s
        kept_alive_until = loop.time() + min(KEPT_ALIVE_GRACE_S, stop_grace_s)
        await asyncio.sleep(0.05)  # the backlog's connections made, their requests read
        while (cap.busy() or (cap.connections and loop.time() < kept_alive_until)) and loop.time() < deadline:
            await asyncio.sleep(0.02)
        cap.close_line()
    finally:
        await runner.cleanup()


def run(app: web.Application, host: str, port: int, *, access_log: bool = False,
        sockets: Sequence[socket.socket] | None = None, ssl_context: ssl.SSLContext | None = None,
        max_connections: int = MAX_CONNECTIONS) -> None:
    """Serve until SIGTERM/SIGINT/SIGHUP (`serve`) on `sockets` (bound by `exporter.listen` before anything else
    started), or on `host:port` bound here; over HTTPS with `ssl_context` (`exporter.metrics_tls`), at most
    `max_connections` open (`exporter.connection_cap`). No access log by default: Prometheus scrapes every few
    seconds forever, and formatting a log line per scrape would cost more than rendering the metrics. Idle
    connections stay open `KEEPALIVE_TIMEOUT_S`, which the adapter's scrape counts on to reuse them."""
    signals = StopSignals()
    try:
        asyncio.run(serve(app, list(sockets) if sockets is not None else bind_listeners(host, port),
                          access_log=access_log, ssl_context=ssl_context, signals=signals,
                          max_connections=max_connections))
    finally:
        signals.hold()  # ignored while Python shuts down, which puts its own handlers back to the default
