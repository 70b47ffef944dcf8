"""The `/debug` document of a runtime: carried in the snapshot as compact data, written as JSON only when asked.

The document holds every field of the `RuntimeView`, every pod included: rendering it as JSON was most of the
rendering (230 to 400 ms of each 5,000-runtime refresh) and a third of the 17 MiB snapshot, for an endpoint a
person opens now and then. So the refresh keeps only the view's fields as plain values (`debug_record`: tuples,
dicts, strings, numbers, packed with `marshal`, about 12 µs a runtime), and the serving worker writes the JSON
of the one runtime asked (`debug_json`). The bytes served are those of `json.dumps(explanation(view))` whichever
way they are made (tests/api/test_debug_body.py checks that on random views).

A view whose fields are not all plain values (an enum or a dataclass where the model has plain values today, a
field added later) cannot go through `marshal`; its record then holds the finished JSON instead, so the
answer is the same, only made in the refresh process. A record comes only from our own refresh process (same
code version, the packed snapshot's header checks the layout), never from outside.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import marshal
import math
import operator
from typing import Any, Final

from autoscaler.kube.timestamps import rfc3339
from autoscaler.model import POD_FIELDS, PodUrls, PodViews, RuntimeView, ServedValue
from autoscaler.policies.policy_origins import PolicyExplained, policy_document, unknown_annotations
from autoscaler.source_problems import SourceProblem

_VIEW_FIELDS: Final = tuple(f.name for f in dataclasses.fields(RuntimeView))
_view_values = operator.attrgetter(*_VIEW_FIELDS)
_KEY, _VALUES, _PODS, _REFRESHED, _BOUNDS = (
    _VIEW_FIELDS.index(name) for name in ("key", "values", "pods", "refreshed_at", "bounds"))
_NAME, _READY, _SIGNALS = POD_FIELDS.index("name"), POD_FIELDS.index("ready"), POD_FIELDS.index("signals")
_VALUE_FIELDS: Final = tuple(f.name for f in dataclasses.fields(ServedValue))
_value_values = operator.attrgetter(*_VALUE_FIELDS)
_STRICT: Final = json.JSONEncoder(allow_nan=False)  # `json.dumps(..., allow_nan=False)` would build one per call
_PLAIN, _JSON = b"M", b"J"  # what follows the first byte of a record: marshalled fields, or the JSON itself


def jsonable(value: Any) -> Any:
    """Dataclasses, enums, mappings and sequences as JSON values; NaN and infinities as null."""
    if isinstance(value, PodViews):  # (a dataclass of rows, shown as its pods)
        return [jsonable(pod) for pod in value]
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


SourceState = tuple[str, tuple[SourceProblem, ...]]
"""The metric source's name and what fails now for one runtime (`sources.base.source_problems`)."""

_PlainSource = tuple[str | None, tuple[tuple[str, str, float, str | None], ...]]

def _plain_source(source: SourceState | None) -> _PlainSource:
    if source is None:
        return None, ()
    name, problems = source
    return name, tuple((p.reason, p.detail, p.since, p.pod) for p in problems)


def _source_document(plain: _PlainSource) -> dict[str, Any]:
    """`source`: its name, and each problem (`reason`, `detail`, `since` as RFC 3339, `pod` or null)."""
    name, problems = plain
    return {"name": name, "problems": [{"reason": reason, "detail": detail, "since": rfc3339(since), "pod": pod}
                                       for reason, detail, since, pod in problems]}


_HPA_FILLED: Final = "the HPA's {} (the config leaves it unset)"


def _policy_with_bounds(policy: PolicyExplained | None, bounds: tuple[int, int | None]) -> dict[str, Any] | None:
    """`policy_document`, with the replica bounds the HPA filled in (`policy.with_hpa_bounds`) shown as the HPA's:
    the policy explained is the config's, before the HPA's bounds, so a bound it leaves unset read as "null,
    built-in" beside the view's `bounds` that the HPA set."""
    document = policy_document(policy)
    if document is None:
        return None
    low, high = bounds
    if document["min_replicas"]["value"] is None and low != 1:  # 1: the floor without a bound (`lower_bound`)
        document["min_replicas"] = {"value": low, "from": _HPA_FILLED.format("minReplicas")}
    if document["max_replicas"]["value"] is None and high is not None:
        document["max_replicas"] = {"value": high, "from": _HPA_FILLED.format("maxReplicas")}
    return document


def explanation(view: RuntimeView, policy: PolicyExplained | None = None,
                source: SourceState | None = None, urls: PodUrls | None = None) -> dict[str, Any]:
    """The /debug document: the view as JSON, each pod's signal states as an object
    (`{"gpu": "fresh", "requests": "missing", ...}`), with `held` (why a value or term may not fall) and
    `warnings` (a missing setting, such as no capacity signal) as the view carries them, `policy`: each
    policy key's value and where it came from (`PolicyBook.explain`), `unknown_annotations`: those under our
    prefix that name no policy key (a list of its own: `policy` holds only `{value, from}` objects), and
    `source`: the metric source's name and what fails now (the backend's error and since when; per pod for the
    scrape source), so that a 503 that says "metric source down" can be traced here without the log line of
    the outage's start. With `urls` (the scrape source's), each pod's `scrape_url` too: the scheme each exporter
    is scraped over is chosen per pod (`--exporter-scheme auto`), and an operator rolling sidecars to TLS checks
    it on healthy pods, whose URL no problem names; null for a pod not scraped, or one the source no longer lists.
    Each pod's `counted` (whether `ready_pods` and the values count it as a Ready pod) and `reason` (why, where
    that is not what its readiness says: `RuntimeView.pods_counted`; empty otherwise), in place of the view's
    `pods_counted`: mid-rollout `ready_pods` read 4 beside 7 pods all `ready`, and no pod said which were left out."""
    document: dict[str, Any] = jsonable(view)
    on_pods = document.pop("costs_on_pods")
    otherwise = view.pods_counted
    document.pop("pods_counted")
    for pod, shown in zip(view.pods, document["pods"], strict=True):
        shown["signals"] = dict(pod.signals)
        shown["deletion_cost_on_pod"] = on_pods.get(pod.name)
        shown["counted"], shown["reason"] = otherwise.get(pod.name) or (pod.ready, "")
        if urls is not None:
            shown["scrape_url"] = urls.get(pod.name)
    document["key"] = {"namespace": view.key.namespace, "deployment": view.key.deployment}
    document["refreshed"] = rfc3339(view.refreshed_at)
    document["policy"] = _policy_with_bounds(policy, view.bounds)
    document["unknown_annotations"] = unknown_annotations(policy)
    document["source"] = _source_document(_plain_source(source))
    return document


def debug_record(view: RuntimeView, policy: PolicyExplained | None = None, source: SourceState | None = None,
                 urls: PodUrls | None = None) -> bytes:
    """What the snapshot carries for the runtime's /debug: its fields as plain values, made every refresh."""
    fields = list(_view_values(view))
    fields[_KEY] = (view.key.namespace, view.key.deployment)
    fields[_VALUES] = tuple((metric.value, *_value_values(served)) for metric, served in view.values.items())
    fields[_PODS] = view.pods.rows  # plain values already (`PodViews`)
    fields.append(policy)  # plain values (or None), one tuple per runtime made when its policy changes
    fields.append(_plain_source(source))
    fields.append(urls)  # plain values (or None): the source's dict, as it is
    try:
        return _PLAIN + marshal.dumps(tuple(fields))
    except ValueError:  # not plain data: write the JSON now
        return _JSON + json.dumps(explanation(view, policy, source, urls)).encode()


def debug_json(record: bytes) -> bytes:
    """The /debug answer, `json.dumps(explanation(view))`, from the view's `debug_record`."""
    if record[:1] == _JSON:
        return record[1:]
    document = _document(marshal.loads(record[1:]))
    try:
        return _STRICT.encode(document).encode()
    except (TypeError, ValueError):  # a NaN or an infinity (shown as null), a set (shown as a list)
        return json.dumps(jsonable(document)).encode()


def _document(record: tuple[Any, ...]) -> dict[str, Any]:
    """`explanation`'s document from the plain fields (the view's, the policy's, the source's, the pods' URLs),
    keys in the same order."""
    fields, policy, source, urls = record[:-3], record[-3], record[-2], record[-1]
    document = dict(zip(_VIEW_FIELDS, fields, strict=True))
    namespace, deployment = fields[_KEY]
    document["key"] = {"namespace": namespace, "deployment": deployment}
    document["values"] = {name: dict(zip(_VALUE_FIELDS, served, strict=True)) for name, *served in fields[_VALUES]}
    on_pods = document.pop("costs_on_pods")
    otherwise = document.pop("pods_counted")
    pods = []
    for pod in fields[_PODS]:
        shown = dict(zip(POD_FIELDS, pod, strict=True))
        shown["signals"] = dict(pod[_SIGNALS])
        shown["deletion_cost_on_pod"] = on_pods.get(pod[_NAME])
        shown["counted"], shown["reason"] = otherwise.get(pod[_NAME]) or (pod[_READY], "")
        if urls is not None:
            shown["scrape_url"] = urls.get(pod[_NAME])
        pods.append(shown)
    document["pods"] = pods
    document["refreshed"] = rfc3339(fields[_REFRESHED])
    document["policy"] = _policy_with_bounds(policy, fields[_BOUNDS])
    document["unknown_annotations"] = unknown_annotations(policy)
    document["source"] = _source_document(source)
    return document

