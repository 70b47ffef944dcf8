"""ModelMesh's janitor: every 6 minutes each pod unloads copies of models held elsewhere that are no longer busy.

Every instance runs `janitorTask` (kserve/modelmesh src/main/java/com/ibm/watson/modelmesh/ModelMesh.java)
every `LOCAL_JANITOR_FREQ_SECS`, 6 minutes ("tas.janitor_freq_secs", 6 * 60), the first 1 s after it starts
(`scheduleAtFixedRate(janitorTask(), 1L, LOCAL_JANITOR_FREQ_SECS, SECONDS)`). Its first pass only squares the
local cache with the registry (the "skip if new or recently used" there, 12 minutes plus the load timeout,
is about that pass, not about removing copies). Its second pass goes over the copies registered to the
instance, least recently used first ("loop starting with oldest so that the LRU ones are the first to be
scaled down"), and calls `removeModelCopies` on each, which leaves it unless:

- the model has at least two copies, loaded or loading (`numInstances = mr.getInstanceIds().size()`,
  `if (!canRemove || numInstances < 2) return false`), one of them on another instance not shutting down;
- the cluster is close to full: "only unload if cluster is close to full", `stats.totalFree * 100L /
  stats.totalCapacity > 5` returns (integer division: removals only while under 6% of the capacity is free,
  counting the free space of instances that are not full);
- two copies: this copy was last used longer ago than a tenth of the cache's age (`scaleDownAge = cacheAge /
  10L`, `cacheAge = nowMillis - stats.globalLru`, the oldest last use on any instance), at most 10 hours
  (`SECOND_COPY_REMOVE_MAX_AGE_MS`) when the copy was never heavy or heavy within a fifth of the cache's age,
  and this instance is not ahead of the other in `PLACEMENT_ORDER` (`removeSecondModelCopy`: "ensure we are the
  least desirable place for new models relative to the other instance");
- three or more copies: no copy unloaded in the last 80 s (`8 * RATE_CHECK_INTERVAL_MS`, `lastUnloadTime`,
  which `updateLastUnloadTime` sets only when more than two copies are left), none loaded in the last 30
  minutes (`loadedSince(mr, nowMillis - 1_800_000L, null)`), this copy not heavy (over three quarters of its
  rate threshold at a rate check: rate_check.py) within `minAgeMs`, its current rate at most two thirds of its
  threshold (`if (rpm > (threshold * 2) / 3) return false`; untimed, of `scaleUpRpmThreshold`: rate_check.py)
  and, latency-based only, at most one request queued for it (`mcce != null && mcce.queuedRequestCount() > 1`:
  untimed the model server holds the queue and the janitor sees none).

`minAgeMs` is meant to range from 10 minutes to 5 hours with the cache's age ("cutoff age ... based on global
LRU - ranges from 10 mins to 5 hrs"), but ModelMesh computes it from the oldest last use's timestamp rather than
its age (`(3L * stats.globalLru + 10_400_000L) / 100L`, milliseconds since 1970), which is over the 5-hour cap
on any clock after January 1970: it is 5 hours (`HEAVY_AGE_S`).

Each run unloads at most 5% of the instance's capacity ("can't be more than 5% of the local cache capacity",
`getAdjustedCacheCapacity() / 20`), at least one copy: max(1, `cache_models` // 20) copies. A decision to
unload counts against that even when the last check before the unload (`isLoadedElsewhere`) then finds no
loaded copy elsewhere and keeps the copy. The janitor never unloads a model's last copy.

Simplifications, at the simulator's granularity: the cluster's figures (capacity, free space, oldest last use)
are taken once per run from the Ready pods, as ModelMesh reads the instance records they last published; a
copy's "current" rate is the rate routed to it now (ModelMesh counts its requests since the last rate check,
which its schedule puts 6 s before the janitor's), its queue its share of the pod's; copies still loading are
not candidates (in ModelMesh they are, but a copy the rate check asks for counts as used 20 s ahead, and one
loading now as loaded within 30 minutes, so neither goes); copies used at the same time are all candidates
(ModelMesh's candidate set, ordered by last use in milliseconds, keeps one of equal times).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from autoscaler.simulation.copies import ModelCopies
from autoscaler.simulation.placement import placement_key
from autoscaler.simulation.pods import SimPod
from autoscaler.simulation.rate_check import RATE_CHECK_S, copy_threshold, fair_level

JANITOR_PERIOD_S = 360.0
"""`LOCAL_JANITOR_FREQ_SECS` (ModelMesh.java, "tas.janitor_freq_secs", 6 * 60)."""
FULL_FREE_PERCENT = 5
"""`stats.totalFree * 100L / stats.totalCapacity > 5`: more free than this (in whole percent), no unload."""
REMOVE_SHARE = 20
"""A run unloads at most 1/20 of the instance's capacity (`getAdjustedCacheCapacity() / 20`)."""
SECOND_COPY_REMOVE_MAX_AGE_S = 10 * 3600.0
"""`SECOND_COPY_REMOVE_MAX_AGE_MS` (10 hours)."""
UNLOAD_GUARD_S = 8 * RATE_CHECK_S
"""No unload of a third copy within `8 * RATE_CHECK_INTERVAL_MS` of the model's last unload."""
RECENT_LOAD_S = 1800.0
"""No unload of a third copy while any copy was loaded in the last 30 minutes (`nowMillis - 1_800_000L`)."""
HEAVY_AGE_S = 5 * 3600.0
"""`minAgeMs` as ModelMesh computes it: its 5-hour cap (`18_000_000L`)."""
KEEP_SHARE = 2.0 / 3.0
"""A copy over this share of its rate threshold stays (`rpm > (threshold * 2) / 3`)."""


@dataclass(frozen=True, slots=True)
class ClusterStats:
    """What `instanceSetStats()` gives the janitor, in copies."""

    capacity: int
    free: int  # free slots of the pods that are not full
    global_lru: float  # the oldest last use of any copy (inf: none)

    def close_to_full(self) -> bool:
        return self.capacity > 0 and self.free * 100 // self.capacity <= FULL_FREE_PERCENT


def cluster_stats(ready: Sequence[SimPod], cache_models: int) -> ClusterStats:
    """The Ready pods' capacity, free slots and oldest last use."""
    free = sum(cache_models - len(p.cache) for p in ready if len(p.cache) < cache_models)
    oldest = min((next(iter(p.cache.values())) for p in ready if p.cache), default=float("inf"))
    return ClusterStats(cache_models * len(ready), free, oldest)


def run(pod: SimPod, ready: Sequence[SimPod], copies: ModelCopies, stats: ClusterStats, now: float) -> int:
    """One janitor run on `pod`: unload its copies `removeModelCopies` lets go; how many it unloaded."""
    if not stats.close_to_full() or len(pod.cache) == 0:
        return 0
    allowance = copies.shape.cache_models // REMOVE_SHARE
    decided = unloaded = 0
    for model, used in list(pod.cache.items()):  # least recently used first
        if decided and allowance < 1:  # `removedCount == 0 || weight <= maxWeightToRemove`
            break
        if not _remove(pod, model, used, ready, copies, stats, now):
            continue
        decided += 1
        allowance -= 1
        if any(h is not pod for h in copies.holders[model]):  # `isLoadedElsewhere`, the last check
            copies.remove(pod, model, now)
            unloaded += 1
    return unloaded


def _remove(pod: SimPod, model: int, used: float, ready: Sequence[SimPod], copies: ModelCopies, stats: ClusterStats,
            now: float) -> bool:
    """Whether `removeModelCopies` decides to unload this copy of `model`."""
    holders = copies.holders[model]
    loading = copies.loading_on(model)
    instances = len(holders) + len(loading)
    if instances < 2:
        return False
    if instances == 2:
        other = next((h for h in holders if h is not pod), None)
        if other is None:  # the other copy is loading: compared with its pod
            other = next((p for p in ready if p.name in loading), None)
            if other is None:
                return False
        cache_age = now - stats.global_lru
        age = cache_age / 10.0
        heavy = pod.heavy.get(model)
        if heavy is None or now - heavy < cache_age / 5.0:
            age = min(SECOND_COPY_REMOVE_MAX_AGE_S, age)
        if now - used <= age:
            return False
        capacity = copies.shape.cache_models
        return placement_key(other, capacity) < placement_key(pod, capacity)  # we are the less desirable one
    last_unload = copies.last_unload.get(model)
    if last_unload is not None and now - last_unload < UNLOAD_GUARD_S:
        return False
    if any(start > now - RECENT_LOAD_S for start in copies.load_start.get(model, {}).values()):
        return False
    heavy = pod.heavy.get(model)
    if heavy is not None and now - heavy < HEAVY_AGE_S:
        return False
    rate = pod.shares.get(model, 0.0)
    mu = copies.shape.pod_rps
    level = fair_level(pod.shares.values(), mu) if pod.rate > mu else math.inf
    active = sum(1 for share in pod.shares.values() if share > 0.0)
    limit = (copy_threshold(mu, rate, pod.rate, pod.young.get(model, math.inf), level, active) if copies.timed
             else copies.flat_rps)  # untimed, `scaleUpRpmThreshold` (`mcce == null`, l.6294-6295)
    if rate > KEEP_SHARE * limit:
        return False
    # More than one request queued for it: a latency-based copy's own queue (`mcce != null`, l.6303); untimed the
    # model server queues them and the janitor counts none
    return not (copies.timed and pod.rate > 0.0 and pod.backlog * rate / pod.rate > 1.0)
