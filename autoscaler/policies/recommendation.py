"""The replica recommendation (docs/design.md, Recommendation): one proposal per signal, the largest wins, capped.

    desired = max( min_replicas,
                   ceil(n * M_p(b) / target_gpu_busy),
                   ceil(n * M_p(r) / target_rps_per_pod)            if target_rps_per_pod is set,
                   n + ceil(Σ q_i / queue_drain_s)                   while some q_i > target_queue_delay_s,
                   ceil(n * min(cache_pressure_cap, pressure))       while every cache is full )
    desired = min(desired, max_replicas)

Every term is bounded by real demand: the power-mean terms grow like `n^(1-1/p)` as idle pods are added, so
"replicas := desired" has a fixed point; the queue term adds the backlog in pods; the cache term is capped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from autoscaler.policies.aggregation import Aggregate
from autoscaler.policies.policy import RuntimePolicy

GPU: Final = "gpu"
REQUESTS: Final = "requests"
QUEUE: Final = "queue"
CACHE: Final = "cache"
MIN_REPLICAS: Final = "min_replicas"
MAX_REPLICAS: Final = "max_replicas"
"""`winner` when the cap decided; it is not a proposal."""

TERMS: Final = (GPU, REQUESTS, QUEUE, CACHE, MIN_REPLICAS)
"""Proposal keys, in the order that breaks ties for `winner`: a signal beats the floor it equals."""

PROPOSAL_LIMIT: Final = 1_000_000
"""No proposal exceeds this many pods, so absurd (but finite) inputs cannot overflow an integer quantity."""

_FUZZ: Final = 1e-9


def ceil_pods(x: float) -> int:
    """`ceil` that ignores float fuzz: 3.0000000000000004 pods is 3 pods, not 4."""
    if not x < PROPOSAL_LIMIT:  # also catches inf and NaN, which cannot reach here from clean inputs
        return PROPOSAL_LIMIT
    return max(0, math.ceil(x - _FUZZ * max(1.0, abs(x))))


@dataclass(frozen=True, slots=True)
class Recommendation:
    """The recommended replica count, every term's proposal (None: no proposal) and which term decided."""

    desired: int
    proposals: dict[str, int | None]
    winner: str  # one of TERMS, or MAX_REPLICAS when the cap cut the winner down


def recommend(agg: Aggregate, policy: RuntimePolicy) -> Recommendation:
    """Apply the recommendation rules to one aggregate. `n` is the number of Ready pods with fresh data."""
    n = agg.n
    proposals: dict[str, int | None] = dict.fromkeys(TERMS)
    if agg.gpu_busy is not None:
        proposals[GPU] = ceil_pods(n * agg.gpu_busy / policy.target_gpu_busy)
    if policy.target_rps_per_pod is not None and agg.request_rate is not None:
        proposals[REQUESTS] = ceil_pods(n * agg.request_rate / policy.target_rps_per_pod)
    if agg.queue_delay_max_s is not None and agg.queue_delay_max_s > policy.target_queue_delay_s:
        proposals[QUEUE] = min(PROPOSAL_LIMIT, n + ceil_pods(agg.queue_delay_sum_s / policy.queue_drain_s))
    if agg.cache_full and agg.cache_pressure is not None:
        proposals[CACHE] = ceil_pods(n * min(policy.cache_pressure_cap, agg.cache_pressure))
    proposals[MIN_REPLICAS] = policy.min_replicas

    desired = max(v for v in proposals.values() if v is not None)
    winner = next(t for t in TERMS if proposals[t] == desired)
    if policy.max_replicas is not None and desired > policy.max_replicas:
        winner, desired = MAX_REPLICAS, policy.max_replicas
    return Recommendation(desired=desired, proposals=proposals, winner=winner)
