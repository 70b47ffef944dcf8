"""Where ModelMesh loads a model: the pod choice of its cache-miss load balancer, in model-copy units.

ModelMesh (kserve/modelmesh, src/main/java/com/ibm/watson/modelmesh/ModelMesh.java) does not load a model
nobody holds on the least busy pod. Its `PLACEMENT_ORDER` comparator ranks instances: pods with free space
before full ones; among full pods the one whose least recently used entry is oldest; otherwise the fewest
models, then the most free space, then the oldest LRU entry. `CacheMissForwardingLB.getNext` walks that
order into a shortlist (while pods stay near the best one: free space at least a quarter of the best's and
not over 1.25x its model count, or, when full, an LRU entry within 45 s or a tenth of the oldest's age) and
then drops the shortlisted pods that are much busier than the least busy one: over 1.1x the least busy
pod's requests per minute for a copy the rate task asked for (its last-used time is set in the future),
1.5x when the model was used in the last 5 s, 3x in the last 12 minutes, 4x in the last day, each with a
floor of 100 requests per minute. It then picks at random among those left; the simulator, to stay
deterministic, takes the first of them in placement order. So a new, empty pod collects the loads of
models nobody holds, and a full cluster loads where the coldest copy lives.

A full pod whose least recently used copy is younger than the minimum churn age refuses the load ("limit the
rate of cache churn - if we are full and our LRU entry is recent, reject the load rather than thrashing":
`minChurnAgeMs`, `tas.min_churn_age_ms`, in the cache-miss loop of `invokeModel`), and the request tries the
next pod; when every pod is full and that recent, there is no pod (None) and the request fails with "Cache
churn threshold exceeded". Copies the rate task or a pre-shutdown asks for load through the same loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

_MIN_RPM = 100.0  # requests per minute below which a pod is never "too busy" to take a load
_TWELVE_MIN_S = 12 * 60.0
_ONE_DAY_S = 24 * 3600.0
_FIVE_DAYS_S = 5 * 24 * 3600.0


class CachePod(Protocol):
    """What placement reads of a pod: its cache (model -> last used, least recent first) and rate (req/s)."""

    @property
    def name(self) -> str: ...
    @property
    def cache(self) -> dict[int, float]: ...
    @property
    def rate(self) -> float: ...


P = TypeVar("P", bound=CachePod)


def busier_factor(last_used_ago_s: float) -> float:
    """How much busier than the least busy candidate a pod may be and still take the load (inf: any)."""
    if last_used_ago_s < -1.0:
        return 1.1
    if last_used_ago_s < 5.0:
        return 1.5
    if last_used_ago_s < _TWELVE_MIN_S:
        return 3.0
    if last_used_ago_s < _ONE_DAY_S:
        return 4.0
    return math.inf


def choose_pod(pods: Iterable[P], capacity: int, now: float, last_used_ago_s: float,
               min_churn_age_s: float = 0.0, oldest: Mapping[P, float] | None = None) -> P | None:
    """The pod ModelMesh would load a model on, among `pods` (those that may take it); None when none, or when
    every one is full with its least recently used copy used within `min_churn_age_s` (each refuses the load).

    The first pod, in `PLACEMENT_ORDER`, of the shortlist's pods not too busy, found without sorting: the
    shortlist's bounds only grow along that order (model count among pods with room, LRU age among full ones),
    so it is the pods within them, and the first of a set in that order is its least by the order's key. A day
    of 5,000 models (one placement per cold load, about a million) sorted every pod for every one of them.
    `min` keeps the first of equal keys, as the stable sort it replaces did. `oldest`: each pod's
    `oldest_copy`, where the caller keeps them (routing's loads, one after another, change one pod's at a time)."""
    candidates = pods if isinstance(pods, list) else list(pods)
    if not candidates:
        return None
    # Each pod's model count and (when all are full) oldest copy once, the shortlist as their indexes, and the
    # keys only of the pods tied for the first one: placement asks at every cold load, rate-check copy and
    # retry (a day of 5,000 quiet models: 180,000 times), over every pod (240 at 20,000 models' fixed-max)
    counts = [len(pod.cache) for pod in candidates]
    best_count = min(counts)
    firsts: list[float] | list[int]
    if best_count < capacity:  # some pod has room: ordered by model count, oldest LRU entry, rate and name
        least_free = (capacity - best_count) >> 2
        most = best_count + (best_count >> 2)
        near = [i for i, n in enumerate(counts)
                if n < capacity and capacity - n >= least_free and not (n >= 10 and n > most)]
        if len(near) == 1:
            return candidates[near[0]]
        firsts = counts

        def second(i: int) -> float:  # the i-th pod's place in the order after its first: its oldest copy
            return oldest_copy(candidates[i]) if oldest is None else oldest[candidates[i]]
    else:  # all full: ordered by oldest LRU entry, then model count, rate and name
        if oldest is None:  # `oldest_copy`, inline
            olds = [next(iter(pod.cache.values())) if pod.cache else math.inf for pod in candidates]
        else:
            olds = [oldest[pod] for pod in candidates]
        best_lru = min(olds)
        # A pod whose oldest copy is that recent refuses; the request tries the next (none: every pod refuses)
        cutoff = now - min_churn_age_s if min_churn_age_s > 0.0 else math.inf
        if best_lru > cutoff:
            return None
        within = (now - best_lru) / 10.0
        near = [i for i, old in enumerate(olds) if old <= cutoff and not ((diff := old - best_lru) > 45.0
                                                                          and diff > within)]
        if len(near) == 1:
            return candidates[near[0]]
        firsts = olds

        def second(i: int) -> float:
            return counts[i]
    if last_used_ago_s >= _FIVE_DAYS_S:
        return candidates[_least(candidates, near, firsts, second)]
    factor = busier_factor(last_used_ago_s)
    floor = max(_MIN_RPM, min(candidates[i].rate for i in near) * 60.0)
    idle = [i for i in near if (rpm := candidates[i].rate * 60.0) < _MIN_RPM or rpm <= factor * floor]
    return candidates[_least(candidates, idle or near, firsts, second)]


def _least(pods: Sequence[CachePod], indexes: list[int], firsts: Sequence[float],
           second: Callable[[int], float]) -> int:
    """Of `indexes`, the first whose pod is least in placement order, keyed `(firsts[i], second(i), rate,
    name)`: `min` of those keys (the first of equal ones, as the stable sort it replaced), each part taken only
    for the pods tied on the ones before (the fleet's empty pods all tie on their model count)."""
    best = min([firsts[i] for i in indexes])
    tied = [i for i in indexes if firsts[i] == best]
    if len(tied) == 1:
        return tied[0]
    seconds = [second(i) for i in tied]
    best = min(seconds)
    tied = [i for i, value in zip(tied, seconds, strict=True) if value == best]
    if len(tied) == 1:
        return tied[0]
    return min(tied, key=lambda i: (pods[i].rate, pods[i].name))


def placement_key(pod: CachePod, capacity: int) -> tuple[bool, float, float, float, str]:
    """The pod's place in `PLACEMENT_ORDER` (smaller: where a load goes first): pods with room before full ones;
    with room, the fewest models, then the oldest LRU entry; full, the oldest LRU entry, then the fewest models;
    then the least busy, then the name (ModelMesh's last ties: loading threads, capacity, then the instance id)."""
    count, oldest = len(pod.cache), oldest_copy(pod)
    if count < capacity:
        return (False, count, oldest, pod.rate, pod.name)
    return (True, oldest, count, pod.rate, pod.name)


def oldest_copy(pod: CachePod) -> float:
    """When the pod's least recently used copy was last used (inf: no copy)."""
    cache = pod.cache
    return next(iter(cache.values())) if cache else math.inf
