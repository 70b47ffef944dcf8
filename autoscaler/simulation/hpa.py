"""The HorizontalPodAutoscaler as Kubernetes documents it (autoscaling/v2), one sync at a time.

One model of the HPA, shared by the simulator, the demo and the tests, so that what we claim about "the HPA"
is checked against the Kubernetes documentation's worked examples once (tests/simulation/test_hpa.py). It
follows the documented algorithm and the controller it describes (`pkg/controller/podautoscaler`):

- every `sync_period_s` (15 s), each metric proposes `ceil(ratio * pods)`, where `ratio = current / target`,
  unless the ratio is within tolerance of 1 (`1 - down <= ratio <= 1 + up`, each 0.1 unless the behavior
  sets its own: `behavior.scaleUp.tolerance`, `behavior.scaleDown.tolerance`, HPAConfigurableTolerance,
  beta in Kubernetes 1.35), when it proposes the current replicas;
- `External` metrics: a `Value` target scales by `value / target` over the Ready pods; an `AverageValue`
  target divides the value by the current replicas, i.e. proposes `ceil(value / target)`;
- per-pod metrics (`Pods`, `Resource` utilization): the mean over pods with metrics; pods without a metric
  count as using the target on a scale-down (a `Resource` utilization target: 100% of the request, or the
  target where it is higher) and nothing on a scale-up (at a ratio of exactly 1, neither: they are left
  out), not-yet-Ready pods count as using nothing on a scale-up, and the whole proposal is dropped if that
  reverses its direction; a utilization is read in whole percent, as the controller's integer division
  reads it;
- the largest proposal over all metrics wins; if some metric fails and the rest would scale down, nothing
  happens (an HPA scales up on what it can read, never down on a partial view);
- `behavior`: the scale-up window takes the lowest, the scale-down window the highest recommendation seen
  within it; then the policies limit the change per period (`selectPolicy` Max, Min or Disabled), counted
  from the replicas at the start of each policy's period; then `minReplicas`/`maxReplicas`;
- an HPA without `behavior` (`behavior` None: the API server defaults the fields of a behavior it is given,
  never a missing one) takes the controller's older path: the highest recommendation of the last 300 s
  (the cluster's `--horizontal-pod-autoscaler-downscale-stabilization`), on the way up too, then at most
  max(2x the current replicas, 4) per sync, then `minReplicas`/`maxReplicas`;
- a target scaled to 0 replicas is left there (`ScalingDisabled`) unless `minReplicas` is 0.

Pure apart from its own memory (recommendations and scale events, as the controller keeps them); the caller
passes the time and the metric readings, so the demo can read a real API, the simulator a simulated one, and
the closed-loop test (`tests/support/hpa_step.py`) the real metrics API and a scale subresource.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

SYNC_PERIOD_S: Final = 15.0
TOLERANCE: Final = 0.1
DOWNSCALE_STABILIZATION_S: Final = 300
"""`--horizontal-pod-autoscaler-downscale-stabilization`: the scale-down window when behavior names none."""
SCALE_UP_LIMIT_FACTOR: Final = 2
SCALE_UP_LIMIT_MINIMUM: Final = 4
"""Without `behavior`, a sync scales up to at most max(2x the current replicas, 4) (`calculateScaleUpLimit`)."""

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


@dataclass(frozen=True, slots=True)
class ScaleDecision:
    """The outcome of one sync: the replicas to set, and why, in words a person reads."""

    current: int
    desired: int
    proposals: dict[str, int | None]  # per metric name; None: the metric could not be read
    metric: str | None  # the metric whose proposal won
    limited_by: str | None  # "scaleUp window", "scaleDown window", "scaleUp policy", "minReplicas", ...
    reason: str

    @property
    def changed(self) -> bool:
        return self.desired != self.current


@dataclass
class _Event:
    at: float
    change: int  # pods added (scale-up) or removed (scale-down), positive


@dataclass
class HorizontalPodAutoscaler:
    """One HPA object with the controller's memory of it."""

    spec: HpaSpec
    _recommendations: list[tuple[float, int]] = field(default_factory=list)
    _ups: list[_Event] = field(default_factory=list)
    _downs: list[_Event] = field(default_factory=list)

    def sync(self, now: float, current: int, pods: Sequence[HpaPod],
             readings: Mapping[str, MetricReading]) -> ScaleDecision:
        """One reconcile at `now` with `current` = the scale target's `spec.replicas`; records the scale as
        done (the simulator and the demo scale at once)."""
        decision = self.recommend(now, current, pods, readings)
        self.record_scale(now, decision)
        return decision

    def recommend(self, now: float, current: int, pods: Sequence[HpaPod],
                  readings: Mapping[str, MetricReading]) -> ScaleDecision:
        """The decision of one reconcile, without recording a scale: a caller that writes the scale through
        an API records it with `record_scale` only once the write worked, as the controller does (its
        recommendation history is kept either way)."""
        spec = self.spec
        proposals: dict[str, int | None] = {}
        if current == 0 and spec.min_replicas != 0:
            return ScaleDecision(0, 0, proposals, None, None,
                                 "scaling is disabled since the replica count of the target is zero (ScalingDisabled)")
        if current > spec.max_replicas:
            return ScaleDecision(current, spec.max_replicas, proposals, None, "maxReplicas",
                                 "current replicas above maxReplicas")
        if current < spec.min_replicas:
            return ScaleDecision(current, spec.min_replicas, proposals, None, "minReplicas",
                                 "current replicas below minReplicas")
        best, best_metric = 0, None
        tolerances = spec.tolerances
        for metric in spec.metrics:
            proposal = propose(metric, readings.get(metric.name), current, pods, tolerances)
            proposals[metric.name] = proposal
            if proposal is not None and (best_metric is None or proposal > best):
                best, best_metric = proposal, metric.name
        failed = sum(1 for p in proposals.values() if p is None)
        if failed == len(spec.metrics) or (failed and best < current):
            return ScaleDecision(current, current, proposals, None, None,
                                 f"{failed} of {len(spec.metrics)} metrics unreadable: no scale-down, holding")
        stabilized, window = self._stabilize(now, current, best)
        desired, limit = self._limit(now, current, stabilized)
        return ScaleDecision(current, desired, proposals, best_metric, limit or window,
                             _why(current, best, best_metric, stabilized, window, desired, limit))

    def record_scale(self, now: float, decision: ScaleDecision) -> None:
        """Remember a scale that happened at `now`: the behavior policies count it within their periods."""
        if decision.desired > decision.current:
            self._ups.append(_Event(now, decision.desired - decision.current))
        elif decision.desired < decision.current:
            self._downs.append(_Event(now, decision.current - decision.desired))

    def _stabilize(self, now: float, current: int, desired: int) -> tuple[int, str | None]:
        """Bring the recommendation inside the windows; remember the raw one (the controller's order)."""
        if self.spec.behavior is None:
            return self._stabilize_without_behavior(now, desired)
        up_cut = now - self.spec.behavior.scale_up.stabilization_window_s
        down_cut = now - self.spec.behavior.scale_down.stabilization_window_s
        up, down = desired, desired
        kept = []
        for at, recommendation in self._recommendations:
            if at > up_cut:
                up = min(up, recommendation)
            if at > down_cut:
                down = max(down, recommendation)
            if at > up_cut or at > down_cut:
                kept.append((at, recommendation))
        kept.append((now, desired))
        self._recommendations = kept
        result = max(current, up)
        result = min(result, down)
        window = None
        if result < desired:
            window = "scaleUp window"
        elif result > desired:
            window = "scaleDown window"
        return result, window

    def _stabilize_without_behavior(self, now: float, desired: int) -> tuple[int, str | None]:
        """The controller's `stabilizeRecommendation`: the highest recommendation of the window, whichever way
        the replicas go (a sample exactly at the window's start still counts: only one `Before` it is old)."""
        cut = now - DOWNSCALE_STABILIZATION_S
        kept = [(at, recommendation) for at, recommendation in self._recommendations if at >= cut]
        highest = max([desired, *(recommendation for _, recommendation in kept)])
        kept.append((now, desired))
        self._recommendations = kept
        return highest, "downscale stabilization window" if highest > desired else None

    def _limit(self, now: float, current: int, desired: int) -> tuple[int, str | None]:
        spec = self.spec
        if spec.behavior is None:  # `convertDesiredReplicasWithRules`
            up_limit = max(SCALE_UP_LIMIT_FACTOR * current, SCALE_UP_LIMIT_MINIMUM)
            if desired < spec.min_replicas:
                return spec.min_replicas, "minReplicas"
            ceiling, why = ((up_limit, "scale-up limit (twice the replicas, at least 4)")
                            if spec.max_replicas > up_limit else (spec.max_replicas, "maxReplicas"))
            return (ceiling, why) if desired > ceiling else (desired, None)
        if desired > current:
            limit = max(current, _rate_limit(current, now, self._ups, self._downs, spec.behavior.scale_up, up=True))
            ceiling, why = (limit, "scaleUp policy") if spec.max_replicas > limit else (spec.max_replicas,
                                                                                          "maxReplicas")
            return (ceiling, why) if desired > ceiling else (desired, None)
        if desired < current:
            limit = min(current, _rate_limit(current, now, self._ups, self._downs, spec.behavior.scale_down,
                                             up=False))
            floor, why = (limit, "scaleDown policy") if limit > spec.min_replicas else (spec.min_replicas,
                                                                                        "minReplicas")
            return (floor, why) if desired < floor else (desired, None)
        return desired, None


def _changed_within(events: Sequence[_Event], now: float, period_s: int) -> int:
    return sum(e.change for e in events if e.at > now - period_s)


def _rate_limit(current: int, now: float, ups: Sequence[_Event], downs: Sequence[_Event], rules: ScalingRules,
                up: bool) -> int:
    """The furthest the policies let replicas move from `current` now (controller's calculate*Limit)."""
    if rules.select_policy == "Disabled" or not rules.policies:
        return current
    proposals = []
    for policy in rules.policies:
        start = current - _changed_within(ups, now, policy.period_s) + _changed_within(downs, now, policy.period_s)
        if up:
            proposals.append(start + policy.value if policy.type == "Pods"
                             else math.ceil(start * (1 + policy.value / 100)))
        else:
            proposals.append(start - policy.value if policy.type == "Pods"
                             else int(start * (1 - policy.value / 100)))
    # Max picks the biggest change: the highest limit up, the lowest limit down; Min the reverse.
    biggest = rules.select_policy == "Max"
    return max(proposals) if biggest == up else min(proposals)


def propose(metric: MetricSpec, reading: MetricReading, current: int, pods: Sequence[HpaPod],
            tolerances: Tolerances = Tolerances()) -> int | None:
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
                  tolerances: Tolerances = Tolerances()) -> PerPodCount | None:
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


def _why(current: int, proposed: int, metric: str | None, stabilized: int, window: str | None, desired: int,
         limit: str | None) -> str:
    if desired == current and proposed == current:
        return f"{metric} proposes {proposed}: within tolerance or at target"
    text = f"{metric} proposes {proposed}"
    if window:
        text += f"; {window} holds {stabilized}"
    if limit:
        text += f"; {limit} allows {desired}"
    if desired != current:
        text += f"; {'scale up' if desired > current else 'scale down'} {current} -> {desired}"
    return text
