"""The decision's previous, plain composition (`decide`, `recommend`), kept as the oracle of the fast one.

`autoscaler.policies.decision.decide` and `autoscaler.policies.recommendation.recommend` were rewritten to cut
their fixed cost per runtime (at 5,000 runtimes it is most of a refresh); these are the versions they
replaced, line for line, so that `test_fast_path.py` can check on random runtimes, refresh after refresh, that
both give equal views and memories. The per-pod work they call (`aggregate`, `rank_pods`, `pod_views`) is the
library's own, checked against its own oracle in `plain_policies`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import replace
from typing import Final

from autoscaler.model import RuntimeSnapshot, RuntimeView, ServedValue
from autoscaler.names import ServedMetric
from autoscaler.policies.aggregation import aggregate
from autoscaler.policies.podviews import pod_views
from autoscaler.policies.policy import RuntimePolicy, lower_bound
from autoscaler.policies.ranking import WeightedTerm, default_terms, rank_pods
from autoscaler.policies.recency_horizon import short_horizon_cause, short_horizon_warning
from autoscaler.policies.recommendation import (
    CACHE,
    GPU,
    MAX_REPLICAS,
    MIN_REPLICAS,
    NO_CAPACITY_SETTING,
    QUEUE,
    READY_PODS,
    REQUESTS,
    SIGNAL_OF,
    TERMS,
    Recommendation,
    ceil_pods,
)
from autoscaler.policies.runtime_aggregate import Aggregate
from autoscaler.policies.runtime_memory import NO_MEMORY, RuntimeMemory
from autoscaler.policies.served_values import VALUE_SIGNAL
from autoscaler.policies.signals import (
    MISSING,
    SIGNAL_CACHE,
    SIGNAL_GPU,
    SIGNAL_MODELS,
    SIGNAL_QUEUE,
    SIGNAL_REQUESTS,
    SIGNALS,
    STALE,
    SignalStats,
)
from autoscaler.policies.smoothing import DESIRED_REPLICAS_SETTLE, SmoothState
from autoscaler.policies.view_warnings import no_capacity_signal
from tests.policies.plain_policies import plain_smooth
from tests.support.policy_readings import request_load, stats_of

_METRICS: Final = tuple(ServedMetric)


def _states(agg: Aggregate, signal: str, state: str, *, fresh_pods_only: bool = False) -> int:
    """The pods whose `signal` is in `state` (`fresh_pods_only`: of the pods whose data is fresh)."""
    return sum(1 for fresh, row in zip(agg.fresh, agg.pod_signals, strict=True)
               if dict(row)[signal] == state and (fresh or not fresh_pods_only))


def _hold(
    term: str, computed: float | None, agg: Aggregate, policy: RuntimePolicy, held: Mapping[str, int],
    why: dict[str, str],
) -> float | None:
    """A term's proposal under the missing-data rules (§6), unrounded where computed this refresh."""
    stats = stats_of(agg, SIGNAL_OF[term])
    last = held.get(term)
    if stats.complete and stats.fresh > 0 and not stats.absent:
        return computed
    if not stats.present and last is None:
        return computed  # the runtime has no such signal (and never had one in memory)
    if stats.fresh == 0 or stats.coverage < policy.min_coverage:
        if last is not None:
            why[term] = (f"{SIGNAL_OF[term]} fresh on {stats.fresh} of {agg.ready} ready pods; "
                         f"keeping the last proposal {last}")
        return None if last is None else float(last)
    if last is not None and (computed is None or computed < last):
        if stats.missing:
            stale, missing = _states(agg, SIGNAL_OF[term], STALE), _states(agg, SIGNAL_OF[term], MISSING)
            said = " and ".join(words for count, words in ((stale, f"stale on {stale}"),
                                                           (missing, f"missing on {missing}")) if count)
            why[term] = f"{SIGNAL_OF[term]} {said} ready pods; may rise, not fall below {last}"
        else:
            why[term] = (f"{SIGNAL_OF[term]} absent on {stats.absent} ready pods (no GPU collector: their load is "
                         f"not in this term); may rise, not fall below {last}")
        return float(last)
    return computed


def plain_recommend(agg: Aggregate, policy: RuntimePolicy, held: Mapping[str, int] | None = None) -> Recommendation:
    """Apply §6 to one aggregate; `held` are the last refresh's proposals (the decision's memory)."""
    held = held or {}
    why: dict[str, str] = {}
    gpu_demand: float | None = None
    if agg.gpu_busy is not None:
        gpu_demand = agg.gpu_pods * agg.gpu_busy / policy.target_gpu_busy
    rps_demand: float | None = None
    if policy.target_rps_per_pod is not None and agg.request_rate is not None:
        rps_demand = agg.rate_pods * agg.request_rate / policy.target_rps_per_pod
    gpu = _hold(GPU, gpu_demand, agg, policy, held, why)
    rps = _hold(REQUESTS, rps_demand, agg, policy, held, why) if policy.target_rps_per_pod is not None else None
    capacity = [d for d in (gpu, rps) if d is not None]
    demand = max(capacity) if capacity else None

    queue: float | None = None
    if agg.saturated > 0:
        anchor = demand if demand is not None else float(agg.saturated)
        queue = anchor + agg.queue_excess_s / policy.queue_drain_s
    queue = _hold(QUEUE, queue, agg, policy, held, why)

    cache: float | None = None
    if agg.cache_full and agg.cache_pressure is not None:
        cache = agg.cache_pods * min(policy.cache_pressure_cap, agg.cache_pressure)
    # The cache need: the pods whose caches hold the copies in use (two of a model at most), ceil(U / C); the
    # pressure term at most cache_pressure_cap times it.
    need: float | None = None
    capped = False
    if agg.models_in_use is not None and agg.pod_capacity:
        need = agg.models_in_use / agg.pod_capacity
        if cache is not None and cache > policy.cache_pressure_cap * need:
            cache, capped = policy.cache_pressure_cap * need, True
        cache = need if cache is None else max(cache, need)
    cache = _hold(CACHE, cache, agg, policy, held, why)
    last = held.get(CACHE)
    short = agg.recency_horizon_s is not None and agg.recency_horizon_s < policy.target_lru_age_s
    if (agg.models_missing > 0 or short) and last is not None and (cache is None or cache < last):
        cause = (f"per-model use missing on {agg.models_missing} of {agg.ready} ready pods" if agg.models_missing
                 else short_horizon_cause(agg.recency_horizon_s or 0.0, policy.target_lru_age_s))
        why.setdefault(CACHE, f"{cause}; may rise, not fall below {last}")
        cache = float(last)

    proposals: dict[str, int | None] = dict.fromkeys(TERMS)
    for term, value in ((GPU, gpu), (REQUESTS, rps), (QUEUE, queue), (CACHE, cache)):
        proposals[term] = None if value is None else ceil_pods(value)
    no_capacity = demand is None
    if no_capacity:
        proposals[READY_PODS] = agg.ready
    proposals[MIN_REPLICAS] = lower_bound(policy)

    desired = max(v for v in proposals.values() if v is not None)
    winner = next(t for t in TERMS if proposals[t] == desired)
    explained = ""
    if winner == CACHE and need is not None and ceil_pods(need) == proposals[CACHE]:
        explained = (f"cache: {agg.models_in_use} copies in use within {policy.target_lru_age_s:g} s need "
                     f"{proposals[CACHE]} pods at {agg.pod_capacity:.4g} models a pod")
    elif winner == CACHE and capped and need is not None:
        explained = (f"cache: every cache is full (pressure {agg.cache_pressure or 0.0:.3g}), held to "
                     f"{policy.cache_pressure_cap:g} x the {ceil_pods(need)} pods that {agg.models_in_use} copies in "
                     f"use within {policy.target_lru_age_s:g} s need at {agg.pod_capacity:.4g} "
                     f"model{'' if agg.pod_capacity == 1 else 's'} a pod (two copies of a model at most)")
    if policy.max_replicas is not None and desired > policy.max_replicas:
        winner, desired = MAX_REPLICAS, policy.max_replicas
    return Recommendation(desired=desired, proposals=proposals, winner=winner, held=why, no_capacity=no_capacity,
                          explained=explained)


def _raw_values(agg: Aggregate, desired: int) -> dict[ServedMetric, float | None]:
    return {
        ServedMetric.DESIRED_REPLICAS: float(desired),
        ServedMetric.GPU_BUSY: agg.gpu_busy,
        ServedMetric.REQUEST_LOAD: request_load(agg),
        ServedMetric.CACHE_PRESSURE: agg.cache_pressure,
    }


def _desired_signals(agg: Aggregate, policy: RuntimePolicy) -> list[str]:
    """The signals the replica recommendation reads: those of its terms that belong to the runtime."""
    used = [SIGNAL_GPU, SIGNAL_QUEUE, SIGNAL_CACHE]
    if policy.target_rps_per_pod is not None:
        used.append(SIGNAL_REQUESTS)
    return [s for s in used if stats_of(agg, s).present]


def _no_capacity_warning(key: object) -> str:
    return (
        f"runtime {key}: no capacity signal (no pod reports a GPU and {NO_CAPACITY_SETTING} is not set); "
        f"the recommendation never falls below the Ready pods. Set {NO_CAPACITY_SETTING} (config file or "
        f"annotation autoscaler.modelmesh.io/{NO_CAPACITY_SETTING.replace('_', '-')}) to let it scale down"
    )


def _reason(
    snapshot: RuntimeSnapshot, agg: Aggregate, policy: RuntimePolicy, known: bool, memory: RuntimeMemory,
    held: Mapping[str, str],
) -> str:
    """Why values are unknown or held, in words for logs and /debug; empty when nothing is wrong."""
    if not snapshot.source_ok:
        cause = "metric source down" if snapshot.discovery_ok else (
            "pod discovery out of date (the Kubernetes API's pod watch or Deployment read of the runtime's namespace "
            "fails; its pods' metrics are still read)")
        return f"{cause}; values unknown (503), HPA holds"
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
    for signal in SIGNALS:
        # The stale pods counted above are not said again: a signal stale on a pod whose data is fresh, and one
        # missing, each as /debug's pods show them.
        alone = _states(agg, signal, STALE, fresh_pods_only=True)
        if alone:
            parts.append(f"{signal} stale on {alone} of {agg.ready} ready pods; holding what uses it")
        if absent_here := _states(agg, signal, MISSING):
            parts.append(f"{signal} missing on {absent_here} of {agg.ready} ready pods; holding what uses it")
    parts.extend(f"{what} held: {why}" for what, why in held.items())
    no_gpu = agg.ready > 0 and stats_of(agg, SIGNAL_GPU).absent == agg.ready
    if not stats_of(agg, SIGNAL_GPU).present and no_gpu:
        parts.append("no ready pod has a GPU collector (its exporter runs with --no-gpu)")
    absent = [
        what
        for what, signal in (("GPU busy", SIGNAL_GPU), ("request rate", SIGNAL_REQUESTS), ("cache state", SIGNAL_CACHE))
        if not stats_of(agg, signal).present and not (signal == SIGNAL_GPU and no_gpu)
    ]
    if absent:
        parts.append("no fresh pod reports " + ", ".join(absent))
    return "; ".join(parts)


def _served(
    metric: ServedMetric, target: float | None, state: SmoothState | None,
) -> float | None:
    if target is None or state is None:
        return None
    return float(ceil_pods(state.value)) if metric is ServedMetric.DESIRED_REPLICAS else state.value


def plain_decide(
    snapshot: RuntimeSnapshot,
    policy: RuntimePolicy,
    memory: RuntimeMemory | None,
    now: float,
    window_s: float,
) -> tuple[RuntimeView, RuntimeMemory]:
    """Decide one runtime for the refresh at `now`; `window_s` is the aggregation window the API reports."""
    memory = memory or NO_MEMORY
    agg = aggregate(snapshot.pods, policy, now, memory.seen)
    if snapshot.source_ok and agg.ready > 0 and stats_of(agg, SIGNAL_GPU).absent == agg.ready:
        # Every Ready pod says it has no GPU collector: the runtime forgets its GPU.
        memory = replace(memory, seen=memory.seen - {SIGNAL_GPU},
                         proposals={t: v for t, v in memory.proposals.items() if t != GPU},
                         smoothed={m: v for m, v in memory.smoothed.items() if m is not ServedMetric.GPU_BUSY})
    known = snapshot.source_ok and agg.ready > 0 and agg.coverage >= policy.min_coverage
    reported_at = memory.models_reported_at
    if agg.models_in_use is not None or (snapshot.models_unread and reported_at is not None):
        reported_at = now  # reported, or the source could not read it: no evidence, the memory does not age
    elif (known and reported_at is not None and now - reported_at >= policy.target_lru_age_s
          and SIGNAL_MODELS in memory.seen):
        # No Ready pod has reported per-model use for a whole window: the runtime forgets it and its cache proposal.
        memory = replace(memory, seen=memory.seen - {SIGNAL_MODELS},
                         proposals={t: v for t, v in memory.proposals.items() if t != CACHE})
        reported_at = None
    rec = plain_recommend(agg, policy, memory.proposals)
    by_signal = {s: stats_of(agg, s) for s in SIGNALS}
    desired_signals = _desired_signals(agg, policy)
    desired_complete = known and agg.n == agg.ready and all(by_signal[s].complete for s in desired_signals)
    complete = desired_complete and all(st.complete for st in by_signal.values() if st.present)

    raw = _raw_values(agg, rec.desired)
    tau = policy.scale_down_tau_s
    smoothed: dict[ServedMetric, SmoothState] = {}
    values: dict[ServedMetric, ServedValue] = {}
    held: dict[str, str] = {f"{term} proposal": why for term, why in rec.held.items()}
    for metric in _METRICS:
        signal = VALUE_SIGNAL.get(metric)
        if signal is None:
            usable, may_fall = known, desired_complete
        else:
            stats = by_signal[signal]
            usable = known and stats.fresh > 0 and stats.coverage >= policy.min_coverage
            may_fall = usable and stats.complete and agg.n == agg.ready
            if known and stats.present and not usable:
                held[metric.value] = (f"{signal} fresh on {stats.fresh} of {agg.ready} ready pods "
                                      f"(< {policy.min_coverage:.0%}); unknown (503), memory kept")
        target = raw[metric] if usable else None
        settle = DESIRED_REPLICAS_SETTLE if metric is ServedMetric.DESIRED_REPLICAS else 0.0
        state = plain_smooth(memory.smoothed.get(metric), target, now, tau, may_fall, settle)
        if metric is ServedMetric.DESIRED_REPLICAS and state is not None:
            state = _capped(state, policy)
        if usable and not may_fall and state is not None and target is not None and target < state.value:
            held.setdefault(metric.value, "data not fresh on some ready pod; may rise, not fall")
        if state is not None:
            smoothed[metric] = state
        values[metric] = ServedValue(value=_served(metric, target, state), raw=target,
                                     timestamp=agg.oldest_sample_at)

    warnings: list[str] = []
    no_capacity = known and rec.no_capacity and no_capacity_signal(agg, policy)
    if no_capacity:
        warnings.append(_no_capacity_warning(snapshot.key))
    if agg.recency_horizon_s is not None and agg.recency_horizon_s < policy.target_lru_age_s:
        warnings.append(short_horizon_warning(snapshot.key, agg.recency_horizon_s, policy.target_lru_age_s))

    ranking = rank_pods(agg.pods, _terms(policy), now)
    pods = pod_views(agg, ranking, now)
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
        reason="; ".join(part for part in (_reason(snapshot, agg, policy, known, memory, held),
                                           rec.explained if known else "") if part),
        consecutive_misses=0 if complete else memory.consecutive_misses + 1,
        current_replicas=snapshot.replicas,
        signal_coverage={s: st.coverage for s, st in by_signal.items() if st.present},
        held=held,
        warnings=tuple(warnings),
        bounds=(lower_bound(policy), policy.max_replicas),
        fresh_sample_at=agg.fresh_sample_at,
    )
    next_memory = RuntimeMemory(
        smoothed=smoothed,
        consecutive_misses=view.consecutive_misses,
        known=known,
        proposals=_remembered(rec, memory) if known else memory.proposals,
        seen=_seen(memory.seen, by_signal, agg),
        warned_no_capacity=memory.warned_no_capacity or no_capacity,
        models_reported_at=reported_at,
    )
    return view, next_memory


def _seen(before: frozenset[str], by_signal: Mapping[str, SignalStats], agg: Aggregate) -> frozenset[str]:
    """The signals reported so far, per-model use among them: the same set (object) once no new one appears,
    as on most refreshes."""
    now_fresh = {s for s, st in by_signal.items() if st.present}
    if agg.models_in_use is not None:
        now_fresh.add(SIGNAL_MODELS)
    return before if now_fresh <= before else before | now_fresh


@functools.lru_cache(maxsize=65_536)
def _terms(policy: RuntimePolicy) -> tuple[WeightedTerm, ...]:
    """The ranking terms of a policy, made once per distinct policy rather than once per runtime and
    refresh (`default_terms` depends on the policy alone). Sized for one policy per runtime (HPA bounds
    make them differ) of a 65,536-runtime fleet, well under 1 KiB each; more only cost rebuilding."""
    return default_terms(policy)


def _remembered(rec: Recommendation, memory: RuntimeMemory) -> dict[str, int]:
    """The term proposals to hold next time: this refresh's (after holds), for the terms that proposed."""
    del memory
    return {term: value for term in SIGNAL_OF if (value := rec.proposals.get(term)) is not None}


def _capped(state: SmoothState, policy: RuntimePolicy) -> SmoothState:
    """The replica smoothing state never rises above the upper bound (§6: a fall from far above the cap
    would otherwise take `tau * ln(value / cap)` before the HPA sees any change)."""
    cap = policy.max_replicas
    if cap is None or state.value <= cap:
        return state
    return SmoothState(float(cap), state.updated_at)
