"""Replay a trace on a simulated runtime under one policy, on a simulated clock.

The runtime starts warm (the first interval's models already loaded), as one that has been serving for a
while: cold loads then measure what scaling does, not the first start of every model.

Time moves in ticks (default 5 s). At the start of each bucket of the trace the arrivals are routed; every
tick pods become Ready when their start-up delay is over, loads every pod refused (ModelMesh's churn limit)
are tried again, as each request of the model tries again, the policy is asked at every HPA sync (15 s), the
replicas change at once (new pods start, removed pods go in the ReplicaSet's order), and the pods serve.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from autoscaler.simulation.cluster import Cluster, ClusterShape
from autoscaler.simulation.hpa import SYNC_PERIOD_S
from autoscaler.simulation.idle_watch import BucketUse, IdleWatch
from autoscaler.simulation.loading import LoadWaits
from autoscaler.simulation.policies import SimPolicy
from autoscaler.simulation.trace import Trace
from autoscaler.simulation.trace_buckets import Bucket

Progress = Callable[[int, int], None]
"""Called with (buckets done, buckets in all)."""


@dataclass(frozen=True, slots=True)
class ScaleEvent:
    at_s: float
    before: int
    after: int
    reason: str
    removed: tuple[str, ...] = ()


@dataclass
class Timeline:
    """One point per bucket: load, and per policy replicas, delayed requests, cold loads and what the pods did
    (idle ones beside full ones: stuck_baseline.py)."""

    t_s: list[float] = field(default_factory=list)
    replicas: list[int] = field(default_factory=list)
    delayed: list[float] = field(default_factory=list)
    cold_loads: list[int] = field(default_factory=list)
    pods_use: list[BucketUse] = field(default_factory=list)
    bucket_s: float = 0.0


@dataclass
class PolicyResult:
    name: str
    description: str
    pod_hours: float
    overloaded_seconds: float
    delayed_requests: float
    delayed_loading: float  # of `delayed_requests`: requests that waited for a load (cold, or a scale-down's copy)
    requests: float
    served: float
    cold_loads: int
    copy_loads: int
    cold_loads_after_removal: int  # of `cold_loads`: models whose only copy left with a pod a scale-down removed
    migrated_loads: int  # copies a scale-down made of a leaving pod's models on the pods that stay (pre-shutdown)
    janitor_removals: int  # extra copies of models held elsewhere that ModelMesh's janitor unloaded
    scale_events: int
    peak_replicas: int
    terms: dict[str, int]
    events: list[ScaleEvent]
    timeline: Timeline
    wall_s: float = 0.0
    # Of `cold_loads`: each reload of a model an eviction had taken from every cache, the seconds between its
    # evicted copy's last use and the reload (`Cluster.reload_gaps`)
    reload_gaps: list[float] = field(default_factory=list)
    refused_requests: float = 0.0  # of `delayed_requests`: failed, every pod refusing their model's load (churn)
    unused_evictions: int = 0  # models evicted from every cache and not requested again before the trace ended
    # How long each load that ran waited for its pod's loading thread (the runtime's `maxLoadingConcurrency`)
    load_waits: LoadWaits = field(default_factory=LoadWaits)
    # Untimed, model -> (requests its copies took while over what a pod serves but under the threshold, the most one
    # such copy took a second): never copied (stuck_copies.py); empty timed
    stuck_copies: dict[int, tuple[float, float]] = field(default_factory=dict)
    # Untimed, the pods whose copies together took more than a pod serves, each under it and the threshold, by their
    # hottest two copies' models -> (requests, the most such a pod took a second, the least its hotter copy took):
    # none copied (stuck_copies.py); empty timed
    crowded_pods: dict[tuple[int, int], tuple[float, float, float]] = field(default_factory=dict)

    @property
    def delayed_ratio(self) -> float:
        return self.delayed_requests / self.requests if self.requests else 0.0


def simulate(buckets: Sequence[Bucket], bucket_s: float, tick_s: float, shape: ClusterShape, policy: SimPolicy,
             initial_replicas: int, progress: Progress | None = None, duration_s: float | None = None) -> PolicyResult:
    """Run one policy over the whole trace and drain what is still queued at the end. `duration_s`: the trace's
    own length (default: every bucket whole). Where ticks add several intervals up and the trace is no whole
    number of ticks long, its last tick runs past its end; pods and overloaded time are counted only up to the
    end (an hour at --tick 2400 was 2.67 pod-hours for 2 pods), as what is queued at the end is counted served
    after it, not for the pods that serve it."""
    cluster = Cluster(shape, initial_replicas, tick_s)
    ticks = max(1, round(bucket_s / tick_s))
    timeline = Timeline(bucket_s=bucket_s)
    watch = IdleWatch()
    events: list[ScaleEvent] = []
    pod_seconds = overloaded = 0.0
    peak = cluster.replicas
    next_sync = SYNC_PERIOD_S  # the first sync finds a window of data, as an HPA running for a while would
    total = len(buckets)
    if buckets:
        cluster.warm(0.0, buckets[0].models, buckets[0].rates)
    for index, bucket in enumerate(buckets):
        start = index * bucket_s
        cluster.route(start, bucket.models, bucket.rates, bucket_s)
        delayed_here = 0.0
        cold_here = 0
        for k in range(ticks):
            now = start + k * tick_s
            if cluster.settle(now):
                cluster.route(now, bucket.models, bucket.rates, bucket_s - k * tick_s)
            elif k:  # loads refused at the last routing: each request tries again (at k = 0 it just did)
                cluster.retry_refused(now, bucket_s - k * tick_s)
            if now >= next_sync:
                while next_sync <= now:  # on the HPA's own 15 s grid: a tick that does not divide it is late, not slow
                    next_sync += SYNC_PERIOD_S
                outcome = policy.sync(now, cluster)
                if outcome.desired != cluster.replicas:
                    before = cluster.replicas
                    removed = cluster.scale_to(outcome.desired, now)
                    events.append(ScaleEvent(now, before, outcome.desired, outcome.reason, tuple(removed)))
                    if removed:
                        cluster.route(now, bucket.models, bucket.rates, bucket_s - k * tick_s)
            counted = tick_s if duration_s is None else max(0.0, min(tick_s, duration_s - now))
            pod_seconds += cluster.replicas * counted
            peak = max(peak, cluster.replicas)
            stats = cluster.step(now)
            delayed_here += stats.delayed
            cold_here += stats.cold_loads
            watch.tick(cluster.pods)
            if stats.overloaded:
                overloaded += counted
        timeline.t_s.append(start)
        timeline.replicas.append(cluster.replicas)
        timeline.delayed.append(delayed_here)
        timeline.cold_loads.append(cold_here)
        timeline.pods_use.append(watch.bucket_done())
        if progress is not None:
            progress(index + 1, total)
    served = cluster.served + cluster.queued()  # what is still queued at the end is served after it
    return PolicyResult(
        name=policy.name, description=policy.describe(), pod_hours=pod_seconds / 3600.0,
        overloaded_seconds=overloaded, delayed_requests=cluster.delayed, delayed_loading=cluster.delayed_loading,
        requests=cluster.arrived, served=served, cold_loads=cluster.cold_loads, copy_loads=cluster.copy_loads,
        cold_loads_after_removal=cluster.cold_loads_after_removal, migrated_loads=cluster.migrated_loads,
        janitor_removals=cluster.janitor_removals,
        scale_events=len(events), peak_replicas=peak,
        terms=dict(policy.terms), events=events, timeline=timeline, reload_gaps=cluster.reload_gaps,
        refused_requests=cluster.refused, unused_evictions=len(cluster.copies.evicted),
        load_waits=cluster.load_waits(len(buckets) * bucket_s),
        stuck_copies={} if cluster.stuck is None else {m: (r, s) for m, (r, s) in cluster.stuck.taken.items()},
        crowded_pods={} if cluster.stuck is None else {p: (r, t, h) for p, (r, t, h) in cluster.stuck.crowded.items()},
    )


@dataclass(frozen=True, slots=True)
class Oracle:
    pod_hours: float
    cache_pod_hours: float
    peak_rps: float
    first_loads: int  # models first requested after the warm start: cold loads no policy avoids
    # The most pods one interval needs to serve its requests at full capacity and hold the models used within
    # `target_lru_age_s` (the largest term of `cache_pod_hours`): what the peak needs, its models included
    peak_pods: int = 0
    peak_models: int = 0  # the most models used within `target_lru_age_s` of one another (what sizes `peak_pods`)


def oracle(trace: Trace, shape: ClusterShape, target_lru_age_s: float, warm_s: float = 0.0) -> Oracle:
    """Perfect foresight: every pod at full capacity each interval (`pod_hours`), and also enough pods to hold
    every model used within the last `target_lru_age_s` (`cache_pod_hours`); `warm_s` is the stretch at the
    start whose models are already loaded (the first bucket)."""
    rate = trace.rate_per_interval()
    need = np.ceil(rate / shape.pod_rps - 1e-9)
    lookback = max(1, math.ceil(target_lru_age_s / trace.interval_s))
    recent = _recent_models(trace, lookback)
    cache_need = np.maximum(need, np.ceil(recent / shape.cache_models))
    hours = trace.interval_s / 3600.0
    used = trace.requests > 0
    first = np.full(len(trace.models), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, trace.model[used], trace.slot[used])
    warm_slots = max(1, round(warm_s / trace.interval_s))
    late = int(((first >= warm_slots) & (first < np.iinfo(np.int64).max)).sum())
    return Oracle(float(need.sum() * hours), float(cache_need.sum() * hours), float(rate.max(initial=0.0)), late,
                  int(cache_need.max(initial=0.0)), int(recent.max(initial=0)))


def _recent_models(trace: Trace, lookback: int) -> np.ndarray:
    """Per interval, the models used in it or the `lookback - 1` before it.

    From the rows, not from a models x intervals grid: a week of 5,000 models at a 15 s step made that grid
    2.8 GB. Each use makes its model recent from its interval until `lookback` later or the model's next use,
    whichever is first; those spans do not overlap, so adding them up counts every model once."""
    used = trace.requests > 0
    key = np.unique(trace.model[used] * trace.intervals + trace.slot[used])  # by model, then time
    model, slot = key // trace.intervals, key % trace.intervals
    following = np.append(slot[1:], trace.intervals)
    following[np.append(model[1:] != model[:-1], True)] = trace.intervals  # a model's last use
    end = np.minimum(slot + lookback, following)
    change = np.bincount(slot, minlength=trace.intervals + 1) - np.bincount(end, minlength=trace.intervals + 1)
    return np.cumsum(change[: trace.intervals])
