"""Request handlers. They read the refresh loop's views and never do I/O of their own."""

from __future__ import annotations

import datetime
import functools
import json
from typing import Any

from aiohttp import web

from autoscaler.api import documents
from autoscaler.api.quantity import milli_quantity
from autoscaler.api.selector import SelectorError, deployment_from_selector
from autoscaler.api.status import ApiError
from autoscaler.model import RuntimeKey, RuntimeView
from autoscaler.names import GROUP_VERSION, ServedMetric, lookup_metric, runtime_labels
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics

REFRESHER_KEY: web.AppKey[Refresher] = web.AppKey("refresher", Refresher)
METRICS_KEY: web.AppKey[AdapterMetrics] = web.AppKey("metrics", AdapterMetrics)


def rfc3339(timestamp: float) -> str:
    return _rfc3339_seconds(int(timestamp))


@functools.lru_cache(maxsize=4096)
def _rfc3339_seconds(seconds: int) -> str:
    """Whole seconds, as metav1.Time serializes; cached because every runtime's values share a few stamps."""
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def runtime_view(request: web.Request, namespace: str, deployment: str) -> RuntimeView:
    refresher = request.app[REFRESHER_KEY]
    view = refresher.views.get(RuntimeKey(namespace, deployment))
    if view is not None:
        return view
    if not refresher.ready:
        raise ApiError(503, "the adapter has not completed its first refresh yet; try again shortly")
    raise ApiError(404, f"runtime {namespace}/{deployment} is not known to the adapter (no such Deployment "
                        "with ModelMesh pods, or not in its targets)")


def served_item(view: RuntimeView, metric: ServedMetric) -> tuple[dict[str, Any], float]:
    """One ExternalMetricValue and the age of the oldest sample behind it; 503 while it is unknown."""
    served = view.values.get(metric)
    if not view.known or served is None or served.value is None or served.timestamp is None:
        raise ApiError(503, f"{metric.value} for runtime {view.key} is unknown right now: "
                            f"{view.reason or 'no fresh data'}; the HPA holds its current replicas")
    item = {
        "metricName": metric.value,
        "metricLabels": runtime_labels(view.key.deployment),
        "timestamp": rfc3339(served.timestamp),
        "window": round(view.window_s),
        "value": milli_quantity(served.value),
    }
    return item, max(0.0, view.refreshed_at - served.timestamp)


class RenderedValues:
    """The serialized answer per runtime and metric, made again only when the refresh loop publishes a new
    view (views are immutable and replaced whole): an HPA request then costs a lookup, not a JSON encoding.
    Keys come only from served views, so the dict stays as small as the fleet; `limit` only bounds what
    runtimes that disappeared leave behind."""

    def __init__(self, limit: int = 4096) -> None:
        self._cache: dict[tuple[RuntimeKey, ServedMetric], tuple[RuntimeView, bytes, float]] = {}
        self._limit = limit

    def body(self, view: RuntimeView, metric: ServedMetric) -> tuple[bytes, float]:
        """(ExternalMetricValueList JSON, age of its oldest sample in seconds)."""
        key = (view.key, metric)
        entry = self._cache.get(key)
        if entry is not None and entry[0] is view:
            return entry[1], entry[2]
        item, age = served_item(view, metric)
        body = json.dumps({"kind": "ExternalMetricValueList", "apiVersion": GROUP_VERSION, "metadata": {},
                           "items": [item]}).encode()
        if len(self._cache) >= self._limit:
            self._cache.clear()
        self._cache[key] = (view, body, age)
        return body, age


RENDERED_KEY: web.AppKey[RenderedValues] = web.AppKey("rendered", RenderedValues)


async def external_metric(request: web.Request) -> web.Response:
    namespace, name = request.match_info["namespace"], request.match_info["metric"]
    metric = lookup_metric(name)
    if metric is None:
        raise ApiError(404, f"external metric {name!r} is not served; available: "
                            + ", ".join(m.value for m in ServedMetric))
    try:
        deployment = deployment_from_selector(request.query.get("labelSelector"))
    except SelectorError as error:
        raise ApiError(400, str(error)) from error
    body, age = request.app[RENDERED_KEY].body(runtime_view(request, namespace, deployment), metric)
    request.app[METRICS_KEY].freshness.observe(age)
    return web.Response(body=body, content_type="application/json", charset="utf-8")


async def api_group_list(request: web.Request) -> web.Response:
    return web.json_response(documents.api_group_list())


async def api_group(request: web.Request) -> web.Response:
    return web.json_response(documents.api_group())


async def api_resource_list(request: web.Request) -> web.Response:
    return web.json_response(documents.api_resource_list())


async def version(request: web.Request) -> web.Response:
    return web.json_response(documents.version_info())


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def readyz(request: web.Request) -> web.Response:
    if not request.app[REFRESHER_KEY].ready:
        raise ApiError(503, "waiting for the first refresh")
    return web.Response(text="ok")
