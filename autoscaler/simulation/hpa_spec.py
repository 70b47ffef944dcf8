"""What an HPA is configured with, as autoscaling/v2 spells it: its metrics and their targets (`MetricSpec`), its
bounds, tolerances and `behavior` (`HpaSpec`, `Behavior`, with the API server's defaults), the pods of its target
as it sees them (`HpaPod`) and what a metric reads (`MetricReading`). The controller itself is `hpa`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["DEFAULT_BEHAVIOR", "DEFAULT_SCALE_DOWN", "DEFAULT_SCALE_UP", "DEFAULT_TOLERANCES",
           "DOWNSCALE_STABILIZATION_S", "TOLERANCE", "Behavior", "HpaPod", "HpaSpec", "MetricKind", "MetricReading",
           "MetricSpec", "PolicyType", "ScalingPolicy", "ScalingRules", "SelectPolicy", "TargetType", "Tolerances"]

TOLERANCE: Final = 0.1
DOWNSCALE_STABILIZATION_S: Final = 300
"""`--horizontal-pod-autoscaler-downscale-stabilization`: the scale-down window when behavior names none."""

PolicyType = Literal["Pods", "Percent"]
SelectPolicy = Literal["Max", "Min", "Disabled"]
TargetType = Literal["Value", "AverageValue", "Utilization"]
MetricKind = Literal["External", "Pods", "Resource"]


@dataclass(frozen=True, slots=True, order=True)
class ScalingPolicy:
    type: PolicyType
    value: int
    period_s: int


@dataclass(frozen=True, slots=True)
class ScalingRules:
    stabilization_window_s: int
    select_policy: SelectPolicy
    policies: tuple[ScalingPolicy, ...]
    tolerance: float | None = None  # this direction's tolerance; None: the cluster's (`HpaSpec.tolerance`)


@dataclass(frozen=True, slots=True)
class Tolerances:
    """How far the usage ratio may sit from 1 without a scale, per direction (the controller's `Tolerances`)."""

    up: float = TOLERANCE
    down: float = TOLERANCE

    def within(self, ratio: float) -> bool:
        return 1.0 - self.down <= ratio <= 1.0 + self.up


DEFAULT_TOLERANCES: Final = Tolerances()
"""The cluster's default, `TOLERANCE` each way: what a metric is judged by where the caller names none."""


@dataclass(frozen=True, slots=True)
class Behavior:
    scale_up: ScalingRules
    scale_down: ScalingRules


DEFAULT_SCALE_UP: Final = ScalingRules(0, "Max", (ScalingPolicy("Percent", 100, 15), ScalingPolicy("Pods", 4, 15)))
DEFAULT_SCALE_DOWN: Final = ScalingRules(DOWNSCALE_STABILIZATION_S, "Max", (ScalingPolicy("Percent", 100, 15),))
DEFAULT_BEHAVIOR: Final = Behavior(DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN)


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One entry of `spec.metrics`: which metric, and the target it is held at."""

    name: str
    kind: MetricKind
    target_type: TargetType
    target: float  # the value, average value, or utilization in percent

    @property
    def resource_utilization(self) -> bool:
        """A `Resource` metric with a `Utilization` target: the controller's `GetResourceReplicas` rules."""
        return self.kind == "Resource" and self.target_type == "Utilization"

    def describe(self) -> str:
        unit = "%" if self.target_type == "Utilization" else ""
        return f"{self.kind} {self.name} {self.target_type} {self.target:g}{unit}"


@dataclass(frozen=True, slots=True)
class HpaSpec:
    metrics: tuple[MetricSpec, ...]
    min_replicas: int = 1
    max_replicas: int = 10
    behavior: Behavior | None = DEFAULT_BEHAVIOR
    """None: the HPA has no `spec.behavior`, and the controller takes its older path (module docstring)."""
    tolerance: float = TOLERANCE  # the cluster's `--horizontal-pod-autoscaler-tolerance`

    @property
    def tolerances(self) -> Tolerances:
        """Each direction's own tolerance where its behavior sets one, else the cluster's."""
        if self.behavior is None:
            return Tolerances(self.tolerance, self.tolerance)
        up, down = self.behavior.scale_up.tolerance, self.behavior.scale_down.tolerance
        return Tolerances(self.tolerance if up is None else up, self.tolerance if down is None else down)


@dataclass(frozen=True, slots=True)
class HpaPod:
    """A pod of the scale target as the HPA sees it."""

    name: str
    ready: bool


MetricReading = float | Mapping[str, float] | None
"""An External metric's value, a per-pod metric's values by pod name, or None when the read failed."""
