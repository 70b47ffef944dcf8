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
"""

from __future__ import annotations

import math
from collections.abc import Iterable
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


def choose_pod(pods: Iterable[P], capacity: int, now: float, last_used_ago_s: float) -> P | None:
    """The pod ModelMesh would load a model on, among `pods` (those that may take it); None when none."""

    def oldest(pod: P) -> float:
        return next(iter(pod.cache.values())) if pod.cache else math.inf

    def key(pod: P) -> tuple[bool, float, int, float, float, str]:
        full = len(pod.cache) >= capacity
        # full: oldest LRU first; not full: fewest models (= most free space in copy units), then oldest LRU
        return full, oldest(pod) if full else 0.0, len(pod.cache), 0.0 if full else oldest(pod), pod.rate, pod.name

    ordered = sorted(pods, key=key)
    if not ordered:
        return None
    best = ordered[0]
    best_full = len(best.cache) >= capacity
    best_free, best_count, best_lru = capacity - len(best.cache), len(best.cache), oldest(best)
    shortlist = [best]
    for pod in ordered[1:]:
        if best_full:
            diff = oldest(pod) - best_lru
            if diff > 45.0 and diff > (now - best_lru) / 10.0:
                break
        else:
            free, count = capacity - len(pod.cache), len(pod.cache)
            if free <= 0 or free < best_free >> 2:
                break
            if count >= 10 and count > best_count + (best_count >> 2):
                break
        shortlist.append(pod)
    if len(shortlist) == 1 or last_used_ago_s >= _FIVE_DAYS_S:
        return shortlist[0]
    factor = busier_factor(last_used_ago_s)
    floor = max(_MIN_RPM, min(p.rate for p in shortlist) * 60.0)
    for pod in shortlist:
        rpm = pod.rate * 60.0
        if rpm < _MIN_RPM or rpm <= factor * floor:
            return pod
    return shortlist[0]
