"""Two JSON views of one runtime, rendered once per refresh into the serving snapshot like every answer.

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
  unknown: that is when it is most needed.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import operator
from typing import Any, Final

from aiohttp import web

from autoscaler.api.handlers import respond, rfc3339, runtime_answers
from autoscaler.api.snapshot import Answer, error_answer
from autoscaler.model import PodView, RuntimeView, ServedValue
from autoscaler.names import ServedMetric, runtime_labels

KEDA_ROUTE = "/keda/v1/namespaces/{namespace}/runtimes/{deployment}"
DEBUG_ROUTE = "/debug/runtimes/{namespace}/{deployment}"


def jsonable(value: Any) -> Any:
    """Dataclasses, enums, mappings and sequences as JSON values; NaN and infinities as null."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, dict):
        return {str(jsonable(key)): jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


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
        if value is None or not math.isfinite(value) or value < 0:
            values[metric.value] = None
            continue
        values[metric.value] = round(value * 1000) / 1000  # exactly the quantity the HPA is served
        if served is not None and served.timestamp is not None:
            timestamps.append(served.timestamp)
    oldest = min(timestamps) if timestamps else None
    values["timestamp"] = rfc3339(oldest) if oldest is not None else None
    values["window"] = round(view.window_s)
    return values, oldest


def keda_answer(view: RuntimeView) -> Answer:
    """The KEDA endpoint's answer for a runtime: its values, or the 503 while they are unknown."""
    if not view.known:
        return error_answer(503, f"values of runtime {view.key} are unknown right now: "
                                 f"{view.reason or 'no fresh data'}; scalers should hold")
    document, oldest = keda_values(view)
    if oldest is None:
        return error_answer(503, f"no value of runtime {view.key} is known right now; scalers should hold")
    return 200, json.dumps(document).encode(), max(0.0, view.refreshed_at - oldest)


async def keda_runtime(request: web.Request) -> web.Response:
    answers = runtime_answers(request, request.match_info["namespace"], request.match_info["deployment"])
    return respond(request, answers.keda)


def explanation(view: RuntimeView) -> dict[str, Any]:
    """The /debug document: the view as JSON, each pod's signal states as an object
    (`{"gpu": "fresh", "requests": "missing", ...}`), with `held` (why a value or term may not fall) and
    `warnings` (a missing setting, such as no capacity signal) as the view carries them."""
    document: dict[str, Any] = jsonable(view)
    for pod, shown in zip(view.pods, document["pods"], strict=True):
        shown["signals"] = dict(pod.signals)
    document["key"] = {"namespace": view.key.namespace, "deployment": view.key.deployment}
    document["refreshed"] = rfc3339(view.refreshed_at)
    return document


_VIEW_FIELDS: Final = tuple(f.name for f in dataclasses.fields(RuntimeView))
_POD_FIELDS: Final = tuple(f.name for f in dataclasses.fields(PodView))
_pod_values = operator.attrgetter(*_POD_FIELDS)
_VALUE_FIELDS: Final = tuple(f.name for f in dataclasses.fields(ServedValue))
_value_values = operator.attrgetter(*_VALUE_FIELDS)
_STRICT: Final = json.JSONEncoder(allow_nan=False)  # `json.dumps(..., allow_nan=False)` would build one per call


def debug_body(view: RuntimeView) -> bytes:
    """`explanation(view)` as JSON bytes, made for every runtime on every refresh: fast.

    `jsonable` inspects every value (is it a dataclass? an enum? a non-finite float?), which at 10,000 pods
    costs the better part of a second per refresh. Most of a view is already what `json.dumps` writes the
    same way (strings, string-valued enums, numbers, tuples, dicts with string keys), so only the dataclasses
    inside it are turned into dicts here, and `allow_nan=False` stands guard for the floats: a non-finite
    number, or anything else `json.dumps` cannot write as `jsonable` would (a field added to the model that
    holds a dataclass, say), raises, and the view takes the generic path. Either way the bytes are the same.
    """
    try:
        return _STRICT.encode(_plain_explanation(view)).encode()
    except (TypeError, ValueError):
        return json.dumps(explanation(view)).encode()


def _plain_explanation(view: RuntimeView) -> dict[str, Any]:
    document = {name: getattr(view, name) for name in _VIEW_FIELDS}
    document["key"] = {"namespace": view.key.namespace, "deployment": view.key.deployment}
    document["values"] = {metric.value: dict(zip(_VALUE_FIELDS, _value_values(served), strict=True))
                          for metric, served in view.values.items()}
    pods = []
    for pod in view.pods:
        shown = dict(zip(_POD_FIELDS, _pod_values(pod), strict=True))
        shown["signals"] = dict(pod.signals)
        pods.append(shown)
    document["pods"] = pods
    document["refreshed"] = rfc3339(view.refreshed_at)
    return document


async def debug_runtime(request: web.Request) -> web.Response:
    answers = runtime_answers(request, request.match_info["namespace"], request.match_info["deployment"])
    return web.Response(body=answers.debug, content_type="application/json", charset="utf-8")
