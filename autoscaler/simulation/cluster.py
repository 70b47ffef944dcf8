"""A simulated ModelMesh runtime: pods with a request capacity and an LRU model cache.

Load is a fluid. At the start of each bucket (and whenever pods come or go) every model's request rate is
routed the way ModelMesh routes requests: to the least busy pods that hold a loaded copy (spread to equalise
them; a copy still loading takes none while a loaded one exists). A model held nowhere is loaded where
ModelMesh's cache-miss balancer puts it (placement.py: a pod with free space and the fewest models, or when
all are full the one whose LRU copy is oldest, skipping much busier ones) -- a *cold load*: its requests wait
the load time -- evicting that pod's least recently used copy. Every 10 s ModelMesh's rate check
(rate_check.py) gives a model more copies, placed the same way, when one copy's own request rate over the
last 10 s reached 90% of what a pod serves: rate / threshold copies, at most max(2, a third of the pods),
none while another copy's load is recent; a one-copy model used again 7 to 40 minutes after a prior use
gets a second copy while the caches are at least 10% free (regular_use.py). Every tick each Ready pod
serves up to `pod_rps * tick` requests; the rest queues. A request is *delayed* when it waits in the queue
longer than the SLO (counted exactly for a linearly growing or draining queue) or waits for a cold load.

New pods become Ready after the start-up delay with an empty cache. A removed pod's models that no other pod
holds are loaded on the remaining pods before it goes, as ModelMesh's pre-shutdown does, and its queued
requests go to the least busy remaining pod (ModelMesh retries them), so no request is lost.

Each pod keeps the windows its exporter averages over (GPU busy over 10 s, request rate and queue delay
over 30 s) and reports them as the `PodSample` the adapter's decision code reads.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from autoscaler.model import PodSample
from autoscaler.simulation.fluid import share_over_threshold, water_fill
from autoscaler.simulation.placement import choose_pod
from autoscaler.simulation.rate_check import (
    NEW_COPY_AHEAD_S,
    RATE_CHECK_S,
    copies_to_load,
    copy_threshold,
    excluded,
    loaded_since,
    recent_load_cutoff,
    threshold,
)
from autoscaler.simulation.regular_use import RegularUse
from autoscaler.simulation.replicaset import ReplicaPod, pods_to_remove

BACKLOG_HORIZON_S: float = 10.0


@dataclass(frozen=True, slots=True)
class ClusterShape:
    pod_rps: float = 20.0  # requests per second one pod serves at 100% busy
    cache_models: int = 100  # model copies one pod holds
    load_time_s: float = 10.0
    startup_delay_s: float = 30.0
    slo_queue_s: float = 0.1
    gpu_window_s: float = 10.0
    load_window_s: float = 30.0


@dataclass(slots=True, eq=False)
class SimPod:
    """One runtime pod; compared and hashed by identity."""

    name: str
    created_at: float
    ready_at: float
    ready: bool = False
    cache: OrderedDict[int, float] = field(default_factory=OrderedDict)  # model -> last used, LRU first
    rate: float = 0.0  # requests per second routed here in the current bucket
    backlog: float = 0.0  # requests queued
    deletion_cost: int = 0
    busy: deque[float] = field(default_factory=deque)
    served: deque[float] = field(default_factory=deque)
    queue: deque[float] = field(default_factory=deque)
    shares: dict[int, float] = field(default_factory=dict)  # model -> the rate its copy here takes
    counted: dict[int, float] = field(default_factory=dict)  # model -> requests since the last rate check
    counted_all: float = 0.0  # all requests counted since the last rate check


@dataclass(slots=True)
class TickStats:
    delayed: float = 0.0
    cold_loads: int = 0
    overloaded: bool = False


class Cluster:
    """The pods of one runtime and the models on them."""

    def __init__(self, shape: ClusterShape, replicas: int, tick_s: float, start_s: float = 0.0) -> None:
        self.shape = shape
        self.tick_s = tick_s
        self.pods: list[SimPod] = []
        self.holders: dict[int, list[SimPod]] = {}
        self._serial = 0
        self._gpu_ticks = max(1, round(shape.gpu_window_s / tick_s))
        self._load_ticks = max(1, round(shape.load_window_s / tick_s))
        self.arrived = 0.0
        self.served = 0.0
        self.cold_loads = 0
        self.copy_loads = 0
        self.migrated_loads = 0  # models a scale-down moved from a leaving pod to a remaining one
        self.cold_loads_after_removal = 0  # cold loads of models whose only copy left with a removed pod
        self._lost: set[int] = set()  # models whose last copy a scale-down removed, not requested since
        self.delayed = 0.0
        self.orphan = 0.0  # requests that arrived while no pod was Ready
        self._unrouted = 0.0  # request rate of the bucket while no pod is Ready
        self._copying: dict[tuple[int, str], float] = {}  # (model, pod) -> when the extra copy is loaded
        self._load_start: dict[int, dict[str, float]] = {}  # model -> pod -> when its copy there began loading
        self._last_check = start_s
        self._threshold = threshold(shape.pod_rps)
        self._pending = TickStats()
        self._regular = RegularUse()
        for i in range(replicas):  # running since before the trace, the first oldest
            pod = self._new_pod(start_s - shape.startup_delay_s - (replicas - i), start_s)
            pod.ready = True

    # -- pods -------------------------------------------------------------------------------------------

    def _new_pod(self, now: float, ready_at: float) -> SimPod:
        pod = SimPod(f"pod-{self._serial}", created_at=now, ready_at=ready_at)
        pod.busy, pod.served, pod.queue = deque(maxlen=self._gpu_ticks), deque(maxlen=self._load_ticks), deque(
            maxlen=self._load_ticks)
        self._serial += 1
        self.pods.append(pod)
        return pod

    @property
    def replicas(self) -> int:
        return len(self.pods)

    def ready_pods(self) -> list[SimPod]:
        return [p for p in self.pods if p.ready]

    def promote(self, now: float) -> bool:
        """Make pods whose start-up delay has passed Ready; True when any did."""
        changed = False
        for pod in self.pods:
            if not pod.ready and pod.ready_at <= now:
                pod.ready = True
                changed = True
        return changed

    def settle(self, now: float) -> bool:
        """Finish copy loads and start-ups due by `now`; True when routing must be redone."""
        changed = self.promote(now)
        if now >= self._last_check + RATE_CHECK_S:
            self._rate_check(now)
        if self._copying:
            by_name = {p.name: p for p in self.pods}
            for key, due in list(self._copying.items()):
                if due <= now:
                    del self._copying[key]
                    pod = by_name.get(key[1])
                    if pod is not None and key[0] not in pod.cache:
                        self._load(pod, key[0], now)
                        self.copy_loads += 1
                        changed = True
        return changed

    def scale_to(self, replicas: int, now: float) -> list[str]:
        """Add pods (Ready after the start-up delay) or remove them in the ReplicaSet's order; removed names."""
        if replicas > len(self.pods):
            for _ in range(replicas - len(self.pods)):
                self._new_pod(now, now + self.shape.startup_delay_s)
            return []
        view = [ReplicaPod(p.name, p.ready, p.deletion_cost, p.created_at) for p in self.pods]
        gone = {r.name for r in pods_to_remove(view, len(self.pods) - replicas)}
        removed = [p for p in self.pods if p.name in gone]
        self.pods = [p for p in self.pods if p.name not in gone]
        for key in [k for k in self._copying if k[1] in gone]:  # their loads stop with them
            del self._copying[key]
            self._load_start.get(key[0], {}).pop(key[1], None)
        orphans: list[tuple[float, int]] = []  # (last used, model) of models no remaining pod holds
        for pod in removed:
            for model, used in pod.cache.items():
                self._load_start[model].pop(pod.name, None)
                holders = self.holders[model]
                holders.remove(pod)
                if not holders:
                    del self.holders[model]
                    orphans.append((used, model))
            if pod.backlog:
                self._requeue(pod.backlog)
        self._migrate(orphans, now)
        return sorted(gone)

    def _migrate(self, orphans: list[tuple[float, int]], now: float) -> None:
        """Load elsewhere the models only removed pods held, most recently used first, keeping their age.

        ModelMesh's pre-shutdown (ModelMesh.java `preShutdown`) asks for a copy elsewhere of every model in
        the leaving pod's cache (`triggerNewModelCopyElsewhere`) and keeps serving until those used in the
        last hour have loaded, within the termination grace period (90 s in config/base/deployment.yaml):
        a scale-down moves models rather than dropping them. Without a Ready pod left they are lost."""
        ready = self.ready_pods()
        for used, model in sorted(orphans, reverse=True):
            target = choose_pod(ready, self.shape.cache_models, now, now - used) if ready else None
            if target is None:
                self._lost.add(model)
                continue
            self._load(target, model, now, used)

    def _requeue(self, requests: float) -> None:
        ready = self.ready_pods()
        if ready:
            min(ready, key=lambda p: p.rate + p.backlog).backlog += requests
        else:
            self.orphan += requests

    # -- routing ----------------------------------------------------------------------------------------

    def _load(self, pod: SimPod, model: int, now: float, used: float | None = None) -> None:
        """Put a copy on `pod`, evicting its least recently used one; `used`: a moved copy's last use."""
        cache = pod.cache
        if len(cache) >= self.shape.cache_models:
            evicted, _ = cache.popitem(last=False)
            self._load_start[evicted].pop(pod.name, None)
            holders = self.holders[evicted]
            holders.remove(pod)
            if not holders:
                del self.holders[evicted]
        self.holders.setdefault(model, []).append(pod)
        self._load_start.setdefault(model, {}).setdefault(pod.name, now)  # a copy load began when asked for
        if used is None:
            cache[model] = now
            return
        cache[model] = used  # a moved copy keeps its age: its place in the LRU order
        self.migrated_loads += 1
        if len(cache) > 1:
            ordered = sorted(cache.items(), key=_last_used)
            cache.clear()
            cache.update(ordered)

    def route(self, now: float, models: list[int], rates: list[float], remaining_s: float) -> None:
        """Spread the bucket's rates over the Ready pods; cold-load models no pod holds."""
        ready = self.ready_pods()
        for pod in self.pods:
            # While routing, a queue counts as load it would take BACKLOG_HORIZON_S to drain: the least busy
            # pod is the one with the least work ahead, as ModelMesh judges by requests in flight.
            pod.rate = pod.backlog / BACKLOG_HORIZON_S
        self._unrouted = 0.0 if ready else sum(rates)
        for pod in ready:
            pod.shares = {}
        if not ready:
            return
        if self.orphan:
            orphan, self.orphan = self.orphan, 0.0
            self._requeue(orphan)
        load_wait = min(self.shape.load_time_s, remaining_s)
        holders_of = self.holders
        loading: set[SimPod] = set()  # at most one copy starts loading per pod per routing
        # ModelMesh adds a second copy for regular use only while the caches are at least 10% free
        roomy = 10 * sum(self.shape.cache_models - len(p.cache) for p in ready) >= self.shape.cache_models * len(ready)
        # Models with one copy cannot go elsewhere; models with several spread around them. Routing the
        # quiet ones first lets the hot ones fill the gaps, as per-request least-busy routing does. Models
        # already held go before those to load: their requests keep coming all bucket long, so their copies
        # are recently used when a load evicts, and a load takes the LRU copy of a model not asked for.
        held = holders_of.__contains__
        for rate, model in sorted(zip(rates, models, strict=True), key=lambda rm: (not held(rm[1]), rm[0])):
            holders = holders_of.get(model)
            if holders is None:
                target = choose_pod(ready, self.shape.cache_models, now, 0.0)
                assert target is not None
                self._load(target, model, now)
                self._regular.forget(model)  # a fresh cache entry, whose first use is this one
                self._regular.used(model, now)
                self.cold_loads += 1
                self._pending.cold_loads += 1
                if model in self._lost:
                    self._lost.discard(model)
                    self.cold_loads_after_removal += 1
                self._pending.delayed += rate * load_wait
                target.rate += rate
                target.shares[model] = rate
            elif len(holders) == 1:
                pod = holders[0]
                pod.rate += rate
                pod.shares[model] = rate
                pod.cache[model] = now
                pod.cache.move_to_end(model)
                if rate > 0.0 and self._regular.used(model, now) and roomy and not self._loading_copies(model):
                    spare = choose_pod([p for p in ready if p is not pod and p not in loading], self.shape.cache_models,
                                       now, RATE_CHECK_S)
                    if spare is not None:
                        self._start_copy(model, spare, now)
                        loading.add(spare)
            else:
                before = [pod.rate for pod in holders]
                for pod in water_fill(holders, rate):  # only copies that took requests count as used
                    pod.cache[model] = now
                    pod.cache.move_to_end(model)
                for pod, was in zip(holders, before, strict=True):
                    if pod.rate > was:
                        pod.shares[model] = pod.rate - was
        for pod in self.pods:
            pod.rate = max(0.0, pod.rate - pod.backlog / BACKLOG_HORIZON_S)

    def _start_copy(self, model: int, pod: SimPod, now: float) -> None:
        self._copying[(model, pod.name)] = now + self.shape.load_time_s
        self._load_start.setdefault(model, {})[pod.name] = now

    def _rate_check(self, now: float) -> None:
        """ModelMesh's `rateTrackingTask` (rate_check.py) over the requests each copy on a busy pod took since
        the last run: more copies of a model whose copy reached its threshold, placed as any load is."""
        interval = now - self._last_check
        self._last_check = now
        counted = [p for p in self.pods if p.counted_all]
        for pod in counted:
            pod.counted_all = 0.0
        ready = self.ready_pods()
        if len(ready) < 2 or interval <= 0.0:  # l.5658: no other pod to copy to
            for pod in counted:
                pod.counted = {}
            return
        mu = self.shape.pod_rps
        cutoff = recent_load_cutoff(now, interval, self.shape.load_time_s)
        rates = [(p.name, p.rate) for p in ready]
        for pod in counted:
            counts, pod.counted = pod.counted, {}
            total = sum(counts.values()) / interval
            for model, count in counts.items():
                rate = count / interval
                limit = copy_threshold(mu, rate, total, count)
                holders = self.holders.get(model)
                if rate < limit or holders is None or pod not in holders:
                    continue
                taken = {h.name for h in holders} | {name for m, name in self._copying if m == model}
                candidates = len(ready) - len(taken)
                if candidates <= 0 or loaded_since(self._load_start.get(model, {}), cutoff, pod.name):
                    continue
                busy = excluded(rates, pod.name, pod.rate, self._threshold)
                if busy:
                    candidates -= sum(1 for name in busy if name not in taken) + len(busy)
                spares = [p for p in ready if p.name not in taken and p.name not in busy]
                for _ in range(copies_to_load(rate, limit, candidates, len(ready))):
                    spare = choose_pod(spares, self.shape.cache_models, now, -NEW_COPY_AHEAD_S)
                    if spare is None:
                        break
                    spares.remove(spare)
                    self._start_copy(model, spare, now)

    def _loading_copies(self, model: int) -> int:
        return sum(1 for m, _ in self._copying if m == model) if self._copying else 0

    def warm(self, now: float, models: list[int], rates: list[float]) -> None:
        """Start as a runtime that has served this load for a while: its models (and copies of the hot
        ones) already loaded, nothing queued, and none of those loads counted."""
        for _ in range(4):  # each round may start copies; load them at once and route again
            self.route(now, models, rates, 0.0)
            for ready in self.ready_pods():
                ready.counted = {m: r * RATE_CHECK_S for m, r in ready.shares.items()}
                ready.counted_all = ready.rate * RATE_CHECK_S
            self._last_check = now - RATE_CHECK_S
            self._rate_check(now)
            for model, name in list(self._copying):
                pod = next((p for p in self.pods if p.name == name), None)
                if pod is not None and model not in pod.cache:
                    self._load(pod, model, now)
            self._copying.clear()
            for starts in self._load_start.values():  # loaded long ago, as far as the next round knows
                for name in starts:
                    starts[name] = -math.inf
        self._last_check = now
        for pod in self.pods:
            pod.counted, pod.counted_all = {}, 0.0
        self.cold_loads = self.copy_loads = self.cold_loads_after_removal = self.migrated_loads = 0
        self._pending = TickStats()

    # -- time -------------------------------------------------------------------------------------------

    def step(self, now: float) -> TickStats:
        """Serve one tick; returns what happened in it (including cold loads since the last step)."""
        stats, self._pending = self._pending, TickStats()
        t = self.tick_s
        busy_mark = self._threshold
        for pod in self.pods:  # the requests each copy on a busy pod takes, for the next rate check
            if pod.ready and pod.rate >= busy_mark:
                counts = pod.counted
                for model, rate in pod.shares.items():
                    counts[model] = counts.get(model, 0.0) + rate * t
                pod.counted_all += pod.rate * t
        mu = self.shape.pod_rps
        threshold = mu * self.shape.slo_queue_s
        capacity = mu * t
        for pod in self.pods:
            if not pod.ready:
                continue
            a = pod.rate
            b0 = pod.backlog
            arrivals = a * t
            b1 = b0 + arrivals - capacity
            if b1 < 0.0:
                b1 = 0.0
            served = b0 + arrivals - b1
            delayed = arrivals * share_over_threshold(b0, a - mu, t, threshold) if arrivals else 0.0
            pod.backlog = b1
            self.arrived += arrivals
            self.served += served
            stats.delayed += delayed
            if b1 > threshold:
                stats.overloaded = True
            pod.busy.append(served / capacity)
            pod.served.append(served / t)
            pod.queue.append((b0 + b1) / 2.0 / mu)
        if self._unrouted:  # no Ready pod: the requests wait for one, all delayed
            waiting = self._unrouted * t
            self.arrived += waiting
            self.orphan += waiting
            stats.delayed += waiting
            stats.overloaded = True
        self.delayed += stats.delayed
        return stats

    def samples(self, now: float) -> tuple[PodSample, ...]:
        """Every pod as its exporter reports it now (not-Ready pods with no data)."""
        out = []
        cache_models = self.shape.cache_models
        for pod in self.pods:
            if not pod.ready or not pod.served:  # not Ready, or Ready but not yet scraped: no data
                out.append(PodSample(pod.name, ready=pod.ready, created_at=pod.created_at))
                continue
            lru = now - next(iter(pod.cache.values())) if pod.cache else None
            out.append(PodSample(
                pod.name, ready=True, sampled_at=now,
                gpu_busy=_mean(pod.busy), requests_per_second=_mean(pod.served), queue_delay_s=_mean(pod.queue),
                lru_age_s=lru, cache_used_ratio=len(pod.cache) / cache_models, models_loaded=float(len(pod.cache)),
                created_at=pod.created_at,
            ))
        return tuple(out)

    def queued(self) -> float:
        return sum(p.backlog for p in self.pods) + self.orphan


def _last_used(item: tuple[int, float]) -> float:
    return item[1]


def _mean(values: deque[float]) -> float:
    return sum(values) / len(values) if values else 0.0
