"""One runtime, one refresh: snapshot + policy + memory → the view the API serves, and the next memory.

This is the composition the refresh loop calls per runtime: aggregate, recommend, smooth with the hold
rules, rank (docs/design.md). It is pure: `now` comes from the caller, and the smoothing memory is passed in
and handed back, never kept here.

Rules, in order (freshness is per pod and per signal, see `aggregation`):
- **unknown** (`known=False`, every value None, the API answers 503 and the HPA holds): the source is down,
  no pod is Ready, or fewer than `min_coverage` of the Ready pods have fresh load data. The memory keeps its
  values (the decay clock is restarted, see `smoothing`) so that served values resume from where they were.
- **a signal under coverage** (fresh on fewer than `min_coverage` of the Ready pods, or on none although
  the runtime reported it before): the values that use it are unknown (503 for that metric), their memory
  is kept, and the term that reads it keeps its last proposal.
- **a signal missing on some Ready pod** (stale, or absent while others report it): the values that use it
  may rise but not fall, and so may the term that reads it. `modelmesh_desired_replicas` uses every signal
  of its terms, so it falls only when all of them are complete.
- **complete**: values rise at once and fall with time constant `scale_down_tau_s`.

Each value's `n` is the number of Ready pods with its signal fresh: pods we cannot see add no invented
load, and the hold rule stops the smaller sum from lowering anything while they are missing. A signal the
runtime never had (no GPU anywhere, say) makes that one metric unknown and that term propose nothing; the
other metrics are still served. While neither capacity term can propose, the recommendation never falls
below the Ready pods, and the view carries a warning naming the setting to add (logged once per runtime).
The recommendation and the smoothing state stay within the bounds (`min_replicas`/`max_replicas`, with the
HPA's filled in by the caller: `policy.with_hpa_bounds`). `modelmesh_desired_replicas` is served as the
smoothed recommendation rounded up (see `smoothing`).

Pods are ranked on every refresh, known or not, from each Ready pod's last good sample, so /debug can
always show them; whoever writes deletion costs should act only on known views.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from autoscaler.model import RuntimeSnapshot, RuntimeView, ServedValue
from autoscaler.names import ServedMetric
from autoscaler.policies.aggregation import Aggregate
from autoscaler.policies.podviews import examine_pods
from autoscaler.policies.policy import RuntimePolicy, lower_bound
from autoscaler.policies.ranking import WeightedTerm, default_terms
from autoscaler.policies.recommendation import NO_CAPACITY_SETTING, SIGNAL_OF, Recommendation, ceil_pods, recommend
from autoscaler.policies.signals import SIGNAL_CACHE, SIGNAL_GPU, SIGNAL_QUEUE, SIGNAL_REQUESTS, SIGNALS, SignalStats
from autoscaler.policies.slots import slot_builder
from autoscaler.policies.smoothing import DESIRED_REPLICAS_SETTLE, SmoothState, smooth

log = logging.getLogger(__name__)

VALUE_SIGNAL: Final = {
    ServedMetric.GPU_BUSY: SIGNAL_GPU,
    ServedMetric.REQUEST_LOAD: SIGNAL_REQUESTS,
    ServedMetric.CACHE_PRESSURE: SIGNAL_CACHE,
}
"""The one signal each served value other than the replica count uses."""


@dataclass(frozen=True, slots=True)
class RuntimeMemory:
    """What one runtime's decision carries to the next refresh; `decide` returns a new one."""

    smoothed: Mapping[ServedMetric, SmoothState] = field(default_factory=dict)
    consecutive_misses: int = 0  # refreshes in a row that were not complete
    known: bool = False  # whether the last view was served at all
    proposals: Mapping[str, int] = field(default_factory=dict)  # each term's last proposal, for holds
    seen: frozenset[str] = frozenset()  # signals the runtime has reported: absent now means missing
    warned_no_capacity: bool = False  # the no-capacity warning was logged for this runtime


_NO_MEMORY: Final = RuntimeMemory()
"""A runtime's memory before its first refresh (immutable, so one object serves every runtime)."""

_METRICS: Final = tuple(ServedMetric)


_DESIRED: Final = ServedMetric.DESIRED_REPLICAS
_PLAN: Final = tuple(
    (metric, VALUE_SIGNAL.get(metric), DESIRED_REPLICAS_SETTLE if metric is _DESIRED else 0.0) for metric in _METRICS
)
"""Per served metric, in the order views list them: the signal it uses (None: the replica count's) and the
settle band of its smoothing."""

_ALL_SIGNALS: Final = frozenset(SIGNALS)

_view: Final = slot_builder(RuntimeView, (
    "key", "refreshed_at", "window_s", "ready_pods", "fresh_pods", "coverage", "complete", "known", "values",
    "proposals", "winner", "pods", "reason", "consecutive_misses", "current_replicas", "signal_coverage", "held",
    "warnings", "bounds", "warming_up",
))
_value: Final = slot_builder(ServedValue, ("value", "raw", "timestamp"))
_memory: Final = slot_builder(RuntimeMemory, (
    "smoothed", "consecutive_misses", "known", "proposals", "seen", "warned_no_capacity"))


_DESCRIBED: Final = (("GPU busy", SIGNAL_GPU), ("request rate", SIGNAL_REQUESTS), ("cache state", SIGNAL_CACHE))
"""The signals `_reason` names when no fresh pod reports them, in words."""


def _no_capacity_warning(key: object) -> str:
    return (
        f"runtime {key}: no capacity signal (no pod reports a GPU and {NO_CAPACITY_SETTING} is not set); "
        f"the recommendation never falls below the Ready pods. Set {NO_CAPACITY_SETTING} (config file or "
        f"annotation autoscaler.modelmesh.io/{NO_CAPACITY_SETTING.replace('_', '-')}) to let it scale down"
    )


def _reason(
    snapshot: RuntimeSnapshot, agg: Aggregate, policy: RuntimePolicy, known: bool, memory: RuntimeMemory,
    held: Mapping[str, str], by_signal: Mapping[str, SignalStats],
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
    for signal in SIGNALS:
        stats = by_signal[signal]
        # Load signals share the stale pods counted above; say only what those do not explain.
        extra = stats.missing if signal == SIGNAL_GPU else stats.missing - missing
        if extra > 0:  # (a signal with missing pods is present)
            parts.append(f"{signal} missing on {stats.missing} of {agg.ready} ready pods; holding what uses it")
    parts.extend(f"{what} held: {why}" for what, why in held.items())
    absent = ""
    for what, signal in _DESCRIBED:  # a loop, not a comprehension: this runs for every runtime, known ones too
        stats = by_signal[signal]
        if stats.fresh + stats.missing <= 0:  # not present
            absent = f"{absent}, {what}" if absent else what
    if absent:
        parts.append("no fresh pod reports " + absent)
    return "; ".join(parts) if parts else ""


def decide(
    snapshot: RuntimeSnapshot,
    policy: RuntimePolicy,
    memory: RuntimeMemory | None,
    now: float,
    window_s: float,
) -> tuple[RuntimeView, RuntimeMemory]:
    """Decide one runtime for the refresh at `now`; `window_s` is the aggregation window the API reports.

    Written for its fixed cost per runtime (at 5,000 runtimes of 2 pods that is nearly all of a refresh):
    frozen results built through their slots (`slots`), the per-signal stats read once, the policy's ranking
    terms found by identity, the pods aggregated, ranked and viewed in two passes (`podviews.examine_pods`).
    `tests/policies/plain_decision.py` keeps the plain version it replaced, and `test_fast_path` checks on
    random runtimes that both decide the same, refresh after refresh.
    """
    memory = memory or _NO_MEMORY
    agg, pods = examine_pods(snapshot.pods, policy, now, memory.seen, _policy_terms(policy))
    rec = recommend(agg, policy, memory.proposals)
    ready, n = agg.ready, agg.n
    min_coverage = policy.min_coverage
    known = snapshot.source_ok and ready > 0 and agg.coverage >= min_coverage
    by_signal = agg.signals  # every signal of SIGNALS (`Aggregate.signals`)
    gpu_stats, rps_stats = by_signal[SIGNAL_GPU], by_signal[SIGNAL_REQUESTS]
    queue_stats, cache_stats = by_signal[SIGNAL_QUEUE], by_signal[SIGNAL_CACHE]
    # A signal the runtime does not have misses on no pod, so "complete where present" is "misses nowhere".
    desired_complete = (
        known and n == ready and gpu_stats.missing == 0 and queue_stats.missing == 0
        and cache_stats.missing == 0 and (policy.target_rps_per_pod is None or rps_stats.missing == 0)
    )
    complete = desired_complete and rps_stats.missing == 0

    request_rate = agg.request_rate
    raw = {
        _DESIRED: float(rec.desired),
        ServedMetric.GPU_BUSY: agg.gpu_busy,
        ServedMetric.REQUEST_LOAD: None if request_rate is None else rps_stats.fresh * request_rate,
        ServedMetric.CACHE_PRESSURE: agg.cache_pressure,
    }
    tau = policy.scale_down_tau_s
    before = memory.smoothed
    oldest = agg.oldest_sample_at
    smoothed: dict[ServedMetric, SmoothState] = {}
    values: dict[ServedMetric, ServedValue] = {}
    held: dict[str, str] = {f"{term} proposal": why for term, why in rec.held.items()} if rec.held else {}
    for metric, signal, settle in _PLAN:
        if signal is None:
            usable, may_fall = known, desired_complete
        else:
            stats = by_signal[signal]
            usable = known and stats.fresh > 0 and stats.coverage >= min_coverage
            may_fall = usable and stats.missing == 0 and n == ready
            if known and not usable and stats.fresh + stats.missing > 0:  # present, under coverage
                held[metric.value] = (f"{signal} fresh on {stats.fresh} of {ready} ready pods "
                                      f"(< {min_coverage:.0%}); unknown (503), memory kept")
        target = raw[metric] if usable else None
        state = smooth(before.get(metric), target, now, tau, may_fall, settle)
        served: float | None = None
        if state is not None:
            if signal is None:
                state = _capped(state, policy)
            smoothed[metric] = state
            if target is not None:
                if usable and not may_fall and target < state.value:
                    held.setdefault(metric.value, "data missing on some ready pod; may rise, not fall")
                served = float(ceil_pods(state.value)) if signal is None else state.value
        values[metric] = _value(served, target, oldest)

    warnings: tuple[str, ...] = ()
    if known and rec.no_capacity:
        warnings = (_no_capacity_warning(snapshot.key),)
        if not memory.warned_no_capacity:
            log.warning("%s", warnings[0])

    consecutive_misses = 0 if complete else memory.consecutive_misses + 1
    view = _view(
        snapshot.key,  # key
        now,  # refreshed_at
        window_s,
        ready,  # ready_pods
        n,  # fresh_pods
        agg.coverage,
        complete,
        known,
        values,
        rec.proposals,
        rec.winner if known else None,  # winner
        pods,
        _reason(snapshot, agg, policy, known, memory, held, by_signal),
        consecutive_misses,
        snapshot.replicas,  # current_replicas
        _signal_coverage(by_signal),
        held,
        warnings,
        (lower_bound(policy), policy.max_replicas),  # bounds
        "",  # warming_up: set by the warm-up step (policies/warmup.py) for a runtime with no memory
    )
    next_memory = _memory(
        smoothed,
        consecutive_misses,
        known,
        _remembered(rec) if known else memory.proposals,  # proposals
        _seen(memory.seen, by_signal),
        memory.warned_no_capacity or bool(warnings),  # warned_no_capacity
    )
    return view, next_memory


def _signal_coverage(by_signal: Mapping[str, SignalStats]) -> dict[str, float]:
    """The coverage of each signal the runtime has (present), for the view; a loop, not a comprehension,
    as it runs for every runtime."""
    coverage: dict[str, float] = {}
    for signal, stats in by_signal.items():
        if stats.fresh + stats.missing > 0:
            coverage[signal] = stats.coverage
    return coverage


def _seen(before: frozenset[str], by_signal: Mapping[str, SignalStats]) -> frozenset[str]:
    """The signals reported so far: the same set (object) once no new one appears, as on most refreshes."""
    if before is _ALL_SIGNALS:  # (an identity test: equal frozensets would still be compared element-wise)
        return before
    now_fresh = {s for s, st in by_signal.items() if st.fresh > 0}
    if now_fresh <= before:
        return before
    seen = before | now_fresh
    return _ALL_SIGNALS if seen == _ALL_SIGNALS else seen


_TERMS_BY_ID: dict[int, tuple[RuntimePolicy, tuple[WeightedTerm, ...]]] = {}


def _policy_terms(policy: RuntimePolicy) -> tuple[WeightedTerm, ...]:
    """`default_terms(policy)`, made once per policy object rather than once per runtime and refresh, and
    found by the policy's identity: a refresh hands the same policy object to a runtime every time
    (`with_hpa_bounds` is cached), and hashing a 16-field policy costs more than the ranking of a small
    runtime. The entry keeps its policy alive, so an id is never reused while cached. Sized for one policy
    per runtime of a 65,536-runtime fleet, well under 1 KiB each; more only cost rebuilding."""
    hit = _TERMS_BY_ID.get(id(policy))
    if hit is not None and hit[0] is policy:
        return hit[1]
    terms = default_terms(policy)
    if len(_TERMS_BY_ID) >= 65_536:
        _TERMS_BY_ID.clear()
    _TERMS_BY_ID[id(policy)] = (policy, terms)
    return terms


def _remembered(rec: Recommendation) -> dict[str, int]:
    """The term proposals to hold next time: this refresh's (after holds), for the terms that proposed
    (a loop rather than a comprehension: it runs for every known runtime)."""
    remembered: dict[str, int] = {}
    proposals = rec.proposals
    for term in SIGNAL_OF:
        value = proposals.get(term)
        if value is not None:
            remembered[term] = value
    return remembered


def _capped(state: SmoothState, policy: RuntimePolicy) -> SmoothState:
    """The replica smoothing state never rises above the upper bound (§6: a fall from far above the cap
    would otherwise take `tau * ln(value / cap)` before the HPA sees any change)."""
    cap = policy.max_replicas
    if cap is None or state.value <= cap:
        return state
    return SmoothState(float(cap), state.updated_at)
