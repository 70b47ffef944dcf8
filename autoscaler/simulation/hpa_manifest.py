"""HPA `behavior` as manifests write it: read with Kubernetes' API defaulting, and described in words.

A scaling rule left out of `behavior` takes the default rule whole; a field left out of a rule takes that
field of the default rule (`SetDefaults_HorizontalPodAutoscalerBehavior`); a rule's `tolerance` left out is
the cluster's (0.1). An HPA with no `behavior` at all is not defaulted (the API server fills in the fields of
a behavior it is given, never a missing one) and the controller scales it by its older rules: read as None.
The order of policies means nothing to the controller, so they are kept sorted and equal rules compare equal.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from typing import Any

from autoscaler.simulation.hpa import SCALE_UP_LIMIT_MINIMUM
from autoscaler.simulation.hpa_spec import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    DOWNSCALE_STABILIZATION_S,
    Behavior,
    ScalingPolicy,
    ScalingRules,
)

SPEC_FIELDS = ("scaleTargetRef", "minReplicas", "maxReplicas", "metrics", "behavior",
               "targetCPUUtilizationPercentage")  # autoscaling/v2's, and v1's one more
OBJECT_FIELDS = ("apiVersion", "kind", "metadata", "status")
BEHAVIOR_FIELDS = ("scaleUp", "scaleDown")
RULES_FIELDS = ("stabilizationWindowSeconds", "selectPolicy", "policies", "tolerance")
POLICY_FIELDS = ("type", "value", "periodSeconds")


def _known(raw: Mapping[str, Any], fields: tuple[str, ...], where: str) -> None:
    """Refuse a field the API does not have, as the API server's strict field validation does: a typo left out
    without a word would run the default rule in its place."""
    for key in raw:
        if key not in fields:
            close = difflib.get_close_matches(str(key), fields, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (the fields are {', '.join(fields)})"
            raise ValueError(f"{where}: unknown field {key!r}{hint}")


def _rules(raw: Any, default: ScalingRules, where: str) -> ScalingRules:
    """API defaulting: fields left out of a scaling rule take the default rule's values."""
    if raw is None:
        return default
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a mapping, got {raw!r}")
    _known(raw, RULES_FIELDS, where)
    policies = default.policies
    if raw.get("policies") is not None:
        if not isinstance(raw["policies"], list):
            raise ValueError(f"{where}: policies must be a list, got {raw['policies']!r}")
        if not raw["policies"]:  # a rule of none never moves: its direction froze without a word
            raise ValueError(f"{where}: policies is empty: at least one policy must be given (the API server "
                             "refuses none); leave policies out for the default ones")
        # the order of policies means nothing; sorted, equal rules compare equal
        policies = tuple(sorted(_policy(p, f"{where}: policy {i}") for i, p in enumerate(raw["policies"], 1)))
    select = str(raw.get("selectPolicy", default.select_policy))
    if select not in ("Max", "Min", "Disabled"):
        raise ValueError(f"{where}: selectPolicy must be Max, Min or Disabled, got {select!r}")
    window = _whole(raw.get("stabilizationWindowSeconds", default.stabilization_window_s),
                    f"{where}: stabilizationWindowSeconds", "a whole number of seconds")
    if not 0 <= window <= 3600:
        raise ValueError(f"{where}: stabilizationWindowSeconds must be 0..3600, got {window}")
    tolerance = default.tolerance if raw.get("tolerance") is None else _tolerance(raw["tolerance"], where)
    return ScalingRules(window, select, policies, tolerance)  # type: ignore[arg-type]


def _whole(raw: Any, where: str, what: str = "a whole number") -> int:
    """An integer field as the API server takes it: a YAML integer, not "5m", 1.5 or true."""
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise ValueError(f"{where} must be {what}, got {raw!r}")
    return raw


def _policy(raw: Any, where: str) -> ScalingPolicy:
    """One `policies` item, each of its three fields required, as the API server requires them."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a mapping with type, value and periodSeconds, got {raw!r}")
    _known(raw, POLICY_FIELDS, where)
    missing = [key for key in ("type", "value", "periodSeconds") if key not in raw]
    if missing:
        raise ValueError(f"{where} has no {' or '.join(missing)}")
    kind = raw["type"]
    if kind not in ("Pods", "Percent"):
        raise ValueError(f"{where}: type must be Pods or Percent, got {kind!r}")
    value = _whole(raw["value"], f"{where}: value")
    period = _whole(raw["periodSeconds"], f"{where}: periodSeconds", "a whole number of seconds")
    if value <= 0:
        raise ValueError(f"{where}: value must be above 0, got {value}")
    if not 0 < period <= 1800:
        raise ValueError(f"{where}: periodSeconds must be 1..1800, got {period}")
    return ScalingPolicy(kind, value, period)


def _tolerance(raw: Any, where: str) -> float:
    """`tolerance`, a Kubernetes quantity ("0.05", 0, "50m"), read by the client library's own parser."""
    # Imported here: `kubernetes.utils` loads the whole client (about 0.7 s), needed only when a rule sets one.
    from kubernetes.utils.quantity import parse_quantity

    try:
        value = float(parse_quantity(raw))  # type: ignore[no-untyped-call]
    except ValueError:
        raise ValueError(f"{where}: tolerance must be a quantity such as 0.05 or 50m, got {raw!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{where}: tolerance must be a quantity of 0 or more, got {raw!r}")
    return value


KEDA_MIN_REPLICAS = 1
"""minReplicas of the HPA KEDA makes where minReplicaCount is left out or 0 (KEDA scales 1 to 0 itself)."""
KEDA_MAX_REPLICAS = 100
"""maxReplicas of the HPA KEDA makes where maxReplicaCount is left out (KEDA's default)."""


def hpa_of_scaled_object(document: Mapping[str, Any]) -> dict[str, Any]:
    """The HPA KEDA makes for a ScaledObject: its behavior is `spec.advanced.horizontalPodAutoscalerConfig
    .behavior`, its bounds minReplicaCount (at least 1) and maxReplicaCount. The project ships a ScaledObject
    (manifests/examples/keda/) and it was refused as "not a HorizontalPodAutoscaler". Without a behavior KEDA
    gives its HPA none, so the controller scales by its rules without one (read as None), as for such an HPA."""
    spec = document.get("spec")
    if not isinstance(spec, Mapping):
        raise ValueError(f"spec: expected a mapping, got {spec!r}")
    config: Any = spec
    for key in ("advanced", "horizontalPodAutoscalerConfig"):
        config = config.get(key) or {}
        if not isinstance(config, Mapping):
            raise ValueError(f"{key}: expected a mapping, got {config!r}")
    minimum = spec.get("minReplicaCount") or KEDA_MIN_REPLICAS
    hpa_spec = {"minReplicas": minimum, "maxReplicas": spec.get("maxReplicaCount", KEDA_MAX_REPLICAS)}
    if config.get("behavior") is not None:
        hpa_spec["behavior"] = config["behavior"]
    return {"kind": "HorizontalPodAutoscaler", "spec": hpa_spec}


def behavior_from_manifest(document: Mapping[str, Any]) -> Behavior | None:
    """The `spec.behavior` of an HPA manifest (or a bare behavior mapping, or a spec without `spec:`), with
    Kubernetes' defaults; None for an HPA without one (`kubectl get hpa -o yaml` of an HPA created so)."""
    kind = document.get("kind")
    if kind is not None and kind != "HorizontalPodAutoscaler":
        article = "an" if str(kind)[:1].upper() in "AEIOU" else "a"  # the adapter's APIService read "a APIService"
        raise ValueError(f"{article} {kind}, not a HorizontalPodAutoscaler: give the HPA's manifest (kubectl get "
                         "hpa NAME -o yaml) or a mapping with `behavior:`")
    if "spec" in document:
        spec = document["spec"]
        if not isinstance(spec, Mapping):
            raise ValueError(f"spec: expected a mapping, got {spec!r}")
        _known(spec, SPEC_FIELDS, "spec")
        raw = spec.get("behavior")
    elif "behavior" in document:  # a spec pasted without `spec:`, or `behavior:` alone: its siblings checked too
        _known(document, (*OBJECT_FIELDS, *SPEC_FIELDS), "the file")
        raw = document["behavior"]
    else:
        raw = document
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ValueError(f"behavior: expected a mapping, got {raw!r}")
    _known(raw, BEHAVIOR_FIELDS, "behavior")
    return Behavior(_rules(raw.get("scaleUp"), DEFAULT_SCALE_UP, "behavior.scaleUp"),
                    _rules(raw.get("scaleDown"), DEFAULT_SCALE_DOWN, "behavior.scaleDown"))


def describe_behavior(behavior: Behavior | None) -> str:
    """One line per direction, as `kubectl describe hpa` would make a person read it."""
    if behavior is None:
        return (f"none (the controller's rules without behavior: up to max(2x, {SCALE_UP_LIMIT_MINIMUM}) pods a "
                f"sync, the highest recommendation of the last {DOWNSCALE_STABILIZATION_S}s)")
    lines = []
    for name, rules in (("scaleUp", behavior.scale_up), ("scaleDown", behavior.scale_down)):
        if rules.select_policy == "Disabled":  # its window and policies do nothing: it read "Disabled of [...]"
            lines.append(f"{name}: disabled (selectPolicy Disabled: the HPA never scales {name[5:].lower()})")
            continue
        policies = ", ".join(f"{p.value}{'%' if p.type == 'Percent' else ' pods'} per {p.period_s}s"
                             for p in rules.policies)
        tolerance = "" if rules.tolerance is None else f", tolerance {rules.tolerance:g}"
        lines.append(f"{name}: window {rules.stabilization_window_s}s, {rules.select_policy} of [{policies}]"
                     f"{tolerance}")
    return "; ".join(lines)
