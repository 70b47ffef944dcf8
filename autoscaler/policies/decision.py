"""One runtime, one refresh: snapshot + policy + memory → the view the API serves, and the next memory.

This is the composition the refresh loop calls per runtime: aggregate, recommend, smooth with the hold
rules, rank (docs/design.md). It is pure: `now` comes from the caller, and the smoothing memory is passed in
and handed back, never kept here (`runtime_memory`).

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

Each value's `n` is the number of Ready pods with its signal fresh, and of those whose signal is held (stale),
which count at their last good value while it is at most `HELD_SAMPLE_S` old (`Aggregate.gpu_pods`, `.rate_pods`):
so a gap that short neither raises a power mean (left out, idle pods gone raised it) nor lowers it, and the value
moves only with the fresh pods. The cache pressure and the cache term's `n` are the fresh pods' alone (a stale
pod's last room is no room now), so a gap may raise them. Pods we cannot see at all (never read, or a signal with
no last value: the sources keep a GPU busy gone from a pod still read at its last good one, `sources.held_gpu`)
add no invented load, and the hold rule stops the smaller sum from lowering anything while they are missing.
A signal the runtime never had (no GPU anywhere, say) makes that one metric unknown and that term propose nothing; the
other metrics are still served. A runtime whose Ready pods all say they have no GPU collector (`--no-gpu`)
forgets the GPU it had, its last GPU proposal included (`gpu_forgetting`, which logs it: one of the two lines a
decision says itself, once per runtime as its pods move); one none of whose Ready pods has reported per-model use
for `target_lru_age_s` forgets that, its last cache proposal included (`models_forgetting`, the other line).
While neither capacity term can propose, the recommendation never falls below the Ready pods, and the view
carries a warning naming the setting to add (logged once per runtime). The view also warns while the pods'
exporters keep per-model use for less than `target_lru_age_s` (`recency_horizon`; logged once per change, and the
cache term holds in `recommend`). The recommendation and the smoothing state stay within the bounds
(`min_replicas`/`max_replicas`, with the HPA's filled in by the caller:
`policy.with_hpa_bounds`).
`modelmesh_desired_replicas` is served as the smoothed recommendation rounded up (see `smoothing`).

Pods are ranked on every refresh, known or not, from each Ready pod's last good sample, so /debug can
always show them; whoever writes deletion costs should act only on known views.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from autoscaler.model import PodSample, PodViews, RuntimeSnapshot, RuntimeView, ServedValue
from autoscaler.names import ServedMetric
from autoscaler.policies.gpu_forgetting import NO_GPU_COLLECTOR, has_no_gpu, remembers_gpu
from autoscaler.policies.models_forgetting import forgets_models
from autoscaler.policies.not_fresh_words import reason_words
from autoscaler.policies.podviews import examine_pods
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.policy_terms import terms_and_bounds
from autoscaler.policies.ranking import WeightedTerm
from autoscaler.policies.recommendation import recommend
from autoscaler.policies.runtime_aggregate import Aggregate
from autoscaler.policies.runtime_memory import (
    NO_MEMORY,
    RuntimeMemory,
    next_seen,
    remembered,
    without_gpu,
    without_models,
)
from autoscaler.policies.served_values import desired_value, signal_values
from autoscaler.policies.signal_profile import DESCRIBED, PROFILES, work_out_profile
from autoscaler.policies.signals import SIGNAL_GPU, SIGNALS, SignalStats
from autoscaler.policies.slots import slot_builder
from autoscaler.policies.smoothing import SmoothState
from autoscaler.policies.surge_pods import NO_SURGE, counted_as_surge, surge_pod_words, surge_pods, surge_words
from autoscaler.policies.unready_pods import (
    HELD_KEY_PREFIX,
    NO_CLOCKS,
    UnreadyClocks,
    counted_as_ready,
    held_reasons,
    held_unready,
    left_out_words,
    say_left_out,
    shown_unready,
)
from autoscaler.policies.view_warnings import no_capacity_signal, view_warnings

_NOT_FALLING: Final[dict[str, dict[str, float | str]]] = {}
"""No value falling slowly (`RuntimeView.falling`): one shared empty mapping, never written to."""
_NO_NAMES: Final[frozenset[str]] = frozenset()
"""No pod held not Ready (`RuntimeMemory.unready`): one shared empty set."""
_AS_KUBERNETES_SAYS: Final[dict[str, tuple[bool, str]]] = {}
"""No pod counted otherwise than its readiness (`RuntimeView.pods_counted`): one shared empty mapping, never
written to."""

_MAY_RISE: Final = "data not fresh on some ready pod; may rise, not fall"
"""Why a value is held where some Ready pod is stale or misses a signal it uses (its own words, in `reason` and
the terms' `held`, say which: `not_fresh_words`)."""
_MAY_RISE_UNREADY: Final = "a pod not Ready held as missing data (its own line says which); may rise, not fall"
"""Why a value is held where every Ready pod is fresh and the hold is a pod not Ready's (`unready_pods`)."""
SOURCE_DOWN: Final = "metric source down"
"""How every reason of a refresh whose source failed begins: the cause first (logs, /debug, 503 messages)."""
DISCOVERY_DOWN: Final = ("pod discovery out of date (the Kubernetes API's pod watch or Deployment read of the "
                         "runtime's namespace fails; its pods' metrics are still read)")
"""How the reason begins instead while pod discovery is out of date for the runtime's namespace
(`RuntimeSnapshot.discovery_ok`): the exporters (or Prometheus) may all answer meanwhile, and "metric source down"
sent an operator to them."""
NOT_SERVED_CAUSES: Final = (SOURCE_DOWN, DISCOVERY_DOWN)
"""The causes a reason begins with where nothing about the pods decides it (`reason.startswith(...)`)."""


def down_cause(snapshot: RuntimeSnapshot) -> str:
    """Why a snapshot with `source_ok` False is not served: pod discovery out of date, else the metric source."""
    return SOURCE_DOWN if snapshot.discovery_ok else DISCOVERY_DOWN


_view: Final = slot_builder(RuntimeView, (
    "key", "refreshed_at", "window_s", "ready_pods", "fresh_pods", "coverage", "complete", "known", "values",
    "proposals", "winner", "pods", "reason", "consecutive_misses", "current_replicas", "signal_coverage", "held",
    "warnings", "bounds", "warming_up", "fresh_sample_at", "being_deleted", "costs_on_pods", "falling",
    "pods_counted",
))
_memory: Final = slot_builder(RuntimeMemory, (
    "smoothed", "consecutive_misses", "known", "proposals", "seen", "warned_no_capacity", "models_reported_at",
    "unready", "unready_clocks"))


def _reason(
    snapshot: RuntimeSnapshot, agg: Aggregate, policy: RuntimePolicy, known: bool, memory: RuntimeMemory,
    held: Mapping[str, str], by_signal: Mapping[str, SignalStats],
) -> str:
    """Why values are unknown or held, in words for logs and /debug; empty when nothing is wrong."""
    if not snapshot.source_ok:
        return f"{down_cause(snapshot)}; values unknown (503), HPA holds"
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
        # Stale and missing apart, as /debug's pods show them; the stale pods counted above are not said again
        # (a load signal is stale on those pods exactly: only the GPU, on a clock of its own, may say more).
        if by_signal[signal].missing > (0 if signal == SIGNAL_GPU else missing):
            parts.extend(reason_words(agg, signal))
    parts.extend(f"{what} held: {why}" for what, why in held.items())
    absent = ""
    for what, signal in DESCRIBED:  # a loop, not a comprehension: this runs for every runtime, known ones too
        stats = by_signal[signal]
        if stats.fresh + stats.missing <= 0:  # not present
            if signal == SIGNAL_GPU and has_no_gpu(stats, agg.ready):
                parts.append(NO_GPU_COLLECTOR)  # the pods say so: nothing to wait for
                continue
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
    running: float | None = None,
) -> tuple[RuntimeView, RuntimeMemory]:
    """Decide one runtime for the refresh at `now`; `window_s` is the aggregation window the API reports.

    `now` is the wall clock, which freshness is judged on (samples carry Unix times); `running` is the clock
    the values decay on (`autoscaler.running_clock`: time that passed with the adapter refreshing, which a
    step of the wall clock or a stopped adapter does not advance), and what the memory's smoothing states'
    `updated_at` (`SmoothState`) count in. None: `now` (one clock, as in the simulator, whose trace time is both).

    Written for its fixed cost per runtime (at 5,000 runtimes of 2 pods that is nearly all of a refresh):
    frozen results built through their slots (`slots`), the per-signal stats read once and what follows
    from them worked out once per shared stats mapping (`signal_profile`), the policy's ranking terms and bounds
    found by identity, the pods aggregated, ranked and viewed in two passes (`podviews.examine_pods`), and
    the usual complete runtime decided without the calls that only say "nothing is wrong" (`_reason`).
    `tests/policies/plain_decision.py` keeps the plain version it replaced, and `test_fast_path` checks on
    random runtimes that both decide the same, refresh after refresh.
    """
    memory = memory or NO_MEMORY
    policy_terms, bounds = terms_and_bounds(policy)
    agg, pods = examine_pods(snapshot.pods, policy, now, memory.seen, policy_terms)
    unready: tuple[PodSample, ...] = ()
    unready_names = left_out = _NO_NAMES
    unready_clocks = NO_CLOCKS
    at = now if running is None else running
    if agg.ready != len(snapshot.pods) or memory.unready_clocks:  # rare: some pod not Ready, or back from it
        agg, pods, unready, unready_names, unready_clocks, left_out = _hold_unready(
            snapshot, policy, memory, now, at, policy_terms, agg, pods)
    surge = NO_SURGE
    replicas = snapshot.replicas
    if replicas is not None and agg.ready > replicas:  # a rollout's new pods, Ready before the old go (rare)
        agg, surge = _leave_out_surge(snapshot, policy, memory, now, policy_terms, agg, unready_names, left_out)
    if (agg.signals[SIGNAL_GPU].absent and snapshot.source_ok and has_no_gpu(agg.signals[SIGNAL_GPU], agg.ready)
            and remembers_gpu(memory.seen, memory.proposals, memory.smoothed)):  # rare: once, as its pods move
        memory = without_gpu(snapshot.key, memory)
    ready, n = agg.ready, agg.n
    min_coverage = policy.min_coverage
    known = snapshot.source_ok and ready > 0 and agg.coverage >= min_coverage
    models_reported_at = memory.models_reported_at
    if agg.models_in_use is not None or (snapshot.models_unread and models_reported_at is not None):
        models_reported_at = at  # reported, or unread (a failing query ages nothing: `models_forgetting`)
    elif models_reported_at is not None and forgets_models(memory.seen, models_reported_at, known, at,
                                                           policy.target_lru_age_s):  # rare: once, as it goes
        memory = without_models(snapshot.key, memory, at - models_reported_at, policy.target_lru_age_s)
        models_reported_at = None
    rec = recommend(agg, policy, memory.proposals)
    by_signal = agg.signals  # every signal of SIGNALS (`Aggregate.signals`)
    profile = PROFILES.get(id(by_signal))
    if profile is None or profile.by_signal is not by_signal:
        profile = work_out_profile(by_signal)
    _, signal_coverage, reported_signals, fixed_complete, rps_complete, capacity_signals_present = profile
    # A signal the runtime does not have misses on no pod, so "complete where present" is "misses nowhere".
    pods_complete = n == ready and not unready  # every Ready pod fresh, and no pod held as missing data
    desired_complete = (
        known and pods_complete and fixed_complete and (rps_complete or policy.target_rps_per_pod is None)
    )
    complete = desired_complete and rps_complete

    held: dict[str, str] = {f"{term} proposal": why for term, why in rec.held.items()} if rec.held else {}
    smoothed: dict[ServedMetric, SmoothState] = {}
    values: dict[ServedMetric, ServedValue] = {}  # in view order: the replica count, then one value per signal
    may_rise = _MAY_RISE_UNREADY if n == ready and unready else _MAY_RISE
    desired_value(float(rec.desired) if known else None, desired_complete, may_rise, policy, memory.smoothed, at,
                   agg.oldest_sample_at, held, smoothed, values)
    signal_values(agg, known, pods_complete, may_rise, min_coverage, memory.smoothed, at, policy.scale_down_tau_s,
                   held, smoothed, values)
    pods_counted = _AS_KUBERNETES_SAYS
    if unready:
        held_pods = held_reasons(unready, at, unready_clocks)
        held.update(held_pods)
        pods_counted = {key[len(HELD_KEY_PREFIX):]: (True, why) for key, why in held_pods.items()}
    if left_out or surge:  # rare: say on each pod why `ready_pods` does not count it
        pods_counted = _left_out(pods_counted, left_out, at, unready_clocks, surge, agg.ready, replicas)

    warnings: tuple[str, ...] = ()
    no_capacity = known and rec.no_capacity and no_capacity_signal(agg, policy)
    horizon = agg.recency_horizon_s
    short_horizon = horizon is not None and horizon < policy.target_lru_age_s
    if no_capacity or short_horizon:  # rare
        warnings = view_warnings(snapshot.key, no_capacity, horizon if short_horizon else None,
                                  policy.target_lru_age_s)

    if complete and capacity_signals_present and not held and (memory.known or not memory.smoothed):
        reason = ""  # what `_reason` says when nothing is wrong, without the call
    else:
        reason = _reason(snapshot, agg, policy, known, memory, held, by_signal)
    if rec.explained and known:  # the cache need decided: say so, in /debug and the logs
        reason = f"{reason}; {rec.explained}" if reason else rec.explained
    if surge:  # say which pods the values leave out, and why
        words = surge_words(surge, agg.ready + len(surge), replicas)  # type: ignore[arg-type]  # surge: known
        reason = f"{reason}; {words}" if reason else words
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
        reason,
        consecutive_misses,
        snapshot.replicas,  # current_replicas
        signal_coverage,
        held,
        warnings,
        bounds,
        "",  # warming_up: set by the warm-up step (policies/warmup.py) for a runtime with no memory
        agg.fresh_sample_at,
        False,  # being_deleted: set by the warm-up step for a runtime being deleted without Ready pods
        {},  # costs_on_pods: set by the refresh from the deletion-cost writer (`RankingWrites.on_pods`)
        _NOT_FALLING,  # falling: set by the refresher for a value in the middle of a slow fall (`slow_fall`)
        pods_counted,
    )
    seen = next_seen(memory.seen, reported_signals, agg)
    next_memory = _memory(
        smoothed,
        consecutive_misses,
        known,
        remembered(rec.proposals) if known else memory.proposals,  # proposals
        seen,
        memory.warned_no_capacity or no_capacity,  # warned_no_capacity
        models_reported_at,
        unready_names,
        unready_clocks,
    )
    return view, next_memory


def _hold_unready(
    snapshot: RuntimeSnapshot, policy: RuntimePolicy, memory: RuntimeMemory, now: float, at: float,
    policy_terms: tuple[WeightedTerm, ...], agg: Aggregate, pods: PodViews,
) -> tuple[Aggregate, PodViews, tuple[PodSample, ...], frozenset[str], UnreadyClocks, frozenset[str]]:
    """For a runtime with a pod not Ready (`unready_pods`): a pod that was serving is held as a Ready pod missing
    its data, so the aggregate and the pod views are made again with it counted (and shown not Ready); the pod
    held until now and left out is said once. The aggregate, the pod views, the pods held, their names, the
    hold's clocks and the Ready pods counted as not Ready (back past the bound with no fresh rate read); `agg`
    and `pods` as given when no pod is held or left out."""
    unready, unready_clocks, left_out = held_unready(snapshot.pods, now, at, memory.unready_clocks,
                                                     policy.max_staleness_s)
    unready_names = _NO_NAMES
    if unready or left_out:
        unready_names = frozenset(pod.name for pod in unready) if unready else _NO_NAMES
        agg, pods = examine_pods(counted_as_ready(snapshot.pods, unready_names, left_out), policy, now,
                                 memory.seen, policy_terms)
        pods = shown_unready(pods, unready_names)
    if memory.unready_clocks:  # a pod held until now and left out past the bound: said once
        say_left_out(snapshot.key, memory.unready_clocks, unready_clocks, at)
    return agg, pods, unready, unready_names, unready_clocks, left_out


def _leave_out_surge(
    snapshot: RuntimeSnapshot, policy: RuntimePolicy, memory: RuntimeMemory, now: float,
    policy_terms: tuple[WeightedTerm, ...], agg: Aggregate, unready_names: frozenset[str], left_out: frozenset[str],
) -> tuple[Aggregate, tuple[str, ...]]:
    """For a runtime with more Ready pods than its Deployment's replicas (`surge_pods`): the aggregate without the
    idle pods beyond the replicas, and their names; `agg` as given when none is idle.

    The pods held (`unready_names`) stay counted and those `left_out` by the hold (Ready again with no fresh rate
    read past its bound) stay left out, and are no surge candidates: made again from the snapshot, the aggregate
    counted a crash-looping pod left out as a stale Ready pod again, which held the values for good mid-rollout.

    The pod views stay those with every pod counted: an idle pod's share of the power-mean sum is 0 either way, and
    ranked among the pods, a surge pod is written its deletion cost as the least needed (left out of the ranking, it
    kept the cost last written on it, however high, while the writer said the costs were on the pods)."""
    candidates = counted_as_ready(snapshot.pods, _NO_NAMES, left_out) if left_out else snapshot.pods
    surge = surge_pods(candidates, agg.ready, snapshot.replicas)
    if surge:
        counted = counted_as_surge(snapshot.pods, surge)
        if unready_names or left_out:
            counted = counted_as_ready(counted, unready_names, left_out)
        agg = examine_pods(counted, policy, now, memory.seen, policy_terms)[0]
    return agg, surge


def _left_out(
    pods_counted: dict[str, tuple[bool, str]], left_out: frozenset[str], at: float, clocks: UnreadyClocks,
    surge: tuple[str, ...], ready: int, replicas: int | None,
) -> dict[str, tuple[bool, str]]:
    """`pods_counted` (the held pods', or the shared empty one) with each Ready pod that `ready_pods` does not
    count, and why: back past the hold's bound with no fresh rate read (`unready_pods`), or a rollout's surge
    (`surge_pods`; `ready` counts the pods the values count, without the surge)."""
    counted = dict(pods_counted)
    for name in left_out:
        counted[name] = (False, left_out_words(name, at, clocks))
    if surge:
        words = surge_pod_words(ready + len(surge), replicas or 0)
        counted.update((name, (False, words)) for name in surge)
    return counted
