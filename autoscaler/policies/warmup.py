"""A runtime the adapter has no memory of: served once it is seen whole, and never lowered by a restart.

The hold rules of `decision` ("missing data never lowers a value") work from the memory of earlier refreshes.
An adapter that starts (a restart, a rolling update, a new replica, an OOM kill) has none: with the hot pod's
exporter down and the other pods fresh above `min_coverage`, the first refresh would serve what the cold pods
alone show (desired 3 -> 2 at once), and with every pod fresh the recommendation would drop to its target at
once, skipping the slow fall (`scale_down_tau_s`) it was half-way through. The shipped HPA has no scale-down
window of its own, so either lowers what runs.

So, for a runtime with no memory (docs/design.md, Missing data):

- **Seeded at what runs.** The replica series starts from the runtime's current replicas (the Deployment's
  `spec.replicas`; in a targets file, its listed pods; else its Ready pods): the HPA adopts the
  recommendation, so what runs is the best estimate of what was served before. It then rises at once and
  falls slowly as always.
- **Warming up.** Until every Ready pod is fresh on every signal (the decision's `complete`), nothing is
  served: the API answers 503 as for too little coverage, and the HPA, for which a failing metric means
  "no scale-down", holds.
- **After the grace period** (`warmup_grace_s`, default `max_staleness_s`: a pod not fresh by then would
  count as stale with memory too) `modelmesh_desired_replicas` is served, never below the current replicas
  and never below what it served since (it may rise, not fall), so the HPA can scale up; the other values
  stay 503 until every Ready pod is fresh, because without memory the only number for them is what the
  fresh pods alone show, which is lower than the truth when the missing pod is the hot one.

Once the runtime is complete it is warm: its memory is kept from then on and the usual rules apply. Pure:
the caller keeps the `WarmUp` state and passes `now`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from autoscaler.model import RuntimeSnapshot, RuntimeView, ServedValue
from autoscaler.names import ServedMetric
from autoscaler.policies.aggregation import FRESH, NONE
from autoscaler.policies.decision import RuntimeMemory, decide
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.smoothing import SmoothState

_DESIRED = ServedMetric.DESIRED_REPLICAS
_SHOWN_PODS = 3
"""Pods named in the warming-up explanation; the rest are counted."""


@dataclass(frozen=True, slots=True)
class WarmUp:
    """A runtime not yet warm: since when, and what its unserved refreshes must carry to the next one."""

    since: float
    held_desired: float | None = None  # the replica series served since the grace period ended (may rise only)
    misses: int = 0  # refreshes in a row that were not complete
    warned_no_capacity: bool = False  # the no-capacity warning was logged for this runtime


def grace_s(policy: RuntimePolicy) -> float:
    """Seconds a runtime with no memory waits for every Ready pod before its recommendation is served."""
    return policy.max_staleness_s if policy.warmup_grace_s is None else policy.warmup_grace_s


def replica_floor(snapshot: RuntimeSnapshot) -> int:
    """What runs: the Deployment's replicas (in a targets file, its listed pods), else the Ready pods."""
    if snapshot.replicas is not None:
        return snapshot.replicas
    return sum(1 for pod in snapshot.pods if pod.ready)


def seed_memory(floor: int, warm: WarmUp, now: float) -> RuntimeMemory:
    """The memory a runtime without one starts from: the replica series at what runs (or at what was served
    since the grace period, if more), nothing else. `known=True`: the seed is not "data back after a gap"."""
    start = max(float(floor), warm.held_desired or 0.0)
    smoothed = {_DESIRED: SmoothState(start, now)} if start > 0.0 else {}
    return RuntimeMemory(smoothed=smoothed, consecutive_misses=warm.misses, known=True,
                         warned_no_capacity=warm.warned_no_capacity)


def decide_remembering(
    snapshot: RuntimeSnapshot,
    policy: RuntimePolicy,
    memory: RuntimeMemory | None,
    warm: WarmUp | None,
    now: float,
    window_s: float,
) -> tuple[RuntimeView, RuntimeMemory | None, WarmUp | None]:
    """`decision.decide` for a runtime with memory; for one without, the warm-up rules of this module.

    Returns the view to serve, the memory to keep (None while warming up: nothing was served from it) and the
    warm-up state to keep (None once warm).
    """
    if memory is not None:
        view, kept = decide(snapshot, policy, memory, now, window_s)
        return view, kept, None
    warm = warm or WarmUp(since=now)
    floor = replica_floor(snapshot)
    view, seeded = decide(snapshot, policy, seed_memory(floor, warm, now), now, window_s)
    if view.complete:
        return view, seeded, None
    left = grace_s(policy) - (now - warm.since)
    state = replace(warm, misses=view.consecutive_misses, warned_no_capacity=seeded.warned_no_capacity)
    if left > 0.0:
        why = (f"warming up: the adapter has no memory of this runtime and {_unseen(view)}; served once every "
               f"ready pod is fresh, or in {left:.0f} s (warmup_grace_s) with {_DESIRED.value} not below the "
               f"current {floor} replicas")
        return _served_only(view, why, ()), None, state
    series = seeded.smoothed.get(_DESIRED)
    if series is not None:
        state = replace(state, held_desired=series.value)
    why = (f"warming up: grace period over and {_unseen(view)}; {_DESIRED.value} served, not below the current "
           f"{floor} replicas and never falling; the other values stay unknown (503) until every ready pod is "
           "fresh (without memory only the fresh pods' share of the load is known)")
    return _served_only(view, why, (_DESIRED,)), None, state


def _unseen(view: RuntimeView) -> str:
    """Which Ready pods lack which signal, e.g. "3 of 4 ready pods fresh (pod-0: gpu stale, requests stale)"."""
    lacking = []
    for pod in view.pods:
        if not pod.ready:
            continue
        bad = [f"{signal} {state}" for signal, state in pod.signals if state not in (FRESH, NONE)]
        if bad or not pod.fresh:
            lacking.append(f"{pod.name}: {', '.join(bad) or 'no data'}")
    shown = "; ".join(lacking[:_SHOWN_PODS]) + (f"; {len(lacking) - _SHOWN_PODS} more" if len(lacking) > _SHOWN_PODS
                                                else "")
    if not view.ready_pods:
        return "no pod is ready"
    return f"{view.fresh_pods} of {view.ready_pods} ready pods fresh" + (f" ({shown})" if shown else "")


def _served_only(view: RuntimeView, why: str, served: tuple[ServedMetric, ...]) -> RuntimeView:
    """The view with every value but `served` unknown (503); not known at all when nothing is served."""
    values = {
        metric: value if metric in served else ServedValue(None, value.raw, value.timestamp)
        for metric, value in view.values.items()
    }
    known = view.known and any(values[m].value is not None for m in served if m in values)
    held = dict(view.held)
    for metric in ServedMetric:
        if metric not in served:
            held[metric.value] = "warming up: unknown (503) until every ready pod is fresh"
    reason = "; ".join(part for part in (why, view.reason) if part)
    if view.known and not known:
        reason += "; values unknown (503), HPA holds"
    return replace(view, values=values, known=known, complete=False, winner=view.winner if known else None,
                   held=held, reason=reason, warming_up=why)
