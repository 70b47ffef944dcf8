"""HPA `behavior` as manifests write it: read with Kubernetes' API defaulting, and described in words.

A scaling rule left out of `behavior` takes the default rule whole; a field left out of a rule takes that
field of the default rule (`SetDefaults_HorizontalPodAutoscalerBehavior`); a rule's `tolerance` left out is
the cluster's (0.1). The order of policies means
nothing to the controller, so they are kept sorted and equal rules compare equal.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from autoscaler.simulation.hpa import (
    DEFAULT_BEHAVIOR,
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    Behavior,
    ScalingPolicy,
    ScalingRules,
)


def _rules(raw: Any, default: ScalingRules, where: str) -> ScalingRules:
    """API defaulting: fields left out of a scaling rule take the default rule's values."""
    if raw is None:
        return default
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a mapping, got {raw!r}")
    policies = default.policies
    if raw.get("policies") is not None:
        policies = tuple(sorted(  # the order of policies means nothing; sorted, equal rules compare equal
            ScalingPolicy(str(p["type"]), int(p["value"]), int(p["periodSeconds"]))  # type: ignore[arg-type]
            for p in raw["policies"]
        ))
        for p in policies:
            if p.type not in ("Pods", "Percent") or p.value <= 0 or not 0 < p.period_s <= 1800:
                raise ValueError(f"{where}: bad policy {p}")
    select = str(raw.get("selectPolicy", default.select_policy))
    if select not in ("Max", "Min", "Disabled"):
        raise ValueError(f"{where}: selectPolicy must be Max, Min or Disabled, got {select!r}")
    window = int(raw.get("stabilizationWindowSeconds", default.stabilization_window_s))
    if not 0 <= window <= 3600:
        raise ValueError(f"{where}: stabilizationWindowSeconds must be 0..3600, got {window}")
    tolerance = default.tolerance if raw.get("tolerance") is None else _tolerance(raw["tolerance"], where)
    return ScalingRules(window, select, policies, tolerance)  # type: ignore[arg-type]


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


def behavior_from_manifest(document: Mapping[str, Any]) -> Behavior:
    """The `spec.behavior` of an HPA manifest (or a bare behavior mapping), with Kubernetes' defaults."""
    raw = document.get("spec", {}).get("behavior") if "spec" in document else document.get("behavior", document)
    if raw is None:
        return DEFAULT_BEHAVIOR
    return Behavior(_rules(raw.get("scaleUp"), DEFAULT_SCALE_UP, "behavior.scaleUp"),
                    _rules(raw.get("scaleDown"), DEFAULT_SCALE_DOWN, "behavior.scaleDown"))


def describe_behavior(behavior: Behavior) -> str:
    """One line per direction, as `kubectl describe hpa` would make a person read it."""
    lines = []
    for name, rules in (("scaleUp", behavior.scale_up), ("scaleDown", behavior.scale_down)):
        policies = ", ".join(f"{p.value}{'%' if p.type == 'Percent' else ' pods'} per {p.period_s}s"
                             for p in rules.policies)
        tolerance = "" if rules.tolerance is None else f", tolerance {rules.tolerance:g}"
        lines.append(f"{name}: window {rules.stabilization_window_s}s, {rules.select_policy} of [{policies}]"
                     f"{tolerance}")
    return "; ".join(lines)
