"""Assembles the adapter's HTTP API: routes, error rendering and request self-metrics.

Authentication and authorization plug in as a gate ahead of the handlers (see `autoscaler.api.auth`); the
`--insecure-dev` mode runs without it on loopback only. One middleware does all that surrounds a handler, in
this order: it times and counts every answer (by route, not raw path: bounded cardinality), turns every error
(the gate's 401/403/500 included) into a `Status`, and runs the gate before any handler. One middleware rather
than three: each is a coroutine layer on every request, and aiohttp adds one more of its own whenever there
are any (`bench/bench_request_cost.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from aiohttp.web_urldispatcher import AbstractResource
from prometheus_client import Counter, Histogram
from prometheus_client.aiohttp import make_aiohttp_handler

from autoscaler.api import handlers, runtimes
from autoscaler.api.client_errors import install_client_error_filter
from autoscaler.api.openapi import openapi_v2
from autoscaler.api.render import RefresherSnapshots
from autoscaler.api.selfmetrics_split import worker_metrics_handler
from autoscaler.api.snapshot import SNAPSHOT_KEY, SnapshotStore
from autoscaler.api.status import ApiError, status_response
from autoscaler.names import GROUP_VERSION
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.settings import ServeSettings

log = logging.getLogger(__name__)

EXTERNAL_METRIC_ROUTE = f"/apis/{GROUP_VERSION}/namespaces/{{namespace}}/{{metric}}"

Gate = Callable[[web.Request], Awaitable[None] | None]
"""Lets a request through (None, or an awaitable that completes), or refuses it with an `ApiError` (401, 403,
500) raised at once or by the awaitable. Most requests are decided at once: no coroutine to run."""


def error_response(request: web.Request, error: Exception) -> web.Response:
    """Every error leaves as a Kubernetes `Status`; internal detail goes to the log, not the client."""
    if isinstance(error, ApiError):
        return status_response(error.code, error.message)
    if isinstance(error, web.HTTPException):
        message = {404: f"the server could not find the requested resource {request.path!r}",
                   405: f"method {request.method} is not allowed on {request.path!r}"}.get(
            error.status, error.reason)
        return status_response(error.status, message)
    log.error("internal error serving %s %s", request.method, request.path, exc_info=error)
    return status_response(500, "internal error; see the adapter's log")


def serving_middleware(metrics: AdapterMetrics, gate: Gate | None) -> Middleware:
    """Gate, handler, errors as `Status`, and the request's count and latency (kept in the tally).

    Labelled children are looked up once per (route, code) and kept: `labels()` takes a lock and validates
    on every call, which costs as much as the rest of a cached request."""
    children: dict[tuple[AbstractResource | None, int], tuple[Counter, Histogram]] = {}
    tally = metrics.tally
    clock = time.perf_counter

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = clock()
        try:
            if gate is not None and (deciding := gate(request)) is not None:
                await deciding
            response = await handler(request)
        except web.HTTPException as error:
            if error.status < 400:
                raise
            response = error_response(request, error)
        except Exception as error:  # ApiError, and anything unexpected
            response = error_response(request, error)
        resource, status = request.match_info.route.resource, response.status  # None: no route matched
        series = children.get((resource, status))
        if series is None:
            path = resource.canonical if resource is not None else "unmatched"
            series = children[resource, status] = (metrics.requests.labels(path, str(status)),
                                                   metrics.request_seconds.labels(path))
        tally.count_and_observe(*series, clock() - started)
        return response

    return middleware


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


def build_api_app(source: Refresher | SnapshotStore, metrics: AdapterMetrics, gate: Gate | None = None
                  ) -> web.Application:
    """The API over the refresh's answers: an in-process `Refresher` (one process does everything), or a
    store that a serving worker fills with the snapshots the refresh process sends."""
    install_client_error_filter()  # malformed requests: one short WARNING per interval, not a traceback each
    app = web.Application(middlewares=[serving_middleware(metrics, gate)])
    app.cleanup_ctx.append(_flush_tally)
    if isinstance(source, Refresher):
        app[SNAPSHOT_KEY] = RefresherSnapshots(source)
        metrics_handler = _flushed(metrics, make_aiohttp_handler(metrics.registry))
    else:
        app[SNAPSHOT_KEY] = source
        metrics_handler = _flushed(metrics, worker_metrics_handler(metrics, source))
    app[handlers.METRICS_KEY] = metrics
    router = app.router
    router.add_get("/apis", handlers.api_group_list)
    router.add_get("/apis/external.metrics.k8s.io", handlers.api_group)
    router.add_get(f"/apis/{GROUP_VERSION}", handlers.api_resource_list)
    router.add_get(EXTERNAL_METRIC_ROUTE, handlers.external_metric_handler(app[SNAPSHOT_KEY], metrics))
    router.add_get("/version", handlers.version)
    router.add_get("/openapi/v2", openapi_v2)
    router.add_get(runtimes.KEDA_ROUTE, runtimes.keda_runtime)
    router.add_get(runtimes.DEBUG_ROUTE, runtimes.debug_runtime)
    router.add_get("/healthz", handlers.healthz)
    router.add_get("/livez", handlers.healthz)
    router.add_get("/readyz", handlers.readyz)
    router.add_get("/metrics", metrics_handler)
    return app


async def build_served_app(
    source: Refresher | SnapshotStore, metrics: AdapterMetrics, settings: ServeSettings, tls: ssl.SSLContext | None
) -> web.Application:
    """`build_api_app` as `serve` runs it, in one process or in each worker: behind authentication and
    authorization (their Kubernetes clients close with the app; `tls` learns the client CAs), or open with
    `--insecure-dev`. Start-up mistakes are `ValueError`s (`KubeConfigError`, `AuthConfigError`)."""
    if settings.insecure_dev:
        return build_api_app(source, metrics)
    from autoscaler.api.auth import build_api_security  # only secured serving needs the Kubernetes client

    security = await build_api_security(settings, tls, metrics)
    app = build_api_app(source, metrics, security.gate)
    app.on_cleanup.append(security.close)
    return app
