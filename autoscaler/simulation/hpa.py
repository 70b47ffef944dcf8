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
the closed-loop test (`tests/support/hpa_step.py`) the real metrics API and a scale subresource. What an HPA is
configured with is `hpa_spec`; what each metric proposes, `hpa_metrics`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from autoscaler.simulation.hpa_metrics import propose
from autoscaler.simulation.hpa_spec import DOWNSCALE_STABILIZATION_S, HpaPod, HpaSpec, MetricReading, ScalingRules

SYNC_PERIOD_S: Final = 15.0
SCALE_UP_LIMIT_FACTOR: Final = 2
SCALE_UP_LIMIT_MINIMUM: Final = 4
"""Without `behavior`, a sync scales up to at most max(2x the current replicas, 4) (`calculateScaleUpLimit`)."""


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
