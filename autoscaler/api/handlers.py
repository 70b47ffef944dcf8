"""Request handlers. They read the current `ServingSnapshot` and never do I/O or encode JSON of their own:
every runtime's answers were rendered when the refresh published them (`autoscaler.api.render`), all but
`/debug`'s, which `autoscaler.api.debug_document` writes from the snapshot's compact record when asked."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from json.encoder import encode_basestring_ascii as _json_str
from typing import Final

from aiohttp import hdrs, web
from multidict import CIMultiDict

from autoscaler.api import documents
from autoscaler.api.debug_document import SourceState
from autoscaler.api.list_options import BadListOption
from autoscaler.api.quantity import MAX_SERVABLE, milli_quantity
from autoscaler.api.selector import (
    CACHED_QUERY_LENGTH,
    SelectorError,
    SelectorSyntaxError,
    WatchAsked,
    cached_deployment_from_query,
    deployment_from_query,
)
from autoscaler.api.snapshot import (
    METRIC_INDEX,
    SNAPSHOT_KEY,
    Answer,
    ServingSnapshot,
    SnapshotStore,
    error_answer,
    unknown_answer,
)
from autoscaler.api.stall import StallWatch
from autoscaler.api.status import KUBE_HEADERS, ApiError, ApiResponse, json_answer
from autoscaler.api.unserved import lasting_cause
from autoscaler.kube.timestamps import rfc3339
from autoscaler.log_lists import few
from autoscaler.model import RuntimeView
from autoscaler.names import (
    API_GROUP,
    GROUP_VERSION,
    SERVINGRUNTIME_DEPLOYMENT_PREFIX,
    ServedMetric,
    lookup_metric,
    runtime_labels,
)
from autoscaler.selfmetrics import AdapterMetrics
from exporter.log_limit import LogLimiter

METRICS_KEY: web.AppKey[AdapterMetrics] = web.AppKey("metrics", AdapterMetrics)


def metric_answer(view: RuntimeView, metric: ServedMetric, source: SourceState | None = None) -> Answer:
    """The ExternalMetricValueList of one runtime and metric, or the 503 while it is unknown."""
    return metric_answers(view, (metric,), source)[0]


def metric_answers(view: RuntimeView, metrics: tuple[ServedMetric, ...],
                   source: SourceState | None = None) -> tuple[Answer, ...]:
    """`metric_answer` for each of `metrics`, the runtime's labels encoded once for all of them (not at all
    while it is unknown: every answer is then the 503). `source`: the refresh's source and what fails now for
    the runtime, which a 503's lasting cause leads with (`unserved.lasting_cause`)."""
    labels = json.dumps(runtime_labels(view.key.deployment)) if view.known else ""
    return tuple(_metric_answer(view, metric, labels, source) for metric in metrics)


_ITEM_HEAD: Final = {
    metric: (
        '{"kind": "ExternalMetricValueList", "apiVersion": ' + json.dumps(GROUP_VERSION)
        + ', "metadata": {}, "items": [{"metricName": ' + json.dumps(metric.value) + ', "metricLabels": '
    )
    for metric in ServedMetric
}
"""Each metric's answer up to its labels: the constant head of `json.dumps` of the document (default
separators, keys in the order below), so that a refresh fills in only what varies."""


_HELD: Final = "; values unknown (503), HPA holds"
"""How the decision's reasons (`autoscaler.policies`) end; this answer says it in its own words instead."""

def debug_path(view: RuntimeView) -> str:
    """Where the runtime's /debug is: a 503's message ends with it, since /debug says which pods lack what and
    what the metric source's error is (`autoscaler.api.debug_document`). On the adapter's own port: the
    aggregator forwards only the external metrics API, so `kubectl get --raw /debug/...` through it is a 404."""
    return f"/debug/runtimes/{view.key.namespace}/{view.key.deployment} on an adapter pod"


def unknown_because(view: RuntimeView) -> str:
    """The view's reason for a 503's message, without the decision's own ending (`_HELD`)."""
    return view.reason.removesuffix(_HELD) or "no fresh data"


def _metric_answer(view: RuntimeView, metric: ServedMetric, labels: str, source: SourceState | None = None) -> Answer:
    """The answer as `json.dumps` of

        {"kind": "ExternalMetricValueList", "apiVersion": GROUP_VERSION, "metadata": {},
         "items": [{"metricName": ..., "metricLabels": ..., "timestamp": ..., "window": ..., "value": ...}]}

    would encode it, byte for byte, written from a template: at 5,000 runtimes x 4 metrics, encoding the
    whole document each time was most of the rendering of the metric answers. Every variable part still goes
    through `json.dumps`, so escaping is its own (`labels`: the runtime's labels, already encoded);
    tests/api/test_metric_template.py checks the equality on random views. A value the HPA would read back as
    another number (`autoscaler.api.quantity`) is unknown: a 503, as KEDA's document has `null` for it."""
    served = view.values.get(metric)
    if not view.known or served is None or (value := served.value) is None or served.timestamp is None:
        cause = lasting_cause(view, metric, source)
        if cause is not None:
            # Unknown with a lasting cause is no pod ever read: the view's reason (warming up, coverage, each
            # pod's missing load) only says it again, at length, where the source is known to say why
            now = "" if view.known or source is not None else f"; {unknown_because(view)}"
            return unknown_answer(view, f"{metric.value} for runtime {view.key} is not served: {cause}{now}; "
                                        f"the HPA holds its current replicas; why: {debug_path(view)}")
        return unknown_answer(view, f"{metric.value} for runtime {view.key} is unknown right now: "
                                    f"{unknown_because(view)}; the HPA holds its current replicas; why: "
                                    f"{debug_path(view)}")
    if not 0.0 <= value <= MAX_SERVABLE:  # `quantity`'s rule, inline: this runs for every runtime and metric
        return error_answer(503, f"{metric.value} for runtime {view.key} is {value!r}, which the HPA cannot "
                                 "read as a quantity (see /debug); the HPA holds its current replicas")
    body = (  # _json_str: what json.dumps does with a str (ensure_ascii), without its per-call set-up
        f'{_ITEM_HEAD[metric]}{labels}, "timestamp": {_json_str(rfc3339(served.timestamp))}, '
        f'"window": {round(view.window_s)!r}, "value": {_json_str(milli_quantity(value))}}}]}}'
    ).encode()
    return 200, body, source_age(view, served.timestamp)


def source_age(view: RuntimeView, timestamp: float) -> float:
    """The age at the refresh of what a 200 serves, as `modelmesh_autoscaler_metric_freshness_seconds` counts it:
    that of the oldest fresh sample (`RuntimeView.fresh_sample_at`), not the `timestamp`, which a stale Ready
    pod's last sample dates back. The histogram says how far the source lags, for the whole adapter; one dead
    exporter has alerts of its own, and pinned at its age the histogram would fire the adapter-wide one."""
    sampled_at = view.fresh_sample_at
    return max(0.0, view.refreshed_at - (timestamp if sampled_at is None else sampled_at))


def runtime_answer(store: SnapshotStore, namespace: str, deployment: str, which: int,
                   stall: StallWatch | None = None) -> Answer:
    """The runtime's answer `which` (`METRIC_INDEX[metric]` or `KEDA`) from the current snapshot, only that one;
    a 503 for every runtime while the refresh has stopped delivering (`autoscaler.api.stall`)."""
    if stall is not None:
        stall.refuse_if_stalled()
    snapshot = store.current
    answer = snapshot.runtimes.answer((namespace, deployment), which)
    if answer is None:
        raise _not_found(snapshot, namespace, deployment)
    return answer


def runtime_debug_record(request: web.Request, namespace: str, deployment: str) -> bytes:
    """What the runtime's /debug is written from (`autoscaler.api.debug_document`)."""
    snapshot = request.app[SNAPSHOT_KEY].current
    record = snapshot.runtimes.debug_record((namespace, deployment))
    if record is None:
        raise _not_found(snapshot, namespace, deployment)
    return record


_NAMESPACES_NAMED: Final = 3
"""How many other namespaces holding a runtime of the asked name a 404 names."""
log = logging.getLogger(__name__)
_ELSEWHERE_LOG = LogLimiter(interval_s=600.0)
"""The "known in other namespaces" line of a 404: at most one per runtime name every 10 minutes, however often a
misconfigured HPA asks, and in however many namespaces (one line per asked namespace let a reader allowed
everywhere write a line per namespace name it made up)."""


def _not_found(snapshot: ServingSnapshot, namespace: str, deployment: str) -> ApiError:
    if not snapshot.ready:
        return ApiError(503, "the adapter has not completed its first refresh yet; try again shortly")
    doubled = SERVINGRUNTIME_DEPLOYMENT_PREFIX * 2
    hint = (f"; servingruntime= takes the ServingRuntime's name: servingruntime={deployment.removeprefix(doubled)}"
            if deployment.startswith(doubled) else "")
    if not snapshot.runtimes:
        hint += ("; the adapter knows no runtime at all: does its discovery find any (Deployments labelled "
                 "modelmesh-service in the namespaces it watches, its RBAC to list them and their pods, or its "
                 "--targets file)? Its log names the runtimes it adds ('Kubernetes discovery: N runtimes added') and "
                 "any error reading them")
    elsewhere = sorted(ns for ns, name in snapshot.runtimes if name == deployment)  # a 404 only: rare, and gated
    if elsewhere:
        # Said in the log, not to the client: a user allowed in one namespace must not learn whether others run
        # a runtime of a name they guess (kube-apiserver's 404 names nothing either).
        shown = few(elsewhere, _NAMESPACES_NAMED)
        left_out = _ELSEWHERE_LOG.admit(deployment)
        if left_out is not None:
            log.info("404 for runtime %r in namespace %r: the adapter knows %r in namespace%s %s%s", deployment,
                     namespace, deployment, "s" if len(elsewhere) > 1 else "", shown, _ELSEWHERE_LOG.note(left_out))
    return ApiError(404, f"runtime {namespace}/{deployment} is not known to the adapter (no Deployment of that "
                         "name with ModelMesh pods in a namespace it watches, --namespaces, nor in its --targets "
                         f"file){hint}")


def respond(answer: Answer, metrics: AdapterMetrics, store: SnapshotStore) -> web.Response:
    """A pre-rendered answer; the freshness of what a 200 serves is observed as it is served: the values' age at
    the refresh that decided them plus the time since that refresh reached this process (`served_age`)."""
    status, body, age = answer
    if age is not None:
        if age >= 0.0:
            metrics.tally.observe(metrics.freshness, served_age(age, store))
        else:  # SCALED_TO_ZERO_AGE: a 503 with nothing wrong
            metrics.tally.count(metrics.scaled_to_zero_answers)
    return ApiResponse(body=body, status=status, headers=_METRIC_HEADERS)


def served_age(age: float, store: SnapshotStore) -> float:
    """An answer's age now: its age at the refresh (`Answer`) plus the time since the snapshot holding it reached
    the serving process (`SnapshotStore.updated_at`). What the HPA acts on keeps ageing until the next refresh
    replaces it, so late in an interval, or while refreshes stall, it is that much older."""
    updated_at = store.updated_at
    return age if updated_at is None else age + (time.monotonic() - updated_at)


_WHICH: Final = {metric.value: METRIC_INDEX[metric] for metric in ServedMetric}
"""Each served metric's answer index by its exact name, the HPA's (which lower-cases names); any other case
goes through `lookup_metric`."""

_METRIC_HEADERS: Final = CIMultiDict({hdrs.CONTENT_TYPE: "application/json; charset=utf-8", **KUBE_HEADERS})
"""A metric answer's headers, built once: aiohttp copies them into each response (in C) where `content_type`
and `charset` would be joined and set on every request."""


MetricHandler = Callable[[web.Request, str, str], web.Response]
"""The external metric's handler, given the path's namespace and metric name (`external_metric_answerer`)."""


def external_metric_handler(store: SnapshotStore, metrics: AdapterMetrics, stall: StallWatch | None = None
                            ) -> Callable[[web.Request], web.Response]:
    """`external_metric_answerer` as a route's handler: the namespace and metric from the route's match."""
    answer = external_metric_answerer(store, metrics, stall)

    def external_metric(request: web.Request) -> web.Response:
        match = request.match_info
        return answer(request, match["namespace"], match["metric"])

    return external_metric


def external_metric_answerer(store: SnapshotStore, metrics: AdapterMetrics, stall: StallWatch | None = None
                             ) -> MetricHandler:
    """`GET .../namespaces/NS/METRIC?labelSelector=...`, bound to the snapshots and self-metrics it uses: it is the
    HPA's every request, and reading them from `request.app` costs two lookups through aiohttp's properties.
    Given the namespace and metric name (`app.Serving.dispatch` reads them off the raw path, without routing).

    A plain function, not a coroutine: it never waits, and `app.Serving` calls it without a coroutine layer.
    `runtime_answer` and `respond` inline, for the same reason (each Python call is a few hundred
    instructions of a request that costs about 300,000 in all: `bench/bench_request_cost.py`)."""
    tally, freshness, scaled_to_zero = metrics.tally, metrics.freshness, metrics.scaled_to_zero_answers
    monotonic = time.monotonic

    def external_metric(request: web.Request, namespace: str, name: str) -> web.Response:
        which = _WHICH.get(name)
        if which is None and (metric := lookup_metric(name)) is not None:
            which = METRIC_INDEX[metric]
        # The query is read before the name is judged: kube-apiserver decodes the list options (400 where it
        # cannot, 405 for a watch) before the provider looks for the metric, then at what the selector selects
        query = request.rel_url.raw_query_string
        try:
            deployment = (cached_deployment_from_query(query) if len(query) <= CACHED_QUERY_LENGTH  # inline
                          else deployment_from_query(query))
        except WatchAsked:
            raise ApiError(405, f'watch is not supported on resources of kind "{name}.{API_GROUP}"') from None
        except (SelectorSyntaxError, BadListOption) as error:
            raise ApiError(400, str(error)) from error
        except SelectorError as error:
            if which is None:
                raise _metric_not_served(name) from None
            raise ApiError(400, str(error)) from error
        if which is None:
            raise _metric_not_served(name)
        if stall is not None and stall.suspect:  # the exact test only near or past the limit (`StallWatch`)
            stall.refuse_if_stalled()
        snapshot = store.current
        answer = snapshot.runtimes.answer((namespace, deployment), which)
        if answer is None:
            raise _not_found(snapshot, namespace, deployment)
        status, body, age = answer
        if age is not None:
            if age >= 0.0:  # `served_age`, inline
                updated_at = store.updated_at
                tally.observe(freshness, age if updated_at is None else age + (monotonic() - updated_at))
            else:  # SCALED_TO_ZERO_AGE, as in `respond`
                tally.count(scaled_to_zero)
        return ApiResponse(body=body, status=status, headers=_METRIC_HEADERS)

    return external_metric


def _metric_not_served(name: str) -> ApiError:
    """The 404 for a metric name the adapter does not serve, naming those it serves."""
    return ApiError(404, f"external metric {name!r} is not served; available: "
                         + ", ".join(m.value for m in ServedMetric))


async def api_group_list(request: web.Request) -> web.Response:
    return json_answer(json.dumps(documents.api_group_list()).encode())


async def api_group(request: web.Request) -> web.Response:
    return json_answer(json.dumps(documents.api_group()).encode())


async def api_resource_list(request: web.Request) -> web.Response:
    return json_answer(json.dumps(documents.api_resource_list()).encode())


async def version(request: web.Request) -> web.Response:
    return json_answer(json.dumps(documents.version_info()).encode())


