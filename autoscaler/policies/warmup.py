"""A runtime the adapter has no memory of: served once it is seen whole, and never lowered by a restart.

The hold rules of `decision` ("missing data never lowers a value") work from the memory of earlier refreshes.
An adapter that starts (a restart, a rolling update, a new replica, an OOM kill) has none: with the hot pod's
exporter down and the other pods fresh above `min_coverage`, the first refresh would serve what the cold pods
alone show (desired 3 -> 2, request load 307.9 -> 60 at once), and with every pod fresh the recommendation
would drop to its target at once, skipping the slow fall (`scale_down_tau_s`) it was half-way through. The
shipped HPA has no scale-down window of its own, so either lowers what runs.

So, for a runtime with no memory (docs/design.md, After a restart: warming up):

- **Seeded at what runs.** The replica series starts from the runtime's current replicas (the Deployment's
  `spec.replicas`, or its RuntimeScale's when higher; in a targets file, its listed pods; else its Ready
  pods): the HPA adopts the recommendation, so what runs is the best estimate of what was served before.
  It then rises at once and falls slowly as always.
- **Warming up.** Until every Ready pod is fresh on every signal (the decision's `complete`; without
  `target_rps_per_pod`, on every signal but the request rate, which the replica count does not read), nothing is
  served: the API answers 503 as for too little coverage, and the HPA, for which a failing metric means
  "no scale-down", holds.
- **After the grace period** (`warmup_grace_s`, default `max_staleness_s`: a pod not fresh by then would
  count as stale with memory too) the runtime's memory starts: `modelmesh_desired_replicas` is served, never
  below the current replicas (the seed, held while a pod is missing: it may rise, not fall), so the HPA,
  which takes the largest of its metrics, never scales down.
- **A value is served first from every Ready pod.** A value the runtime has no memory of (request load, GPU
  busy, cache pressure) stays unknown (503, naming the pods and the signal they lack) while some Ready pod
  lacks its signal: what the fresh pods alone show may be far below the truth when the missing pod is the
  hot one. Once every Ready pod has the signal fresh the value is served and remembered, and the hold rules
  apply from then on. This holds for any value without memory, also one a warm runtime starts to report.

A runtime that is complete, or past its grace period, is warm: its memory is kept from then on. Pure: the
caller keeps the `WarmUp` state and passes `now`, and `running`, the clock the grace runs on: time that passed
with the adapter refreshing (`autoscaler.running_clock`), so that a step of the wall clock does not end it early.

**Scaled to zero** (the Deployment asks for 0 replicas and no pod is Ready: modelmesh-serving scales a runtime
that no InferenceService uses to zero after a grace period, by default): there is nothing to judge and nothing
missing. Values stay unknown (503: the HPA holds), but it is not a miss (`consecutive_misses` stays 0, so the
data alerts stay quiet) and the runtime's memory is dropped: when pods come back it warms up again, seeded at
the replicas the Deployment then asks for, rather than resuming values from before it went idle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from autoscaler.log_lists import few
from autoscaler.model import RuntimeSnapshot, RuntimeView, ServedValue
from autoscaler.names import ServedMetric
from autoscaler.policies.decision import decide, down_cause
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.runtime_memory import RuntimeMemory
from autoscaler.policies.served_values import VALUE_SIGNAL
from autoscaler.policies.signals import (
    ABSENT,
    FRESH,
    NONE,
    SIGNAL_CACHE,
    SIGNAL_GPU,
    SIGNAL_QUEUE,
    SIGNAL_REQUESTS,
)
from autoscaler.policies.smoothing import SmoothState

_DESIRED = ServedMetric.DESIRED_REPLICAS
SCALED_TO_ZERO = ("scaled to zero: the Deployment asks for 0 replicas (modelmesh-serving scales a runtime that no "
                  "InferenceService uses to zero); nothing to judge until it has pods; values unknown (503), HPA "
                  "holds")
BEING_DELETED = ("being deleted: its Deployment has a deletionTimestamp and no pod is Ready (a foreground cascading "
                 "deletion, as kubectl delete --cascade=foreground, Argo CD and Flux make, deletes the pods first); "
                 "nothing to judge; values unknown (503), HPA holds")
ASK_UNREAD = (f"warm-up grace period over before the first list of RuntimeScales: {_DESIRED.value} not below the "
              "Deployment's replicas, without what the HPA last asked for")
"""The reason's start for a runtime seeded without its RuntimeScale's ask (`decide_remembering`'s `ask_unread`)."""
WAITING_FOR_ASK = "warming up: waiting for the first list of RuntimeScales"
"""How the reason of a runtime held for the RuntimeScale watch's first list starts (`decide_remembering`'s
`ask_unread`): a round trip at start, logged at INFO (`transition_log`)."""
_SHOWN_PODS = 3
"""Pods named in the warming-up explanation; the rest are counted."""
_REPLICA_SIGNALS = frozenset((SIGNAL_GPU, SIGNAL_QUEUE, SIGNAL_CACHE))
_LOAD_SIGNALS = frozenset((SIGNAL_REQUESTS, SIGNAL_QUEUE, SIGNAL_CACHE))
"""The signals of a pod's ModelMesh load data, which is fresh or not as one (`PodView.fresh`)."""
"""The signals the replica count reads besides the request rate (`decision.decide`'s `desired_complete`)."""


@dataclass(frozen=True, slots=True)
class WarmUp:
    """A runtime not yet warm: since when, and what its unserved refreshes must carry to the next one."""

    since: float  # on the running clock (`decide_remembering`)
    misses: int = 0  # refreshes in a row that were not complete
    warned_no_capacity: bool = False  # the no-capacity warning was logged for this runtime


def grace_s(policy: RuntimePolicy) -> float:
    """Seconds a runtime with no memory waits for every Ready pod to be fresh before it is served anyway."""
    return policy.max_staleness_s if policy.warmup_grace_s is None else policy.warmup_grace_s


def replica_floor(snapshot: RuntimeSnapshot, scaled: int | None = None) -> int:
    """What runs: the Deployment's replicas (in a targets file, its listed pods), else the Ready pods; and at
    least `scaled`, the RuntimeScale's `spec.replicas` (what the HPA last asked for, perhaps not carried to
    the Deployment yet) when the bridge knows it.

    Replicas 0 with Ready pods is a runtime back from zero whose Deployment was read before modelmesh-serving
    scaled it up: what runs is then its Ready pods, not 0, or the first served value could be below them."""
    runs = snapshot.replicas or sum(1 for pod in snapshot.pods if pod.ready)
    return max(runs, scaled or 0)


def seed_memory(floor: int, warm: WarmUp, now: float) -> RuntimeMemory:
    """The memory a runtime without one starts from: the replica series at what runs, nothing else.
    `known=True`: the seed is not "data back after a gap". `now` on the clock the values decay on."""
    smoothed = {_DESIRED: SmoothState(float(floor), now)} if floor > 0 else {}
    return RuntimeMemory(smoothed=smoothed, consecutive_misses=warm.misses, known=True,
                         warned_no_capacity=warm.warned_no_capacity)


def decide_remembering(
    snapshot: RuntimeSnapshot,
    policy: RuntimePolicy,
    memory: RuntimeMemory | None,
    warm: WarmUp | None,
    now: float,
    window_s: float,
    scaled: int | None = None,
    running: float | None = None,
    ask_unread: bool = False,
) -> tuple[RuntimeView, RuntimeMemory | None, WarmUp | None]:
    """`decision.decide` for a runtime with memory; for one without, the warm-up rules of this module.
    Either way a value without memory is served only from every Ready pod (`whole_or_unknown`).

    `scaled`: the runtime's RuntimeScale `spec.replicas`, when known (`replica_floor`).
    `ask_unread`: the bridge's RuntimeScale watch has not listed yet, so `scaled` may be a RuntimeScale not seen
    yet rather than none: a runtime without memory is not served until it lists, for at most the grace period
    (then seeded from the Deployment alone, as a runtime with no RuntimeScale is).
    `running`: the clock the values decay and the grace runs on (`decision.decide`); None: `now`.
    Returns the view to serve, the memory to keep (None while warming up: nothing was served from it) and the
    warm-up state to keep (None once warm); neither (None, None) for a runtime scaled to zero, whose memory
    is to be forgotten.
    """
    if (snapshot.replicas == 0 or snapshot.deleting) and not any(pod.ready for pod in snapshot.pods):
        idle, _ = decide(snapshot, policy, None, now, window_s, running)
        if snapshot.deleting:
            return replace(idle, consecutive_misses=0, reason=BEING_DELETED, being_deleted=True), None, None
        return replace(idle, consecutive_misses=0, reason=SCALED_TO_ZERO), None, None
    if memory is not None:
        view, kept = decide(snapshot, policy, memory, now, window_s, running)
        view, kept = whole_or_unknown(view, kept, memory)
        return view, kept, None
    at = now if running is None else running
    warm = warm or WarmUp(since=at)
    floor = replica_floor(snapshot, scaled)
    seed = seed_memory(floor, warm, at)
    view, seeded = decide(snapshot, policy, seed, now, window_s, running)
    left = grace_s(policy) - (at - warm.since)
    if ask_unread:
        if left > 0.0:
            why = (f"{WAITING_FOR_ASK} (what the HPA last asked for counts as running); served once it answers, "
                   f"or in {left:.0f} s (warmup_grace_s) with {_DESIRED.value} not below the Deployment's {floor} "
                   "replicas")
            if not snapshot.source_ok:
                why = f"{down_cause(snapshot)}; {why}"
            state = replace(warm, misses=view.consecutive_misses, warned_no_capacity=seeded.warned_no_capacity)
            return _unserved(view, why, "the RuntimeScales are listed"), None, state
        view = replace(view, reason="; ".join(part for part in (ASK_UNREAD, view.reason) if part))
    if view.complete:
        return view, seeded, None
    failures = snapshot.read_failures
    if _whole_for_replicas(view, policy):  # the values it lacks stay unknown, as for a warm runtime
        view, seeded = whole_or_unknown(view, seeded, seed)
        return view, seeded, None
    if left > 0.0:
        grace = f"in {left:.0f} s (warmup_grace_s) with {_DESIRED.value} not below the current {floor} replicas"
        unseen = f"warming up: the adapter has no memory of this runtime and {_unseen(view, failures)}"
        why = f"{unseen}; served once every ready pod is fresh, or {grace}"
        if not snapshot.source_ok:  # the cause, first, and nothing is served while it lasts, grace or not
            why = (f"{down_cause(snapshot)}; values unknown (503) until it answers; {unseen}; once it answers, "
                   f"served when every ready pod is fresh, or, once warmup_grace_s has passed (in {left:.0f} s), with "
                   f"{_DESIRED.value} not below the current {floor} replicas")
        state = replace(warm, misses=view.consecutive_misses, warned_no_capacity=seeded.warned_no_capacity)
        return _unserved(view, why), None, state
    note = (f"warm-up grace period over with {_unseen(view, failures)}: {_DESIRED.value} not below the current "
            f"{floor} replicas")
    parts = (note, view.reason)
    if not snapshot.source_ok:  # still nothing to serve: the outage first, the grace for when it ends
        parts = (view.reason, f"warm-up grace period over: once the source answers, {_DESIRED.value} is served "
                              f"not below the current {floor} replicas")
    view, seeded = whole_or_unknown(replace(view, reason="; ".join(p for p in parts if p)), seeded, seed)
    return view, seeded, None


def _whole_for_replicas(view: RuntimeView, policy: RuntimePolicy) -> bool:
    """Whether every Ready pod is fresh on every signal the replica count uses, the request rate missing on
    some: without `target_rps_per_pod` it decides nothing, and the decision lets the replicas fall then
    (`decision.decide`, `desired_complete`). Waiting on it held the seed for the grace period and then one
    refresh only: "never below the current replicas" while the pod "held" nothing."""
    if policy.target_rps_per_pod is not None or not view.known or view.fresh_pods != view.ready_pods:
        return False
    return all(state in (FRESH, ABSENT, NONE) for pod in view.pods if pod.ready
               for signal, state in pod.signals if signal in _REPLICA_SIGNALS)


def whole_or_unknown(
    view: RuntimeView, kept: RuntimeMemory, before: RuntimeMemory,
) -> tuple[RuntimeView, RuntimeMemory]:
    """A value the runtime had no memory of (`before`) is served only when every Ready pod has its signal
    fresh; else it is unknown (503, as for too little coverage: `held` and the reason name the pods and the
    signal) and stays out of the memory, so that the next refresh judges it the same way."""
    withheld: dict[str, str] = {}
    for metric, signal in VALUE_SIGNAL.items():
        served = view.values.get(metric)
        if metric in before.smoothed or served is None or served.value is None:
            continue
        lacking = [pod.name for pod in view.pods
                   if pod.ready and dict(pod.signals).get(signal, NONE) not in (FRESH, ABSENT)]
        if lacking:
            withheld[metric.value] = (
                f"no memory of this value yet and {signal} not fresh on {_named(lacking)}; unknown (503) until "
                "every ready pod has it fresh")
    if not withheld:
        return view, kept
    values = {metric: ServedValue(None, value.raw, value.timestamp) if metric.value in withheld else value
              for metric, value in view.values.items()}
    smoothed = {metric: state for metric, state in kept.smoothed.items() if metric.value not in withheld}
    why = "; ".join(f"{what} held: {reason}" for what, reason in withheld.items())
    reason = "; ".join(part for part in (view.reason, why) if part)
    return (replace(view, values=values, held={**view.held, **withheld}, reason=reason, warming_up=why),
            replace(kept, smoothed=smoothed))


def _named(names: list[str]) -> str:
    """`pod-0, pod-1, pod-2 and 4 more`: a few names, the rest counted."""
    return few(names, _SHOWN_PODS)


def _lacking_load(age_s: float | None, failure: str | None = None) -> str:
    """What a pod without fresh load data lacks, where no load signal of its own says so (the runtime expects
    none yet: no pod reports one). Said, not "no data": its GPU reading may be fresh, and it is ModelMesh's load
    (request rate, queue, cache) that the exporter has not read (`age_s` None) or read too long ago. Where the
    source's last read of the pod failed, that failure (`RuntimeSnapshot.read_failures`, `scrape failed (connect)`):
    "no request load" for a scrape refused sent operators to ModelMesh."""
    if failure is not None:
        return failure if age_s is None else f"request load stale, {failure}"
    return "no request load" if age_s is None else "request load stale"


def _unseen(view: RuntimeView, failures: Mapping[str, str] | None = None) -> str:
    """Which Ready pods lack which signal, e.g. "3 of 4 ready pods fresh (pod-0: gpu stale, requests stale)";
    `failures`: why the source's last read of a pod failed, by pod name, said for a pod lacking its load."""
    failures = failures or {}
    lacking = []
    for pod in view.pods:
        if not pod.ready:
            continue
        bad = [f"{signal} {state}" for signal, state in pod.signals if state not in (FRESH, ABSENT, NONE)]
        if not pod.fresh and not any(signal in _LOAD_SIGNALS and state not in (FRESH, ABSENT, NONE)
                                     for signal, state in pod.signals):
            bad.append(_lacking_load(pod.age_s, failures.get(pod.name)))
        if bad:
            lacking.append(f"{pod.name}: {', '.join(bad)}")
    shown = few(lacking, _SHOWN_PODS, sep="; ", more="; {} more") if lacking else ""
    if not view.ready_pods:
        return "no pod is ready"
    return f"{view.fresh_pods} of {view.ready_pods} ready pods fresh" + (f" ({shown})" if shown else "")


def _unserved(view: RuntimeView, why: str, until: str = "every ready pod is fresh") -> RuntimeView:
    """The view with every value unknown: the API answers 503, as for too little coverage; `held` says what it
    waits `until`, as `reason` does."""
    values = {metric: ServedValue(None, value.raw, value.timestamp) for metric, value in view.values.items()}
    held = {**view.held, **{metric.value: f"warming up: unknown (503) until {until}" for metric in ServedMetric}}
    return replace(view, values=values, known=False, complete=False, winner=None, held=held,
                   reason=f"{why}; values unknown (503), HPA holds", warming_up=why)
