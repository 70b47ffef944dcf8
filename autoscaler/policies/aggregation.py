"""Skew-aware aggregation: per-pod signals of one runtime → the runtime values of docs/design.md (Aggregation).

The runtime value of a per-pod signal is its power mean over the pods (`power_mean`); freshness is judged
per pod and per signal (`signals`, `samples`): a signal counts on a pod when the pod is Ready, the signal's
timestamp is fresh and the pod reports it, and where a pod that should have it does not, the decision holds
every value that uses it. Everything here is a pure function of the pods, the policy and the `now` the
caller passes in.

`scan_pods` is the one pass over a runtime's pods that the refresh makes for every pod (10,000 pods must
cost milliseconds): it reads each field once, and also notes what the ranking's need terms will see among
the Ready pods (`ReadyTerms`), so that the pod views built next (`podviews.examine_pods`) need no pass of
their own to find, say, the busiest pod. The values it makes are an `Aggregate` (`runtime_aggregate`); the
per-pod tuples follow from the state codes the pass keeps (`pod_codes`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Final

from autoscaler.model import PodSample
from autoscaler.policies import copies_in_use
from autoscaler.policies.pod_codes import counted_pods, per_pod_cached, rated_pods
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.power_mean import power_mean_bounded, rate_summary
from autoscaler.policies.ranking import ReadyTerms
from autoscaler.policies.runtime_aggregate import Aggregate
from autoscaler.policies.samples import CACHE_FULL, CACHE_ROOM, cache_state, lru_age, oldest_fresh
from autoscaler.policies.signals import (
    GPU_ABSENT,
    GPU_TIME_FRESH,
    LOAD_TIME_FRESH,
    NOT_READY,
    SIGNAL_CACHE,
    SIGNAL_GPU,
    SIGNAL_MODELS,
    SIGNAL_QUEUE,
    SIGNAL_REQUESTS,
    USED_CACHE,
    USED_GPU,
    USED_QUEUE,
    USED_REQUESTS,
)
from autoscaler.policies.slots import slot_builder
from autoscaler.policies.unready_pods import NOT_READY_HOLD_S

__all__ = ["HELD_SAMPLE_S", "aggregate", "scan_pods"]

_INF: Final = math.inf


HELD_SAMPLE_S: Final = NOT_READY_HOLD_S
"""How old a stale Ready pod's last sample may be and still stand in for it in the power means and the terms' n
(`Aggregate.gpu_pods`): as long as a pod that stopped being Ready still holds values, five minutes. A sample
that old is still the pod's likely state; an older one is not (after an adapter restart, a 3-hour-old sample of
a hot pod set the runtime's values for as long as its exporter stayed down), and the pod is left out, the hold
rules keeping the values from falling."""


def aggregate(
    pods: Sequence[PodSample],
    policy: RuntimePolicy,
    now: float,
    seen: Collection[str] = frozenset(),
) -> Aggregate:
    """Aggregate the pods of one runtime at time `now` (docs/design.md, Aggregation), judging freshness per signal
    (Missing data).

    `seen`: the signals the runtime reported at an earlier refresh (the decision's memory). A signal in it
    that no pod reports now is missing everywhere, not gone: its values are held, never lowered.
    """
    return scan_pods(pods, policy, now, seen)[0]


def scan_pods(
    pods: Sequence[PodSample],
    policy: RuntimePolicy,
    now: float,
    seen: Collection[str] = frozenset(),
    count_models: bool = True,
) -> tuple[Aggregate, ReadyTerms]:
    """`aggregate`, and what the need terms see among the Ready pods (for `podviews.examine_pods`).

    One pass over the pods, reading each field once and allocating nothing per pod but what the result
    holds. The values are not checked again here: every producer of a `PodSample` already made each one
    finite and non-negative (or absent), as `PodSample` says.

    `count_models` False: the caller counts `Aggregate.models_in_use` itself and sets it (`set_models_in_use`),
    left None here: `podviews.examine_pods` reads it off the unique-copy term's count of the same models, which
    it makes anyway, rather than have every recent model of every pod counted twice (a refresh of 10,000 pods
    reporting 50 models each cost 47% more instructions so).

    Whether a signal is *expected* depends on all pods, so each pod's signal states are first kept as
    a small code (`signals.NOT_READY`) and turned into shared state tuples (`state_table`) once the pass is
    over.

    Hand-optimised: its plain version is `plain_aggregate` in tests/policies/plain_policies.py, and
    tests/policies/test_fast_path.py checks on random pods that both give the same aggregate.
    """
    p = policy.skew_order
    fresh_from = oldest_fresh(now, policy.max_staleness_s)  # `now - t <= max_staleness_s` is `t >= fresh_from`
    full_ratio = policy.cache_full_ratio
    target_q = policy.target_queue_delay_s
    inf = _INF
    codes: list[int] = []
    not_ready = stale = 0  # counted, rather than Ready and fresh pods: these are the rare ones
    # Fresh pods without a request rate, a queue delay, or any cache signal: the rare ones, counted (the fresh
    # count of the GPU signal is the length of `gpu`).
    no_queue = no_cache = no_rate = 0
    gpu_absent = 0  # fresh pods whose exporter has no GPU collector (`signals.ABSENT`)
    gpu: list[float] = []  # the fresh GPU busy of the pods that have it, and the held ones (`held_g`)
    # The Ready pods whose GPU busy or request rate is held (stale) at a last good value taken since `held_from`
    # (`HELD_SAMPLE_S`): counted in the power means at that value, in `gpu` and `rps` (`Aggregate.gpu_pods`).
    # Rare: most refreshes count none.
    held_from = now - HELD_SAMPLE_S
    held_g = held_r = 0
    # One per pod: its fresh (or held) request rate, or 0.0 when none counts (`rate_summary`)
    rps: list[float] = []
    excess = 0.0
    saturated = 0
    oldest = inf  # None unless some signal is used
    held_at = inf  # the oldest last sample of a stale Ready pod or GPU reading that holds values
    room = full = False
    global_lru = 0.0
    # What the need terms see on Ready pods that the fresh ones above do not show (`ReadyTerms`).
    rated = gpus = caches = models = False
    top_rate = 0.0
    # The bounds of the counted GPU busy and request rates, as `power_mean` would find them (`power_mean_bounded`).
    gpu_top = rps_top = 0.0
    gpu_low = rps_low = inf
    # The per-model use of the Ready pods with fresh load data, and their capacities (`Aggregate.models_in_use`):
    # only such pods go the general branch, so the usual pod pays nothing for it.
    used_models: list[Mapping[str, float]] = []
    horizon = inf  # the shortest exporter horizon of the Ready pods reporting per-model use (`recency_horizon_s`)
    capacity_sum = 0.0
    capacities = 0
    # A Ready pod's state code (the bits of `signals`, see NOT_READY there) is built up branch by branch:
    # is the GPU's time fresh, is the load's, and which signals are used. The bits are bound to locals, which
    # the loop reads as cheaply as literals; each branch adds a distinct bit, so `+` is `|` (and Python 3.11
    # specialises int `+`, not `|`). `lst.append(x)` rather than a bound `append`: 3.11 specialises it too.
    # Times are compared GPU first, as `min` of (GPU, load) would.
    gpu_time_fresh, load_time_fresh = GPU_TIME_FRESH, LOAD_TIME_FRESH
    used_requests, used_queue, used_cache = USED_REQUESTS, USED_QUEUE, USED_CACHE
    gpu_fresh_and_used = GPU_TIME_FRESH | USED_GPU  # the GPU's time is fresh and its busy is used
    used_load = USED_REQUESTS | USED_QUEUE | USED_CACHE  # the signals stamped with the load time
    load_all = LOAD_TIME_FRESH | used_load  # the load's time is fresh and all its signals are used
    usual = gpu_fresh_and_used + load_all  # the code of the usual pod (the first branch below)
    for pod in pods:
        t = pod.sampled_at
        b = pod.gpu_busy
        r = pod.requests_per_second
        q = pod.queue_delay_s
        c = pod.cache_used_ratio
        if (t is not None and b is not None and r is not None and q is not None and c is not None and pod.ready
                and t >= fresh_from and pod.gpu_sampled_at is None and pod.recent_models is None):
            # The usual pod: Ready, its one stamp fresh, its GPU busy, request rate, queue delay and cache use all
            # there, and no per-model use reported (a pod with one goes the general way, which notes it). What
            # the general branch does for such a pod, without its tests (a third of the pass): its code is
            # `usual`, and both of its times are `t`.
            code = usual
            gpu.append(b)
            if b > gpu_top:
                gpu_top = b
            if b < gpu_low:
                gpu_low = b
            rps.append(r)
            if r > rps_top:
                rps_top = r
            if r < rps_low:
                rps_low = r
            if q > target_q:
                excess += q - target_q
                saturated += 1
            caches = True
            if t < oldest:
                oldest = t
        elif not pod.ready:
            not_ready += 1
            codes.append(NOT_READY)
            rps.append(0.0)  # (a pod not counted: `rate_summary`)
            continue
        else:
            if pod.recent_models is not None:
                models = True
                h = pod.recency_horizon_s
                if h is not None and h < horizon:
                    horizon = h
            g = pod.gpu_sampled_at
            # Each time compared in an `if` (3.11 specialises a float compare that jumps, not one whose value is kept).
            load_ok = False
            if t is not None and t >= fresh_from:
                load_ok = True
            if g is None:  # `samples.gpu_time`: the pod's one stamp stands for both
                gt = t
                gpu_ok = load_ok
            else:
                gt = g
                gpu_ok = False
                if g >= fresh_from and not pod.gpu_held:  # a kept last GPU busy is missing now (`held_gpu`)
                    gpu_ok = True
            if gpu_ok:
                if b is not None:
                    code = gpu_fresh_and_used
                    gpu.append(b)
                    if b > gpu_top:
                        gpu_top = b
                    if b < gpu_low:
                        gpu_low = b
                    if gt < oldest:  # type: ignore[operator]  # gpu_ok: gt is a time
                        oldest = gt  # type: ignore[assignment]
                elif g is None and pod.no_gpu_collector:  # fresh, and its exporter has no GPU collector
                    code = GPU_ABSENT
                    gpu_absent += 1
                else:
                    code = gpu_time_fresh
            else:
                code = 0  # the GPU's time is stale: no GPU bit
                if b is not None:
                    gpus = True
                    # A recent last good reading counts (a pod never read has none; `gt` None or NaN fails)
                    if gt is not None and gt >= held_from:
                        gpu.append(b)
                        held_g += 1
                        if b > gpu_top:
                            gpu_top = b
                        if b < gpu_low:
                            gpu_low = b
                    # A stale reading holds what uses the GPU, which then stands on that reading too.
                    if gt is not None and -inf < gt < held_at:  # (a stamp that is not a time: none to tell)
                        held_at = gt
            if load_ok:
                m = pod.recent_models
                if m is not None:
                    used_models.append(m)
                    loaded = pod.models_loaded
                    if loaded and c:
                        capacity_sum += loaded / c
                        capacities += 1
                if r is not None:
                    rps.append(r)
                    if r > rps_top:
                        rps_top = r
                    if r < rps_low:
                        rps_low = r
                else:
                    rps.append(0.0)
                    no_rate += 1
                if q is not None and q > target_q:
                    excess += q - target_q
                    saturated += 1
                if r is not None and q is not None and c is not None:
                    # The usual pod: its request rate, queue delay and cache use all fresh (one add for their bits).
                    code += load_all
                    caches = True
                else:
                    code += load_time_fresh
                    if r is not None:
                        code += used_requests
                    if q is not None:
                        code += used_queue
                    else:
                        no_queue += 1
                    # (the LRU age and model count are read only when the cache use does not settle it)
                    if c is not None or pod.models_loaded is not None or pod.lru_age_s is not None:
                        code += used_cache
                        if c is not None:
                            caches = True
                    else:
                        no_cache += 1
                if t < oldest and code & used_load:  # type: ignore[operator]  # load_ok: t is a time
                    oldest = t  # type: ignore[assignment]
            else:
                stale += 1
                # The values are held for this pod: they stand on its last sample too (`oldest_sample_at`).
                if t is not None and -inf < t < held_at:
                    held_at = t
                # A recent last sample (a pod never read has none; `t` None or NaN fails) stands in for the pod
                recent = t is not None and t >= held_from
                if r is not None:  # a rate the fresh ones do not show
                    rated = True
                    if r > top_rate:
                        top_rate = r
                if r is not None and recent:  # (`pod_codes.counted_pods` finds it again, where needed)
                    held_r += 1
                    rps.append(r)
                    if r > rps_top:
                        rps_top = r
                    if r < rps_low:
                        rps_low = r
                else:
                    rps.append(0.0)
                if c is not None:
                    caches = True
                # Its last cache state answers nothing, nor counts in the cache term's n: its last room may have
                # filled since, and one pod with room settles the question for the runtime (docs/design.md,
                # Missing data); counted as full, it raised the term beyond the contract's n of fresh pods.
        if not room and code & used_cache:  # one pod with room settles the cache question for the runtime
            state = cache_state(pod, full_ratio)
            if state == CACHE_ROOM:
                room = True
            else:
                full = full or state == CACHE_FULL
                a = lru_age(pod, state)
                if a is not None and a > global_lru:
                    global_lru = a
        codes.append(code)
    # The cache pressure (docs/design.md, Aggregation): inline, as the lines below, for a fleet of small runtimes
    # (three calls a runtime cost 1.5% of a refresh at 5,000 runtimes of 2 pods).
    pressure: float | None
    if room:
        pressure = 0.0
    elif full and global_lru > 0.0:
        pressure = policy.target_lru_age_s / global_lru
    else:
        pressure = None
    ready = len(codes) - not_ready
    n = ready - stale
    models_in_use: int | None = None
    models_missing = 0
    if used_models:
        if count_models:
            models_in_use = copies_in_use.models_in_use(used_models, now - policy.target_lru_age_s)
        models_missing = n - len(used_models)
    elif SIGNAL_MODELS in seen:
        models_missing = n
    fresh_g, fresh_r = len(gpu) - held_g, n - no_rate
    fresh_q, fresh_c = n - no_queue, n - no_cache
    fresh_counts = (fresh_g, fresh_r, fresh_q, fresh_c)
    # A signal some pod reports fresh, or the runtime reported at an earlier refresh (`seen`), is expected: missing
    # on a pod without it, not absent. GPU busy is expected also where a Ready pod carries a reading whose own
    # time is stale (`gpus`): the GPU has its own clock, so a pod can be fresh on load and stale on GPU, and such
    # a reading on every pod from the first refresh on (an adapter started while the runtime's GPU collectors
    # hang) is missing, not absent. Counted absent, it let the recommendation fall on the load terms alone. A
    # stale load makes the whole pod stale, which holds every value already.
    expected = (fresh_g > 0 or gpus or SIGNAL_GPU in seen, fresh_r > 0 or SIGNAL_REQUESTS in seen,
                fresh_q > 0 or SIGNAL_QUEUE in seen, fresh_c > 0 or SIGNAL_CACHE in seen)
    count = len(codes)
    fresh, signals, pod_signals = per_pod_cached(codes, expected, fresh_counts, ready, gpu_absent)
    # The GPU's power mean first, then the rates': should a value be invalid, the error is the same as ever.
    gpu_busy = None
    if fresh_g:
        gpu_busy = power_mean_bounded(gpu, p, gpu_top, gpu_low)
    request_rate: float | None = None
    if fresh_r:
        rated = True
        if rps_top > top_rate:  # (the counted rates' `max`: a -0.0 there is not above 0.0 either)
            top_rate = rps_top
        # The shares are over the rates counted, held ones included (/debug shows what moves the mean)
        request_rate, weights = rate_summary(
            rps, fresh_r + held_r, p, rps_top, rps_low,
            (lambda: rated_pods(codes, fresh_r)) if not held_r else (lambda: counted_pods(codes, pods, held_from)))
    else:
        weights = (0.0,) * count
    agg = _aggregate(  # Aggregate(...), through its slots (`slots`): positional, in field order
        pods if type(pods) is tuple else tuple(pods),  # pods
        fresh,
        weights,
        ready,
        n,
        n / ready if ready else 0.0,  # coverage
        gpu_busy,
        request_rate,
        pressure,  # cache_pressure
        pressure is not None and pressure > 0.0,  # cache_full
        held_at if held_at < oldest else (oldest if oldest < inf else None),  # oldest_sample_at
        excess,  # queue_excess_s
        saturated,
        signals,
        pod_signals,
        models_in_use,
        capacity_sum / capacities if capacities else None,  # pod_capacity
        models_missing,
        oldest if oldest < inf else None,  # fresh_sample_at
        horizon if horizon < inf else None,  # recency_horizon_s
        len(gpu) if fresh_g else 0,  # gpu_pods (0 with no power mean: `gpu_busy` None)
        fresh_r + held_r if fresh_r else 0,  # rate_pods
        n - no_cache,  # cache_pods
    )
    return agg, _ready_terms(ReadyTerms, (top_rate, rated, gpus or fresh_g > 0, caches, models, len(used_models)))


_ready_terms: Final = tuple.__new__
"""`ReadyTerms(...)` is `tuple.__new__(ReadyTerms, (...))` called through a Python-level `__new__`, which costs
as much as the rest of a two-pod runtime's aggregation; this is the call it makes."""


_aggregate: Final = slot_builder(Aggregate, (
    "pods", "fresh", "weights", "ready", "n", "coverage", "gpu_busy", "request_rate", "cache_pressure",
    "cache_full", "oldest_sample_at", "queue_excess_s", "saturated",
    "signals", "pod_signals", "models_in_use", "pod_capacity", "models_missing", "fresh_sample_at",
    "recency_horizon_s", "gpu_pods", "rate_pods", "cache_pods",
))
