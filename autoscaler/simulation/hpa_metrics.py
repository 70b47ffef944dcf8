"""What one metric of an HPA proposes at a sync, as the controller computes it (`propose`): an External metric's
`Value` or `AverageValue` target, and a per-pod metric's mean with the missing-metric and not-ready rules
(`count_per_pod`, which also says how it counted each pod, for a caller that shows its reasoning).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from autoscaler.simulation.hpa_spec import DEFAULT_TOLERANCES, HpaPod, MetricReading, MetricSpec, Tolerances

__all__ = ["PerPodCount", "count_per_pod", "propose"]


def propose(metric: MetricSpec, reading: MetricReading, current: int, pods: Sequence[HpaPod],
            tolerances: Tolerances = DEFAULT_TOLERANCES) -> int | None:
    """The replicas one metric proposes, or None when it cannot be read."""
    if reading is None:
        return None
    ready = sum(1 for p in pods if p.ready)
    if isinstance(reading, (int, float)):
        if metric.kind != "External" or not math.isfinite(reading):
            return None
        if metric.target_type == "AverageValue":
            if current == 0:
                return math.ceil(reading / metric.target)
            ratio = reading / (metric.target * current)
            return current if tolerances.within(ratio) else math.ceil(reading / metric.target)
        ratio = reading / metric.target
        if current == 0:
            return math.ceil(ratio)
        return current if tolerances.within(ratio) else math.ceil(ratio * ready)
    return _per_pod(metric, reading, current, pods, tolerances)


def _usage_ratio(metric: MetricSpec, values: Mapping[str, float]) -> float:
    """The mean over the pods against the target; a utilization in whole percent, as the controller's
    `GetResourceUtilizationRatio` divides integers (87.9% reads 87)."""
    mean = sum(values.values()) / len(values)
    if metric.resource_utilization:
        mean = math.floor(round(mean, 9))  # rounded first: 80% summed from floats must not read 79
    return mean / metric.target


@dataclass(frozen=True, slots=True)
class PerPodCount:
    """How the controller counted a per-pod metric's pods at one sync, for a caller that shows its reasoning (the
    demo's "an HPA on the average" line): which pods were counted and at what, and what that proposes."""

    measured: Mapping[str, float]
    """The Ready pods with a metric of their own, and their values."""
    filled: Mapping[str, float]
    """The pods counted without one (a Ready pod with no metric, a not-yet-Ready pod on a scale-up), at the
    value the rules give them: 0 on a scale-up, the target on a scale-down."""
    ratio: float
    """The counted pods' mean against the target (the measured pods' alone where none was filled in)."""
    proposal: int
    held: Literal["tolerance", "reversed"] | None
    """Why `proposal` is the current replicas: the ratio is within tolerance, or the filled-in pods reversed the
    direction the measured ones asked for; None where it is the ratio's own."""

    @property
    def counted(self) -> dict[str, float]:
        return {**self.measured, **self.filled}


def count_per_pod(metric: MetricSpec, values: Mapping[str, float], current: int, pods: Sequence[HpaPod],
                  tolerances: Tolerances = DEFAULT_TOLERANCES) -> PerPodCount | None:
    """The controller's per-pod calculation (`calcPlainMetricReplicas`, `GetResourceReplicas`), with its
    missing-metric and not-ready rules; None where no Ready pod has a metric (the metric cannot be read)."""
    metrics = {p.name: values[p.name] for p in pods if p.ready and p.name in values}
    unready = [p.name for p in pods if not p.ready]
    missing = [p.name for p in pods if p.ready and p.name not in values]
    if not metrics:
        return None
    ratio = _usage_ratio(metric, metrics)
    up_with_unready = bool(unready) and ratio > 1.0
    if not up_with_unready and not missing:
        within = tolerances.within(ratio)
        return PerPodCount(metrics, {}, ratio, current if within else math.ceil(ratio * len(metrics)),
                           "tolerance" if within else None)
    filled: dict[str, float] = {}
    if ratio < 1.0:
        # A pod without a metric on a scale-down: at the target, or a utilization's whole request (100%).
        at = max(100.0, metric.target) if metric.resource_utilization else metric.target
        filled.update((name, at) for name in missing)
    elif ratio > 1.0:
        filled.update((name, 0.0) for name in missing)
    if up_with_unready:
        filled.update((name, 0.0) for name in unready)
    new_ratio = _usage_ratio(metric, {**metrics, **filled})
    if tolerances.within(new_ratio):
        return PerPodCount(metrics, filled, new_ratio, current, "tolerance")
    if (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return PerPodCount(metrics, filled, new_ratio, current, "reversed")
    replicas = math.ceil(new_ratio * (len(metrics) + len(filled)))
    if (new_ratio < 1.0 and replicas > current) or (new_ratio > 1.0 and replicas < current):
        return PerPodCount(metrics, filled, new_ratio, current, "reversed")
    return PerPodCount(metrics, filled, new_ratio, replicas, None)


def _per_pod(metric: MetricSpec, values: Mapping[str, float], current: int, pods: Sequence[HpaPod],
             tolerances: Tolerances) -> int | None:
    """The replicas a per-pod metric proposes (`count_per_pod`)."""
    count = count_per_pod(metric, values, current, pods, tolerances)
    return None if count is None else count.proposal
