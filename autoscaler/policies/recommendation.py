"""The replica recommendation (docs/design.md, Recommendation; docs/design.md, Missing data): one proposal per term, the
largest wins.

    D       = max( n_b * M_p(b) / target_gpu_busy,
                   n_r * M_p(r) / target_rps_per_pod )            (capacity demand in pods, unrounded)
    desired = max( lower bound,
                   ceil(D),
                   ceil(D' + Σ max(0, q_i - target_queue_delay_s) / queue_drain_s)  while some q_i > target,
                   max( ceil(min(n_c * min(cache_pressure_cap, pressure),            while every cache is full,
                                 cache_pressure_cap * U / C)),               (the second where U is known)
                        ceil(U / C) )                             the cache need, where per-model use is known,
                   Ready pods                                        while no capacity term can propose )
    desired = min(desired, upper bound)

`n_b` and `n_r` count the Ready pods in each power mean: those with the signal fresh and those held at a last
good value at most `HELD_SAMPLE_S` old (`Aggregate.gpu_pods`, `.rate_pods`), so a gap neither raises nor lowers `D`;
the cache term's `n` and its pressure are the fresh pods' alone (`Aggregate.cache_pods`).
`D'` is `D` when a capacity term proposes, else the number of saturated pods. Every term is bounded by
demand, never by the current pods: the power-mean terms grow like `n^(1-1/p)` as idle pods are added and the
queue term adds only the *excess* backlog on top of the demand (queued requests stay on their pod; new pods
cannot take them), so iterating `n := desired` reaches a fixed point. (The earlier `n + ceil(Σq/drain)`
asked for one more pod at every step while any queue persisted.)

The cache need `ceil(U / C)` (U: the copies the Ready pods served within `target_lru_age_s`, a model served on
two pods counted twice, on more pods still twice; C: a pod's capacity in models, `Aggregate.models_in_use` and
`.pod_capacity`) holds the pods that the copies in use fill: with fewer, ModelMesh evicts copies still in use
and loads them again within minutes. Copies, not distinct models, because a scale-down's pre-shutdown copies
every model the leaving pod holds to a pod without one, extra copies of busy models too. At most two of a model,
because ModelMesh keeps a second copy while the model is used and its janitor unloads a third that is no longer
busy: copies beyond the second follow the load, which the GPU and request terms size. Counted all, the copies
of a busy model that filled the pods added for its load asked for those pods again (one model a pod: the
pods, at every refresh), and the pressure term, `n_c x 1.2` while every cache is full, asked for 20% more at
every sync, however many pods there were: on the Azure LLM trace skew-aware climbed to 20 pods for a load of 6
and held them. So the pressure term is also at most `cache_pressure_cap` over the need. It is part of the cache
term, and it is what the shared contract's cache formula lacks: that one proposes only while *every* cache is
full and judges pressure by the oldest copy anywhere, so it let a runtime using 425 models go from 5 pods of 100
to 4 (docs/simulation.md). U and C do not grow with the pods (ModelMesh copies a model for its load, not for
the pods there are), so it is demand-bounded.

Missing data (the docs/design.md section of that name): a term whose signal is missing on some Ready pod may rise
but not fall (it is at least its `held` proposal from the last refresh), and so may the GPU term while some Ready
pods have no GPU collector and others do (a runtime moving to CPU-only nodes: the pods without one are not sized by
it); a term whose signal is fresh on no Ready pod, or on fewer than `min_coverage` of them, keeps its held proposal
unchanged (a runtime whose pods all say they have no GPU collector forgets its GPU proposal first:
`gpu_forgetting`). Per-model use is read on the load's clock, so a pod whose load data is stale holds the cache term
through the cache signal; a fresh pod that reports no per-model use while others do (or while the runtime did
before) makes U too small, so the cache term may then rise but not fall (`Aggregate.models_missing`); so does an
exporter horizon below `target_lru_age_s`, which counts U within the horizon only (`recency_horizon`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from autoscaler.policies.not_fresh_words import held_words
from autoscaler.policies.policy import PROPOSAL_LIMIT, RuntimePolicy
from autoscaler.policies.recency_horizon import short_horizon_cause
from autoscaler.policies.runtime_aggregate import Aggregate
from autoscaler.policies.signals import SIGNAL_CACHE, SIGNAL_GPU, SIGNAL_QUEUE, SIGNAL_REQUESTS, SignalStats
from autoscaler.policies.slots import slot_builder

GPU: Final = "gpu"
REQUESTS: Final = "requests"
QUEUE: Final = "queue"
CACHE: Final = "cache"
READY_PODS: Final = "ready_pods"
"""The floor while no capacity term (GPU or requests) can propose: the Ready pods, never fewer."""
MIN_REPLICAS: Final = "min_replicas"
MAX_REPLICAS: Final = "max_replicas"
"""`winner` when the cap decided; it is not a proposal."""

TERMS: Final = (GPU, REQUESTS, QUEUE, CACHE, READY_PODS, MIN_REPLICAS)
"""Proposal keys, in the order that breaks ties for `winner`: a signal beats the floor it equals."""

SIGNAL_OF: Final = {GPU: SIGNAL_GPU, REQUESTS: SIGNAL_REQUESTS, QUEUE: SIGNAL_QUEUE, CACHE: SIGNAL_CACHE}
"""The signal each term reads; the queue term's anchor also reads the capacity signals."""

NO_CAPACITY_SETTING: Final = "target_rps_per_pod"
"""The setting that gives a runtime without GPUs a capacity signal."""

_FUZZ: Final = 1e-9


def ceil_pods(x: float) -> int:
    """`ceil` that ignores float fuzz: 3.0000000000000004 pods is 3 pods, not 4."""
    if not x < PROPOSAL_LIMIT:  # also catches inf and NaN, which cannot reach here from clean inputs
        return PROPOSAL_LIMIT
    size = -x if x < 0.0 else x  # max(1.0, abs(x)), without two builtin calls: three per runtime per refresh
    pods = math.ceil(x - _FUZZ * (size if size > 1.0 else 1.0))
    return pods if pods > 0 else 0


@dataclass(frozen=True, slots=True)
class Recommendation:
    """The recommended replica count, every term's proposal (None: no proposal) and which term decided.

    `held` names the terms whose proposal comes (at least partly) from the last refresh, with why; `raw`
    are this refresh's own proposals before holds, which the decision remembers only where they are sound.
    """

    desired: int
    proposals: dict[str, int | None]
    winner: str  # one of TERMS, or MAX_REPLICAS when the cap cut the winner down
    held: dict[str, str] = field(default_factory=dict)
    no_capacity: bool = False  # neither the GPU nor the request term could propose
    # Why the cache term proposes what it does, in words, when its cache need (`ceil(U / C)`) decided the
    # recommendation: "cache: 425 copies in use within 600 s need 5 pods at 100 models a pod"; else empty.
    explained: str = ""


def _hold(
    term: str, computed: float | None, stats: SignalStats, agg: Aggregate, min_coverage: float,
    held: Mapping[str, int], why: dict[str, str],
) -> float | None:
    """A term's proposal under the missing-data rules (docs/design.md, Missing data), unrounded where computed
    this refresh; `why` says a hold in /debug's words (`not_fresh_words`: stale and missing apart)."""
    ready = agg.ready
    fresh, missing = stats.fresh, stats.missing
    if missing == 0 and fresh > 0 and not stats.absent:  # complete: the usual case
        return computed
    last = held.get(term)
    if fresh + missing <= 0 and last is None:
        return computed  # the runtime has no such signal (and never had one in memory)
    if fresh == 0 or stats.coverage < min_coverage:
        if last is not None:
            why[term] = (f"{SIGNAL_OF[term]} fresh on {fresh} of {ready} ready pods; "
                         f"keeping the last proposal {last}")
        return None if last is None else float(last)
    if last is not None and (computed is None or computed < last):
        if missing:
            why[term] = f"{held_words(agg, SIGNAL_OF[term])}; may rise, not fall below {last}"
        else:  # the pods without a GPU collector, while others have one: their load is not in this term
            why[term] = (f"{SIGNAL_OF[term]} absent on {stats.absent} ready pods (no GPU collector: their load is "
                         f"not in this term); may rise, not fall below {last}")
        return float(last)
    return computed


_NO_HELD: Final[Mapping[str, int]] = {}
_recommendation: Final = slot_builder(
    Recommendation, ("desired", "proposals", "winner", "held", "no_capacity", "explained"))


def recommend(agg: Aggregate, policy: RuntimePolicy, held: Mapping[str, int] | None = None) -> Recommendation:
    """Apply the missing-data rules (docs/design.md, Missing data) to one aggregate; `held` are the last refresh's
    proposals (the decision's memory).

    Runs once per runtime per refresh, so its fixed cost counts at fleet size: the per-signal stats are read
    once, and the result is built through its slots (`slots`).
    """
    held = held or _NO_HELD
    why: dict[str, str] = {}
    signals = agg.signals  # every signal of SIGNALS (`Aggregate.signals`)
    gpu_stats, rps_stats = signals[SIGNAL_GPU], signals[SIGNAL_REQUESTS]
    ready, min_coverage = agg.ready, policy.min_coverage
    target_rps = policy.target_rps_per_pod
    # Each term through `_hold`, which returns the computed proposal at once in the complete case (its
    # signal fresh on some pod and missing on none): that case is tested here, without the call.
    gpu: float | None = None
    if agg.gpu_busy is not None:
        gpu = agg.gpu_pods * agg.gpu_busy / policy.target_gpu_busy
    if gpu_stats.missing != 0 or gpu_stats.fresh <= 0 or gpu_stats.absent:
        gpu = _hold(GPU, gpu, gpu_stats, agg, min_coverage, held, why)
    rps: float | None = None
    if target_rps is not None:
        if agg.request_rate is not None:
            rps = agg.rate_pods * agg.request_rate / target_rps
        if rps_stats.missing != 0 or rps_stats.fresh <= 0:
            rps = _hold(REQUESTS, rps, rps_stats, agg, min_coverage, held, why)
    demand = rps if gpu is None else (gpu if rps is None or rps <= gpu else rps)  # max(), the GPU's on a tie

    queue: float | None = None
    if agg.saturated > 0:
        anchor = demand if demand is not None else float(agg.saturated)
        queue = anchor + agg.queue_excess_s / policy.queue_drain_s
    queue_stats = signals[SIGNAL_QUEUE]
    if queue_stats.missing != 0 or queue_stats.fresh <= 0:
        queue = _hold(QUEUE, queue, queue_stats, agg, min_coverage, held, why)

    cache: float | None = None
    cache_stats = signals[SIGNAL_CACHE]
    if agg.cache_full and agg.cache_pressure is not None:
        cache = agg.cache_pods * min(policy.cache_pressure_cap, agg.cache_pressure)
    need: float | None = None  # the cache need, U / C
    capped = False  # the pressure term held to cache_pressure_cap x the need
    in_use, per_pod = agg.models_in_use, agg.pod_capacity
    if in_use is not None and per_pod:
        need = in_use / per_pod
        if cache is not None and cache > policy.cache_pressure_cap * need:
            # Pressure is all copies used lately, which extra copies of a busy model keep true however many pods
            # they fill: at most the cap over what the models in use need, or it ratchets (one model a pod). None
            # in use (U = 0, known: the pods report per-model use) is no pod: full caches of copies nobody served
            # lately need none (U unknown, `models_in_use` None, leaves the pressure alone)
            cache, capped = policy.cache_pressure_cap * need, True
        if cache is None or need > cache:
            cache = need
    if cache_stats.missing != 0 or cache_stats.fresh <= 0:
        cache = _hold(CACHE, cache, cache_stats, agg, min_coverage, held, why)
    short = agg.recency_horizon_s
    if agg.models_missing or (short is not None and short < policy.target_lru_age_s):
        last = held.get(CACHE)
        if last is not None and (cache is None or cache < last):
            cause = (f"per-model use missing on {agg.models_missing} of {ready} ready pods" if agg.models_missing
                     else short_horizon_cause(short, policy.target_lru_age_s))  # type: ignore[arg-type]
            why.setdefault(CACHE, f"{cause}; may rise, not fall below {last}")
            cache = float(last)

    no_capacity = demand is None
    p_gpu = None if gpu is None else ceil_pods(gpu)
    p_rps = None if rps is None else ceil_pods(rps)
    p_queue = None if queue is None else ceil_pods(queue)
    p_cache = None if cache is None else ceil_pods(cache)
    low = policy.min_replicas
    if low is None:  # `lower_bound`
        low = 1
    proposals: dict[str, int | None] = {
        GPU: p_gpu, REQUESTS: p_rps, QUEUE: p_queue, CACHE: p_cache, READY_PODS: ready if no_capacity else None,
        MIN_REPLICAS: low,
    }
    # The largest proposal, the first of equal ones in TERMS order (MIN_REPLICAS always proposes).
    desired: int | None = p_gpu
    winner = GPU
    if p_rps is not None and (desired is None or p_rps > desired):
        desired, winner = p_rps, REQUESTS
    if p_queue is not None and (desired is None or p_queue > desired):
        desired, winner = p_queue, QUEUE
    if p_cache is not None and (desired is None or p_cache > desired):
        desired, winner = p_cache, CACHE
    if no_capacity and (desired is None or ready > desired):
        desired, winner = ready, READY_PODS
    if desired is None or low > desired:
        desired, winner = low, MIN_REPLICAS
    explained = ""
    if winner == CACHE and need is not None and ceil_pods(need) == p_cache:  # the cache need decided (rare)
        explained = cache_need_words(in_use, policy.target_lru_age_s, p_cache, per_pod)  # type: ignore[arg-type]
    elif winner == CACHE and capped and need is not None:
        explained = capped_pressure_words(agg.cache_pressure or 0.0, policy.cache_pressure_cap, ceil_pods(need),
                                          in_use, policy.target_lru_age_s, per_pod)  # type: ignore[arg-type]
    cap = policy.max_replicas
    if cap is not None and desired > cap:
        winner, desired = MAX_REPLICAS, cap
    return _recommendation(desired, proposals, winner, why, no_capacity, explained)


def uncapped_recommendation(proposals: Mapping[str, int | None]) -> int:
    """What the recommendation would be without `max_replicas`: the largest proposal (`recommend` takes the
    largest, then cuts it to the cap and names `MAX_REPLICAS` the winner). For the operator, where the cap decided:
    the HPA, asked only for the cap, says nothing of the replicas the load calls for."""
    return max(value for value in proposals.values() if value is not None)


def cache_need_words(in_use: int, window_s: float, pods: int, per_pod: float) -> str:
    """The cache need in words, for /debug and the logs (`Recommendation.explained`)."""
    return (f"cache: {in_use} copies in use within {window_s:g} s need {pods} pods "
            f"at {per_pod:.4g} models a pod")


def capped_pressure_words(pressure: float, cap: float, pods: int, in_use: int, window_s: float,
                          per_pod: float) -> str:
    """The pressure term held to `cap` x the cache need, in words (`Recommendation.explained`)."""
    return (f"cache: every cache is full (pressure {pressure:.3g}), held to {cap:g} x the {pods} pods that {in_use} "
            f"copies in use within {window_s:g} s need at {per_pod:.4g} model{'' if per_pod == 1 else 's'} a pod "
            f"(two copies of a model at most)")
