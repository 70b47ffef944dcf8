"""Assembles the adapter's HTTP API: routes, error rendering and request self-metrics.

Authentication and authorization plug in as a gate ahead of the handlers (see `autoscaler.api.auth`); the
`--insecure-dev` mode runs without it on loopback only. Each route's handler is wrapped (`Serving`) in all
that surrounds it: it times and counts every answer (by route, not raw path: bounded cardinality), turns every
error (the gate's 401/403/500 included) into a `Status`, and runs the gate before the handler. No middleware:
aiohttp's middleware machinery cost 6% of a request's CPU (`bench/bench_request_cost.py`); a catch-all route,
registered last, gives unknown paths and methods their 404 or 405 behind the gate.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import cast

from aiohttp import hdrs, web
from aiohttp.typedefs import Handler
from aiohttp.web_urldispatcher import _default_expect_handler
from prometheus_client import Counter, Histogram
from prometheus_client.aiohttp import make_aiohttp_handler

from autoscaler.api import handlers, runtimes
from autoscaler.api.client_errors import install_client_error_filter
from autoscaler.api.health import health_routes
from autoscaler.api.malformed_requests import closing_status
from autoscaler.api.negotiation import NOT_ACCEPTABLE, accepts_json
from autoscaler.api.openapi import openapi_v2
from autoscaler.api.render import RefresherSnapshots
from autoscaler.api.selfmetrics_split import worker_metrics_handler
from autoscaler.api.snapshot import SNAPSHOT_KEY, SnapshotStore
from autoscaler.api.stall import STALL_KEY, StallWatch, stall_context
from autoscaler.api.status import ApiError, ApiResponse, as_api_response, status_response
from autoscaler.gcsettings import tune_for_serving
from autoscaler.kube.review_connection import ReviewConnection
from autoscaler.names import GROUP_VERSION
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.settings import ServeSettings
from exporter.cert_reload import certificate_reload_context

log = logging.getLogger(__name__)

EXTERNAL_METRIC_ROUTE = f"/apis/{GROUP_VERSION}/namespaces/{{namespace}}/{{metric}}"
CATCH_ALL_ROUTE = r"/{unmatched:[\s\S]*}"  # any path, newlines too
CATCH_ALL_NAME = "unmatched"
"""The catch-all route's name: not a path of the API (`unmatched`)."""

SLASH_TOLERANT = frozenset({"/apis", "/apis/external.metrics.k8s.io", f"/apis/{GROUP_VERSION}",
                            EXTERNAL_METRIC_ROUTE, "/version", runtimes.KEDA_ROUTE, runtimes.DEBUG_ROUTE})
"""Routes also answered with a trailing slash, counted under the route: kube-apiserver's (go-restful's) are,
and clients ask for them so (the `kubernetes` Python client's `ApisApi` asks for `/apis/`, `VersionApi` for
`/version/`); a runtime's explanation and KEDA values are pasted into browsers and scaler specs with one too.
Authorization is alike with or without it (`identity.request_attributes` splits the path without its slashes).
`/openapi/v2`, the health paths and `/metrics` are exact paths there, as here."""

HEALTH_PATHS = ("/healthz", "/livez", "/readyz")
TEXT_ROUTES = frozenset({*HEALTH_PATHS, "/metrics"})
"""Routes that answer in text whatever the client accepts (probes and Prometheus name no JSON), with each
health check's own path under a health path (`health`); the others write JSON and refuse a client that takes
none."""


def writes_text(path: str) -> bool:
    """Whether the route `path` answers in text (`TEXT_ROUTES`, or a health check's `PATH/NAME`)."""
    return path in TEXT_ROUTES or path.startswith(tuple(health + "/" for health in HEALTH_PATHS))

PlainHandler = Callable[[web.Request], web.StreamResponse]
"""A handler that never waits: called by `Serving` without a coroutine layer of its own."""

Gate = Callable[[web.Request], Awaitable[None] | None]
"""Lets a request through (None, or an awaitable that completes), or refuses it with an `ApiError` (401, 403,
500) raised at once or by the awaitable. Most requests are decided at once: no coroutine to run."""


_WHERE: tuple[tuple[str, str], ...] = (
    (f"/apis/{GROUP_VERSION}/", f"external metrics are at /apis/{GROUP_VERSION}/namespaces/<namespace>/<metric>"
                                "?labelSelector=deployment=<Deployment name>"),
    ("/apis/external.metrics.k8s.io/", f"the adapter serves external.metrics.k8s.io at version {GROUP_VERSION}"),
    ("/debug/", f"a runtime's explanation is at {runtimes.DEBUG_ROUTE.replace('{', '<').replace('}', '>')}"),
    ("/keda/", f"a runtime's values for KEDA are at {runtimes.KEDA_ROUTE.replace('{', '<').replace('}', '>')}"),
)
"""For a path near a served one (a segment short, another version), what the path should be."""


def _not_found(path: str) -> str:
    message = f"the server could not find the requested resource {path!r}"
    for prefix, where in _WHERE:
        if path.startswith(prefix) or path == prefix[:-1]:  # `/debug` as `/debug/`
            return f"{message}; {where}"
    return message


def error_response(request: web.Request, error: Exception) -> web.Response:
    """Every error leaves as a Kubernetes `Status`; internal detail goes to the log, not the client."""
    if isinstance(error, ApiError):
        return status_response(error.code, error.message, retry_after_s=error.retry_after_s)
    if isinstance(error, web.HTTPException):
        message = {404: _not_found(request.path),
                   405: f"method {request.method} is not allowed on {request.path!r}"}.get(
            error.status, error.reason)
        allow = error.headers.get("Allow")  # a 405 must say which methods are (RFC 9110, 15.5.6)
        return status_response(error.status, message, {"Allow": allow} if allow else None)
    log.error("internal error serving %s %r", request.method, request.path, exc_info=error)
    return status_response(500, "internal error; see the adapter's log")


class Serving:
    """Wraps each route's handler in what surrounds it: the gate, errors as `Status`, and the request's count
    and latency (kept in the tally), all in one coroutine layer.

    Wrapped at registration rather than as a middleware: with any middleware, aiohttp builds a chain of
    `functools.partial`s per request and adds a coroutine layer of its own, which cost 6% of a request's CPU
    (`bench/bench_request_cost.py`). Paths that match no route reach `unmatched`, a catch-all route registered
    last, so that a 404 or 405 also passes the gate first and leaves as a `Status`.

    Labelled children are looked up once per (route, code) and kept: `labels()` takes a lock and validates
    on every call, which costs as much as the rest of a cached request."""

    def __init__(self, metrics: AdapterMetrics, gate: Gate | None) -> None:
        self._metrics = metrics
        self._gate = gate

    def __call__(self, handler: Handler | PlainHandler, path: str, *, writes_json: bool = False) -> Handler:
        """`handler` served; one that `writes_json` first refuses, after the gate, a client that takes no
        JSON (406, `negotiation`). A handler that is a plain function (the HPA's: it never waits) is called
        without a coroutine layer of its own. Arguments after the request go to `handler` (`dispatch` gives
        the namespace and metric it read off the path)."""
        metrics, gate, tally, clock = self._metrics, self._gate, self._metrics.tally, time.perf_counter
        children: dict[int, tuple[Counter, Histogram]] = {}
        plain = None if inspect.iscoroutinefunction(handler) else cast(Callable[..., web.StreamResponse], handler)
        awaited = cast(Callable[..., Awaitable[web.StreamResponse]], handler)

        async def served(request: web.Request, *args: str) -> web.StreamResponse:
            started = clock()
            try:
                if gate is not None and (deciding := gate(request)) is not None:
                    await deciding
                if writes_json and (accept := request.headers.get(hdrs.ACCEPT)) and not accepts_json(accept):
                    raise ApiError(406, NOT_ACCEPTABLE)
                response = plain(request, *args) if plain is not None else await awaited(request, *args)
            except web.HTTPException as error:
                if error.status < 400:
                    raise
                response = error_response(request, error)
            except Exception as error:  # ApiError, and anything unexpected
                response = error_response(request, error)
            if response.__class__ is not ApiResponse:  # kube's headers, no `Server` (`status.ApiResponse`)
                response = as_api_response(cast(web.Response, response))
            status = response.status
            series = children.get(status)
            if series is None:
                series = children[status] = (metrics.requests.labels(path, str(status)),
                                             metrics.request_seconds.labels(path))
            tally.count_and_observe(*series, clock() - started)
            return response

        return served

    def dispatch(self, handler: handlers.MetricHandler, path: str, application: Handler) -> Handler:
        """The serving worker's request handler: the HPA's request, `GET` of an external metric
        (`EXTERNAL_METRIC_ROUTE`, with or without its trailing slash), recognised by a string test of its raw
        path and served by `handler` as its route would serve it (`__call__`'s wrapping: the gate, the 406,
        errors as `Status`, counted under `path`); every other request goes to `application` (the app's own
        `_handle`: routing, the catch-all's 404 and 405) unchanged.

        aiohttp's routing costs the HPA's request a `UrlDispatcher.resolve` coroutine, the route's regex, a match
        info to build and freeze, and a coroutine layer of its own around the handler; a bare aiohttp handler
        pays all of them too. Served here only where the route would match it with the same namespace and
        metric: a path with a `%` (the route matches the decoded path), `{` or `}` (not in the route's
        segments), another method (HEAD included) or an `Expect` header goes through routing.
        `tests/api/test_fast_dispatch.py` holds both ways to the same answers."""
        served = cast(Callable[..., Awaitable[web.StreamResponse]],
                      self(cast(PlainHandler, handler), path, writes_json=True))
        prefix, start = _HOT_PREFIX, len(_HOT_PREFIX)

        async def dispatch(request: web.Request) -> web.StreamResponse:
            raw = request.rel_url.raw_path
            if request.method != "GET" or not raw.startswith(prefix) or "%" in raw or "{" in raw or "}" in raw:
                return await application(request)
            parts = raw[start:].split("/")
            if (len(parts) != 2 and (len(parts) != 3 or parts[2])) or not parts[0] or not parts[1] or (
                    hdrs.EXPECT in request.headers):
                return await application(request)
            return await served(request, parts[0], parts[1])

        return dispatch


_HOT_PREFIX = f"/apis/{GROUP_VERSION}/namespaces/"
"""What the raw path of the HPA's request starts with (`Serving.dispatch`)."""

DISPATCH_KEY: web.AppKey[Handler] = web.AppKey("dispatch", Handler)  # type: ignore[arg-type]
"""The app's request handler for its server (`serve_until_stopped`): `Serving.dispatch` ahead of the app."""


async def unmatched(request: web.Request) -> web.StreamResponse:
    """The catch-all route's handler: 405 where another route has the path with other methods, else 404."""
    allowed: set[str] = set()
    for resource in request.app.router.resources():
        if resource is not request.match_info.route.resource:  # the catch-all itself
            allowed |= (await resource.resolve(request))[1]
    if allowed:
        raise web.HTTPMethodNotAllowed(request.method, allowed)
    raise web.HTTPNotFound()


async def expectation(request: web.Request) -> web.StreamResponse | None:
    """Every route's `Expect` handler: aiohttp's, which meets `100-continue`, but a 417 `Status` for any other
    expectation, closing the connection as Go's server does. aiohttp's own 417 was text, without kube's headers:
    it answers from routing, before the route's handler (`Serving`) could make it a `Status`."""
    try:
        await _default_expect_handler(request)
    except web.HTTPExpectationFailed:
        return closing_status(417, f"Expect: {request.headers.get(hdrs.EXPECT, '')[:100]!r} cannot be met: "
                                   "this API meets only Expect: 100-continue")
    return None


async def _flush_tally(app: web.Application) -> AsyncIterator[None]:
    """Hands the request counts to their series every second while the app runs (`RequestTally`)."""
    flushing = asyncio.create_task(app[handlers.METRICS_KEY].tally.flush_every_second(), name="tally-flush")
    yield
    flushing.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await flushing


def _flushed(metrics: AdapterMetrics, page: Handler) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        metrics.tally.flush()
        return await page(request)

    return handler


def build_api_app(source: Refresher | SnapshotStore, metrics: AdapterMetrics, gate: Gate | None = None,
                  stalled_after_s: float | None = None) -> web.Application:
    """The API over the refresh's answers: an in-process `Refresher` (one process does everything), or a
    store that a serving worker fills with the snapshots the refresh process sends. `stalled_after_s`: answers
    not replaced for longer are refused and health fails (`autoscaler.api.stall`); None: never judged."""
    install_client_error_filter()  # malformed requests: one short WARNING per interval, not a traceback each
    app = web.Application()
    app.cleanup_ctx.append(_flush_tally)
    serving = Serving(metrics, gate)
    if isinstance(source, Refresher):
        app[SNAPSHOT_KEY] = snapshots = RefresherSnapshots(source)
        metrics.serve_live_series(lambda: snapshots.updated_at, stalled_after_s)
        metrics_handler = _flushed(metrics, make_aiohttp_handler(metrics.registry))
    else:
        app[SNAPSHOT_KEY] = source
        metrics_handler = _flushed(metrics, worker_metrics_handler(metrics, source, stalled_after_s))
    app[handlers.METRICS_KEY] = metrics
    stall = None
    if stalled_after_s is not None:
        stall = app[STALL_KEY] = StallWatch(app[SNAPSHOT_KEY], stalled_after_s, refresh=(
            "the refresh loop" if isinstance(source, Refresher) else "the refresh process"))
        app.cleanup_ctx.append(stall_context(stall))
    routes: list[tuple[str, Handler | PlainHandler]] = [  # JSON but for the health paths and `/metrics` (`TEXT_ROUTES`)
        ("/apis", handlers.api_group_list),
        ("/apis/external.metrics.k8s.io", handlers.api_group),
        (f"/apis/{GROUP_VERSION}", handlers.api_resource_list),
        (EXTERNAL_METRIC_ROUTE, handlers.external_metric_handler(app[SNAPSHOT_KEY], metrics, stall)),
        ("/version", handlers.version),
        ("/openapi/v2", openapi_v2),
        (runtimes.KEDA_ROUTE, runtimes.keda_runtime),
        (runtimes.DEBUG_ROUTE, runtimes.debug_runtime),
        *health_routes(stall),  # `/healthz`, `/livez`, `/readyz` and each check's `PATH/NAME`
        ("/metrics", metrics_handler),
    ]
    for path, handler in routes:
        wrapped = serving(handler, path, writes_json=not writes_text(path))
        app.router.add_get(path, wrapped, expect_handler=expectation)
        if path in SLASH_TOLERANT:
            app.router.add_get(path + "/", wrapped, expect_handler=expectation)
    app.router.add_route("*", CATCH_ALL_ROUTE, serving(unmatched, "unmatched"), name=CATCH_ALL_NAME,
                         expect_handler=expectation)
    app[DISPATCH_KEY] = serving.dispatch(handlers.external_metric_answerer(app[SNAPSHOT_KEY], metrics, stall),
                                         EXTERNAL_METRIC_ROUTE, app._handle)
    return app


def install_dispatch(app: web.Application, server: web.Server) -> None:
    """Serve the app's requests on `server` through its `DISPATCH_KEY` handler (`Serving.dispatch`), where it
    has one; aiohttp's `Server.request_handler` is the app's `_handle` until then."""
    if (dispatch := app.get(DISPATCH_KEY)) is not None:
        server.request_handler = cast(Callable[[web.BaseRequest], Awaitable[web.StreamResponse]], dispatch)


async def build_served_app(
    source: Refresher | SnapshotStore, metrics: AdapterMetrics, settings: ServeSettings, tls: ssl.SSLContext | None,
    connection: ReviewConnection | None = None,
) -> web.Application:
    """`build_api_app` as `serve` runs it, in one process or in each worker: behind authentication and
    authorization (their Kubernetes clients close with the app; `tls` learns the client CAs), or open with
    `--insecure-dev`. Start-up mistakes are `ValueError`s (`KubeConfigError`, `AuthConfigError`). A worker gets
    the Kubernetes connection its reviews need as `connection`, loaded by the refresh process.

    A serving certificate given as files is reloaded here, by every process that serves with `tls`: each worker
    of `--workers N` has its own `SSLContext`, and one that never reloaded it went on presenting the old
    certificate after cert-manager's renewal (and an expired one later: the APIService unavailable)."""
    if settings.insecure_dev:
        app = build_api_app(source, metrics, stalled_after_s=settings.stalled_after_s)
    else:
        from autoscaler.api.auth import build_api_security  # only secured serving needs the Kubernetes client

        security = await build_api_security(settings, tls, metrics, connection=connection)
        app = build_api_app(source, metrics, security.gate, settings.stalled_after_s)
        app.on_cleanup.append(security.close)
    if tls is not None and settings.tls_cert_file and settings.tls_private_key_file:
        app.cleanup_ctx.append(certificate_reload_context(tls, settings.tls_cert_file, settings.tls_private_key_file))
    app.on_startup.append(_frozen_start_up)
    return app


async def _frozen_start_up(app: web.Application) -> None:
    """Start-up is over when the app starts serving: what it left alive is frozen (`gcsettings.tune_for_serving`)."""
    tune_for_serving()
