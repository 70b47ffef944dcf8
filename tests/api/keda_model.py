"""KEDA's `metrics-api` scaler, its scale loop and its fallback, and the HPA it makes, written down in Python
from their sources, so that tests can follow what a cluster running KEDA does with the adapter's answers.

Read from kedacore/keda at commit 8b4f083ca8c8c2baf8477e322bd4d16ac4dfa09a (v2.20.1-117):

- `pkg/scalers/metrics_api_scaler.go`: `getMetricValueFromURL` (any status but 200 is an error, "api returned
  <code>"; the body is not read), `getValueFromJSONResponse` (GJSON at `valueLocation`: a Number is used, a
  String is parsed as a Quantity, anything else, `null` included, is an error), `GetMetricsAndActivity`
  (active when the value is above `activationTargetValue`, default 0);
- `pkg/scalers/scaler.go`: `GenerateMetricInMili` / `quantityFromFloat64` (`%.3f`: milli-units), and
  `GetMetricTargetMili` (the HPA's target from `targetValue`);
- `pkg/scalers/authentication/authentication_types.go`: the parameter names `authModes;authMode` and
  `bearerToken;token`;
- `pkg/scaling/executor/scale_scaledobjects.go`: `RequestScale` (what KEDA itself writes to the target) and
  `updateScaleOnScaleTarget` (a GET of the target's `scale` subresource, then a PUT of that Scale with the
  replicas changed: its `resourceVersion` makes the write conditional);
- `pkg/scaling/resolver/scale_resolvers.go`: `GetCurrentReplicas` (for a custom resource: its `spec.replicas`
  when it has one, else the `scale` subresource; an error there ends `RequestScale` before any write,
  "ErrorGettingCurrentReplicas");
- `controllers/keda/scaledobject_controller.go`: `checkTargetResourceIsScalable` (a GET of the `scale`
  subresource; on an error the ScaledObject reads `Ready False`, reason `ScaledObjectCheckFailed`, and neither
  the HPA nor the scale loop is started: the reconcile is retried with controller-runtime's backoff);
- `pkg/fallback/fallback.go`: `GetMetricsWithFallback` / `doFallback` (what the HPA is fed after
  `failureThreshold` failures, per `behavior`).

The API server answers a GET of the `scale` subresource of a custom resource whose `spec.replicas` is unset with
500 "the spec replicas field ".spec.replicas" does not exist" (kubernetes/kubernetes `apiextensions-apiserver`
`pkg/registry/customresource/etcd.go`, `ScaleREST.Get`), so `current` below is None, never 0, for a RuntimeScale
the adapter has not adopted yet: KEDA writes nothing to it.

The HPA's external `AverageValue` rule is kubernetes/kubernetes `pkg/controller/podautoscaler/
replica_calculator.go` (`GetExternalPerPodMetricReplicas`, commit 00067268967ec95a40035bd666374a1caf48dd1a),
with the tolerance as `Tolerances.isWithin` applies it from Kubernetes 1.33 (`1 - 0.1 <= ratio <= 1 + 0.1`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

KEDA_COMMIT = "8b4f083ca8c8c2baf8477e322bd4d16ac4dfa09a"
TOLERANCE = 0.1
# GJSON path syntax beyond a plain key (wildcards, modifiers, queries, escapes): not modelled here.
_GJSON_SPECIAL = re.compile(r"[*?|#@\\!=<>%]")
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_SUFFIX = {None: Decimal(1), "m": Decimal("0.001"), "k": Decimal(10) ** 3, "M": Decimal(10) ** 6,
           "G": Decimal(10) ** 9, "T": Decimal(10) ** 12, "P": Decimal(10) ** 15, "E": Decimal(10) ** 18,
           "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30, "Ti": Decimal(2) ** 40,
           "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60}
# authentication_types.go: `Config.Modes` and `Config.BearerToken`, by every name KEDA accepts.
AUTH_MODE_NAMES = ("authModes", "authMode")
BEARER_TOKEN_NAMES = ("bearerToken", "token")


class ScalerError(Exception):
    """What `GetMetricsAndActivity` returns as its error: KEDA counts it as a failing trigger."""


def read_value(status: int, body: bytes, value_location: str) -> float:
    """`getMetricValueFromURL` then `getValueFromJSONResponse` (format json) for a plain-key `valueLocation`."""
    if status != 200:
        raise ScalerError(f"api returned {status}")
    if _GJSON_SPECIAL.search(value_location):
        raise NotImplementedError(f"GJSON path {value_location!r}: only plain keys are modelled")
    found: Any = json.loads(body)
    for key in value_location.split("."):
        found = found.get(key) if isinstance(found, dict) else None
    if isinstance(found, str):
        return _parse_quantity(found, value_location)
    if isinstance(found, bool) or not isinstance(found, int | float):  # GJSON: True/False/Null/JSON types
        kind = "Null" if found is None else type(found).__name__
        raise ScalerError(f"valueLocation {value_location!r} must point to a numeric value or a string "
                          f"parseable as a Quantity, got {kind}")
    return float(found)


def _parse_quantity(text: str, value_location: str) -> float:
    match = _QUANTITY.match(text)
    if match is None:
        raise ScalerError(f"valueLocation {value_location!r} points to a string that is not parseable as a Quantity")
    return float(Decimal(match.group(1)) * _SUFFIX[match.group(2)])


def milli(value: float) -> int:
    """`quantityFromFloat64`: `%.3f`, so the HPA reads milli-units; NaN, infinite and negative read 0."""
    if math.isnan(value) or math.isinf(value) or value < 0:
        return 0
    return int(Decimal(f"{value:.3f}") * 1000)


def hpa_average_value_replicas(usage_milli: int, target_milli: int, status_replicas: int) -> int:
    """`GetExternalPerPodMetricReplicas`: the HPA's proposal for an external `AverageValue` metric."""
    if status_replicas > 0:
        ratio = usage_milli / (target_milli * status_replicas)
        if 1 - TOLERANCE <= ratio <= 1 + TOLERANCE:
            return status_replicas
    return math.ceil(usage_milli / target_milli)


@dataclass
class ScaledObjectModel:
    """The fields of a ScaledObject (and its one metrics-api trigger) that decide what KEDA does."""

    min_replicas: int
    max_replicas: int
    metric_type: str
    target_value: float
    activation: float
    value_location: str
    fallback: dict[str, Any] | None
    failures: int = field(default=0)

    @classmethod
    def from_manifest(cls, scaled: dict[str, Any]) -> ScaledObjectModel:
        spec = scaled["spec"]
        [trigger] = spec["triggers"]
        metadata = trigger["metadata"]
        return cls(min_replicas=int(spec.get("minReplicaCount", 0)),
                   max_replicas=int(spec.get("maxReplicaCount", 100)),
                   metric_type=trigger.get("metricType", "AverageValue"),
                   target_value=float(metadata["targetValue"]),
                   activation=float(metadata.get("activationTargetValue", 0)),
                   value_location=metadata["valueLocation"],
                   fallback=spec.get("fallback"))

    def poll(self, status: int, body: bytes, replicas: int) -> int:
        """One polling interval and one HPA sync: the RuntimeScale's replicas afterwards.

        KEDA's scale loop (`RequestScale`) acts on activity and errors; the HPA it made acts on the metric,
        the fallback metric, or holds on an error (FailedGetExternalMetric). `replicas` is the target's
        `spec.replicas` (`GetCurrentReplicas` for a custom resource) and, for the HPA, its status.replicas.
        """
        value = self.trigger_value(status, body)
        written = self.request_scale(value, replicas)  # what KEDA writes itself
        if written is not None:
            return written
        if replicas == 0:
            return 0  # the HPA does not scale a target at zero
        # The HPA, fed by KEDA's metrics server (GetMetricsWithFallback).
        usage = self._metric(value, replicas)
        if usage is None:
            return replicas  # FailedGetExternalMetric: the HPA holds
        if self.metric_type != "AverageValue":
            raise NotImplementedError("only AverageValue targets are modelled")
        proposal = hpa_average_value_replicas(usage, milli(self.target_value), replicas)
        return min(max(proposal, max(self.min_replicas, 1)), self.max_replicas)

    def trigger_value(self, status: int, body: bytes) -> float | None:
        """The trigger's value from one answer of the endpoint; None when KEDA counts the trigger as failing."""
        try:
            return read_value(status, body, self.value_location)
        except ScalerError:
            return None

    def request_scale(self, value: float | None, current: int | None) -> int | None:
        """`RequestScale` (no idle replicas, cooldown over): the replicas KEDA writes to the target itself, or
        None when it writes nothing. `value`: the trigger's (None: failing); `current`: `GetCurrentReplicas`
        (None: it failed, as it does for a RuntimeScale without `spec.replicas`: the scale GET is a 500)."""
        if current is None:
            return None  # ErrorGettingCurrentReplicas: nothing below runs
        if value is not None and value > self.activation:
            return max(self.min_replicas, 1) if current == 0 else None  # scaleFromZeroOrIdle, else the HPA's
        if value is None and self.fallback is None:
            return None  # TriggerError: "Triggers defined in ScaledObject are not working correctly"
        if value is None and self.fallback is not None and int(self.fallback.get("replicas", 0)) != 0:
            return None  # the fallback takes over after failureThreshold, through the HPA
        if current > 0 and self.min_replicas == 0:
            return 0  # scaleToZeroOrIdle (after cooldownPeriod)
        if current < self.min_replicas:
            return self.min_replicas
        return None

    def _metric(self, value: float | None, replicas: int) -> int | None:
        if value is not None:
            self.failures = 0
            return milli(value)
        if self.fallback is None:
            return None
        self.failures += 1
        if self.failures <= int(self.fallback.get("failureThreshold", 3)):
            return None
        behavior = self.fallback.get("behavior", "static")
        fixed = int(self.fallback["replicas"])
        chosen = {"static": fixed, "currentReplicas": replicas,
                  "currentReplicasIfHigher": max(replicas, fixed),
                  "currentReplicasIfLower": min(replicas, fixed)}[behavior]
        return int(milli(self.target_value) * chosen)
