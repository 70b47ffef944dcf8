"""Two JSON views of one runtime, made from what each refresh puts in the serving snapshot.

- `/keda/v1/namespaces/{ns}/runtimes/{deployment}`: for KEDA's `metrics-api` scaler, where KEDA owns the
  cluster's one external-metrics APIService. A flat object, so a `valueLocation` is just the metric name
  (`modelmesh_desired_replicas`); values are the numbers the external-metrics API serves (same smoothing,
  same milli-unit rounding), `null` for one that is unknown while the others are served, and the whole
  answer is a 503 `Status` while the runtime is unknown, as for the HPA. KEDA reads numbers or quantity
  strings; numbers keep the object usable by any other JSON consumer.
- `/debug/runtimes/{ns}/{deployment}`: every field of the `RuntimeView` (per-pod inputs, which signals are
  fresh on each pod, weights, need and deletion cost, each term's proposal and the winner, per-signal
  coverage, what is held and why, warnings such as a missing capacity signal), field names as in
  `autoscaler.model`, so the explanation never lags behind the model. Served even while the runtime is
  unknown: that is when it is most needed. Written as JSON only when asked (`autoscaler.api.debug_document`).
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from autoscaler.api.debug_document import SourceState, debug_json
from autoscaler.api.handlers import (
    METRICS_KEY,
    debug_path,
    respond,
    runtime_answer,
    runtime_debug_record,
    source_age,
    unknown_because,
)
from autoscaler.api.quantity import MAX_SERVABLE
from autoscaler.api.snapshot import KEDA, SNAPSHOT_KEY, Answer, error_answer, unknown_answer
from autoscaler.api.stall import STALL_KEY
from autoscaler.api.status import json_answer
from autoscaler.api.unserved import lasting_cause
from autoscaler.kube.timestamps import rfc3339
from autoscaler.model import RuntimeView
from autoscaler.names import ServedMetric, runtime_labels

KEDA_ROUTE = "/keda/v1/namespaces/{namespace}/runtimes/{deployment}"
DEBUG_ROUTE = "/debug/runtimes/{namespace}/{deployment}"


def keda_values(view: RuntimeView) -> tuple[dict[str, Any], float | None]:
    """The KEDA document for a known runtime, and the time of the oldest sample behind its values."""
    values: dict[str, Any] = {
        "namespace": view.key.namespace,
        "deployment": view.key.deployment,
        "labels": runtime_labels(view.key.deployment),
    }
    timestamps = []
    for metric in ServedMetric:
        served = view.values.get(metric)
        value = served.value if served is not None else None
        if value is None or not 0.0 <= value <= MAX_SERVABLE:  # `quantity`'s rule, inline (per runtime and metric)
            values[metric.value] = None
            continue
        values[metric.value] = round(value * 1000) / 1000  # exactly the quantity the HPA is served
        if served is not None and served.timestamp is not None:
            timestamps.append(served.timestamp)
    oldest = min(timestamps) if timestamps else None
    values["timestamp"] = rfc3339(oldest) if oldest is not None else None
    values["window"] = round(view.window_s)
    return values, oldest


def keda_answer(view: RuntimeView, source: SourceState | None = None) -> Answer:
    """The KEDA endpoint's answer for a runtime: its values, or the 503 while they are unknown (its lasting cause
    led by what `source` says fails, as the external metrics' 503 is: `handlers.metric_answers`)."""
    if not view.known:
        cause = lasting_cause(view, source=source)
        if cause is not None:
            now = "" if source is not None else f"{unknown_because(view)}; "
            return unknown_answer(view, f"values of runtime {view.key} are not served: {cause}; {now}"
                                        f"scalers should hold; why: {debug_path(view)}")
        return unknown_answer(view, f"values of runtime {view.key} are unknown right now: "
                                    f"{unknown_because(view)}; scalers should hold; why: {debug_path(view)}")
    document, oldest = keda_values(view)
    if oldest is None:
        return error_answer(503, f"no value of runtime {view.key} is known right now; scalers should hold")
    return 200, json.dumps(document).encode(), source_age(view, oldest)


async def keda_runtime(request: web.Request) -> web.Response:
    return respond(runtime_answer(request.app[SNAPSHOT_KEY], request.match_info["namespace"],
                                  request.match_info["deployment"], KEDA, request.app.get(STALL_KEY)),
                   request.app[METRICS_KEY], request.app[SNAPSHOT_KEY])


async def debug_runtime(request: web.Request) -> web.Response:
    record = runtime_debug_record(request, request.match_info["namespace"], request.match_info["deployment"])
    return json_answer(debug_json(record))
