"""One runtime, one refresh: snapshot + policy + memory → the view the API serves, and the next memory.

This is the composition the refresh loop calls per runtime: aggregate, recommend, smooth with the hold
rules, rank (docs/design.md). It is pure: `now` comes from the caller, and the smoothing memory is passed in
and handed back, never kept here.

Rules, in order:
- **unknown** (`known=False`, every value None, the API answers 503 and the HPA holds): the source is down,
  no pod is Ready, or fewer than `min_coverage` of the Ready pods have fresh data. The memory keeps its
  values (the decay clock is restarted, see `smoothing`) so that served values resume from where they were.
- **incomplete** (known, but some Ready pod is stale or missing): values are computed from the fresh pods
  and may rise, but never fall.
- **complete**: values rise at once and fall with time constant `scale_down_tau_s`.

`n` is the number of Ready pods with fresh data, for `modelmesh_request_load = n * M_p(r)` and for every
term of the recommendation: pods we cannot see add no invented load, and the hold rule stops the smaller
sum from lowering anything while they are missing. A signal that no fresh pod reports (no GPU anywhere, say)
makes that one metric unknown and that term propose nothing; the other metrics are still served.
`modelmesh_desired_replicas` is served as the smoothed recommendation rounded up (see `smoothing`).

Pods are ranked on every refresh, known or not, from each Ready pod's last good sample, so /debug can
always show them; whoever writes deletion costs should act only on known views.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from autoscaler.model import PodView, RuntimeSnapshot, RuntimeView, ServedValue
from autoscaler.names import ServedMetric
from autoscaler.policies.aggregation import Aggregate, aggregate
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.ranking import Ranking, default_terms, rank_pods
from autoscaler.policies.recommendation import ceil_pods, recommend
from autoscaler.policies.smoothing import DESIRED_REPLICAS_SETTLE, SmoothState, smooth


@dataclass(frozen=True, slots=True)
class RuntimeMemory:
    """What one runtime's decision carries to the next refresh; `decide` returns a new one."""

    smoothed: Mapping[ServedMetric, SmoothState] = field(default_factory=dict)
    consecutive_misses: int = 0  # refreshes in a row that were not complete
    known: bool = False  # whether the last view was served at all


def _pod_views(agg: Aggregate, ranking: Ranking, now: float) -> tuple[PodView, ...]:
    """One PodView per pod, in the snapshot's order."""
    views = []
    for pod, fresh, weight, need, cost in zip(
        agg.pods, agg.fresh, agg.weights, ranking.needs, ranking.costs, strict=True
    ):
        sampled_at = pod.sampled_at
        views.append(PodView(
            name=pod.name,
            ready=pod.ready,
            fresh=fresh,
            age_s=None if sampled_at is None else max(0.0, now - sampled_at),
            gpu_busy=pod.gpu_busy,
            requests_per_second=pod.requests_per_second,
            queue_delay_s=pod.queue_delay_s,
            lru_age_s=pod.lru_age_s,
            cache_used_ratio=pod.cache_used_ratio,
            weight=weight,
            need=need,
            deletion_cost=cost,
        ))
    return tuple(views)


def _raw_values(agg: Aggregate, desired: int) -> dict[ServedMetric, float | None]:
    return {
        ServedMetric.DESIRED_REPLICAS: float(desired),
        ServedMetric.GPU_BUSY: agg.gpu_busy,
        ServedMetric.REQUEST_LOAD: agg.request_load,
        ServedMetric.CACHE_PRESSURE: agg.cache_pressure,
    }


def _reason(
    snapshot: RuntimeSnapshot, agg: Aggregate, policy: RuntimePolicy, known: bool, memory: RuntimeMemory
) -> str:
    """Why values are unknown or held, in words for logs and /debug; empty when nothing is wrong."""
    if not snapshot.source_ok:
        return "metric source down; values unknown (503), HPA holds"
    if agg.ready == 0:
        return "no ready pods; values unknown (503), HPA holds"
    missing = agg.ready - agg.n
    if not known:
        return (
            f"only {agg.n} of {agg.ready} ready pods fresh (coverage {agg.coverage:.0%} < "
            f"{policy.min_coverage:.0%}); values unknown (503), HPA holds"
        )
    parts = []
    if not memory.known and memory.smoothed:
        parts.append("data back after an unknown spell; values resume from where they were held")
    if missing:
        parts.append(f"{missing} of {agg.ready} ready pods stale; holding values (may rise, not fall)")
    absent = [
        what
        for what, value in (
            ("GPU busy", agg.gpu_busy),
            ("request rate", agg.request_rate),
            ("cache state", agg.cache_pressure),
        )
        if value is None
    ]
    if absent:
        parts.append("no fresh pod reports " + ", ".join(absent))
    return "; ".join(parts)


def decide(
    snapshot: RuntimeSnapshot,
    policy: RuntimePolicy,
    memory: RuntimeMemory | None,
    now: float,
    window_s: float,
) -> tuple[RuntimeView, RuntimeMemory]:
    """Decide one runtime for the refresh at `now`; `window_s` is the aggregation window the API reports."""
    memory = memory or RuntimeMemory()
    agg = aggregate(snapshot.pods, policy, now)
    rec = recommend(agg, policy)
    known = snapshot.source_ok and agg.ready > 0 and agg.coverage >= policy.min_coverage
    complete = known and agg.n == agg.ready

    raw = _raw_values(agg, rec.desired)
    tau = policy.scale_down_tau_s
    smoothed: dict[ServedMetric, SmoothState] = {}
    values: dict[ServedMetric, ServedValue] = {}
    for metric in ServedMetric:
        target = raw[metric] if known else None
        settle = DESIRED_REPLICAS_SETTLE if metric is ServedMetric.DESIRED_REPLICAS else 0.0
        state = smooth(memory.smoothed.get(metric), target, now, tau, complete, settle)
        if state is not None:
            smoothed[metric] = state
        served: float | None = None
        if target is not None and state is not None:
            served = float(ceil_pods(state.value)) if metric is ServedMetric.DESIRED_REPLICAS else state.value
        values[metric] = ServedValue(value=served, raw=target, timestamp=agg.oldest_sample_at)

    ranking = rank_pods(agg.pods, default_terms(policy))
    pods = _pod_views(agg, ranking, now)
    view = RuntimeView(
        key=snapshot.key,
        refreshed_at=now,
        window_s=window_s,
        ready_pods=agg.ready,
        fresh_pods=agg.n,
        coverage=agg.coverage,
        complete=complete,
        known=known,
        values=values,
        proposals=rec.proposals,
        winner=rec.winner if known else None,
        pods=pods,
        reason=_reason(snapshot, agg, policy, known, memory),
        consecutive_misses=0 if complete else memory.consecutive_misses + 1,
        current_replicas=snapshot.replicas,
    )
    next_memory = RuntimeMemory(smoothed=smoothed, consecutive_misses=view.consecutive_misses, known=known)
    return view, next_memory
