"""A simulated ModelMesh runtime: the pods of one runtime, the models on them, and the counts a report reads.

The parts, one module each: a pod, how it serves a tick and what its exporter reports (pods.py); where
requests go (routing.py); where copies are and when ModelMesh makes more (copies.py, rate_check.py,
placement.py, regular_use.py). This module wires them to the simulated clock: pods that start, become Ready
and go, and the counts (arrived, served, delayed, cold loads, copies, models moved by a scale-down).

New pods become Ready after the start-up delay with an empty cache. A removed pod's models that no other pod
holds are loaded on the remaining pods before it goes, as ModelMesh's pre-shutdown does (each such load is
a *migrated load*), and its queued requests go to the least busy remaining pod (ModelMesh retries them), so
no request is lost.
"""

from __future__ import annotations

import math

from autoscaler.model import PodSample
from autoscaler.simulation import routing
from autoscaler.simulation.copies import ModelCopies
from autoscaler.simulation.placement import choose_pod
from autoscaler.simulation.pods import (
    ClusterShape,
    SimPod,
    TickStats,
    count_for_rate_check,
    new_pod,
    sample,
    serve,
)
from autoscaler.simulation.rate_check import RATE_CHECK_S
from autoscaler.simulation.regular_use import RegularUse
from autoscaler.simulation.replicaset import ReplicaPod, pods_to_remove

__all__ = ["Cluster", "ClusterShape", "SimPod", "TickStats"]


class Cluster:
    """The pods of one runtime and the models on them."""

    def __init__(self, shape: ClusterShape, replicas: int, tick_s: float, start_s: float = 0.0) -> None:
        self.shape = shape
        self.tick_s = tick_s
        self.pods: list[SimPod] = []
        self.copies = ModelCopies(shape)
        self._serial = 0
        self.arrived = 0.0
        self.served = 0.0
        self.cold_loads = 0
        self.copy_loads = 0
        self.migrated_loads = 0  # models a scale-down moved from a leaving pod to a remaining one
        self.cold_loads_after_removal = 0  # cold loads of models whose only copy left with a removed pod
        self._lost: set[int] = set()  # models whose last copy a scale-down removed, not requested since
        # Cold loads of a model evicted from every cache, by how long before the load its evicted copy was last
        # used (seconds, one entry per such load): short gaps are thrashing, caches too small for the models in
        # use; long ones are models nobody asked for in between, which more pods would only have held idle.
        self.reload_gaps: list[float] = []
        self.delayed = 0.0
        self.delayed_loading = 0.0  # of `delayed`: requests that waited for a cold load
        self.orphan = 0.0  # requests that arrived while no pod was Ready
        self._unrouted = 0.0  # request rate of the bucket while no pod is Ready
        # Requests that failed because every pod refused their model's load (ModelMesh's churn limit:
        # placement.py); counted in `delayed` too, and never served
        self.refused = 0.0
        self._refused: dict[int, float] = {}  # model -> request rate, of the models whose load every pod refused
        self._refused_rate = 0.0  # their request rates added up
        self._last_check = start_s
        self._pending = TickStats()
        self._regular = RegularUse()
        for i in range(replicas):  # running since before the trace, the first oldest
            pod = self._new_pod(start_s - shape.startup_delay_s - (replicas - i), start_s)
            pod.ready = True

    @property
    def holders(self) -> dict[int, list[SimPod]]:
        """Model -> the pods holding a loaded copy of it."""
        return self.copies.holders

    # -- pods -------------------------------------------------------------------------------------------

    def _new_pod(self, now: float, ready_at: float) -> SimPod:
        pod = new_pod(f"pod-{self._serial}", now, ready_at, self.shape, self.tick_s)
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
        loaded = self.copies.finish(now, self.pods)
        self.copy_loads += loaded
        return changed or loaded > 0

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
        orphans = self.copies.drop(removed)
        for pod in removed:
            if pod.backlog:
                self._requeue(pod.backlog)
        self._migrate(orphans, now)
        return sorted(gone)

    def _migrate(self, orphans: list[tuple[float, int]], now: float) -> None:
        """Load elsewhere the models only removed pods held, most recently used first, keeping their age.

        ModelMesh's pre-shutdown (ModelMesh.java `preShutdown`) asks for a copy elsewhere of every model in
        the leaving pod's cache (`triggerNewModelCopyElsewhere`) and keeps serving until those used in the
        last hour have loaded, within the termination grace period (90 s in config/base/deployment.yaml):
        a scale-down moves models rather than dropping them. Only the models no other pod holds are moved here:
        ModelMesh also copies a leaving copy of a model held elsewhere to a pod without one (the holders are
        excluded), and its janitor later removes extra copies (`removeModelCopies`), neither of which the
        simulator models (docs/simulation.md, the last section). Without a Ready pod left they are lost, and so are
        those every pod refuses (the churn limit, placement.py) and those a full pod drops at once because their
        last use is older than its own oldest copy (the load "immediately evicted" in ModelMesh's cache-miss path:
        a move never displaces a copy used more recently)."""
        ready = self.ready_pods()
        capacity = self.shape.cache_models
        for used, model in sorted(orphans, reverse=True):
            target = choose_pod(ready, capacity, now, now - used, self.shape.min_churn_age_s) if ready else None
            if target is None or (len(target.cache) >= capacity and used < next(iter(target.cache.values()))):
                self._lost.add(model)
                continue
            self.copies.load(target, model, now, used)
            self.migrated_loads += 1

    def _requeue(self, requests: float) -> None:
        ready = self.ready_pods()
        if ready:
            min(ready, key=lambda p: p.rate + p.backlog).backlog += requests
        else:
            self.orphan += requests

    # -- routing ----------------------------------------------------------------------------------------

    def route(self, now: float, models: list[int], rates: list[float], remaining_s: float) -> None:
        """Spread the bucket's rates over the Ready pods; cold-load models no pod holds."""
        ready = self.ready_pods()
        routing.begin(self.pods, ready)
        self._unrouted = 0.0 if ready else sum(rates)
        self._refused, self._refused_rate = {}, 0.0
        if not ready:
            return
        if self.orphan:
            orphan, self.orphan = self.orphan, 0.0
            self._requeue(orphan)
        cold, self._refused = routing.spread(ready, self.copies, self._regular, now, models, rates)
        self._refused_rate = sum(self._refused.values())
        self._count_cold(cold, now, remaining_s)
        routing.end(self.pods)

    def retry_refused(self, now: float, remaining_s: float) -> None:
        """Try the loads every pod refused at the last routing again, as ModelMesh's next request for each
        model does (it keeps no record of a churn refusal); `remaining_s`: seconds left of the bucket."""
        if not self._refused:
            return
        cold = routing.retry(self.ready_pods(), self.copies, self._regular, now, self._refused)
        if cold:
            self._refused_rate = sum(self._refused.values())
            self._count_cold(cold, now, remaining_s)

    def _count_cold(self, cold: list[tuple[int, float, SimPod]], now: float, remaining_s: float) -> None:
        """Count the cold loads routing started: their requests wait the load time (or what is left of the
        bucket, after which the next routing counts again)."""
        load_wait = min(self.shape.load_time_s, remaining_s)
        for model, rate, target in cold:
            self.cold_loads += 1
            self._pending.cold_loads += 1
            last_used = self.copies.evicted.pop(model, None)
            if last_used is not None:
                self.reload_gaps.append(now - last_used)
            if model in self._lost:
                self._lost.discard(model)
                self.cold_loads_after_removal += 1
            self._pending.delayed += rate * load_wait
            self._pending.delayed_loading += rate * load_wait
            target.waiting_for_load += rate * load_wait  # counted delayed now: not again if they also queue

    def _rate_check(self, now: float) -> None:
        interval = now - self._last_check
        self._last_check = now
        self.copies.rate_check(now, interval, self.pods, self.ready_pods())

    def warm(self, now: float, models: list[int], rates: list[float]) -> None:
        """Start as a runtime that has served this load for a while: its models (and copies of the hot
        ones) already loaded, nothing queued, and none of those loads counted."""
        copies = self.copies
        for _ in range(4):  # each round may start copies; load them at once and route again
            self.route(now, models, rates, 0.0)
            for ready in self.ready_pods():
                ready.counted = {m: r * RATE_CHECK_S for m, r in ready.shares.items()}
                ready.counted_all = ready.rate * RATE_CHECK_S
            self._last_check = now - RATE_CHECK_S
            self._rate_check(now)
            copies.finish(math.inf, self.pods)  # the copies it started, loaded at once (not counted)
            for starts in copies.load_start.values():  # loaded long ago, as far as the next round knows
                for name in starts:
                    starts[name] = -math.inf
        self._last_check = now
        for pod in self.pods:
            pod.counted, pod.counted_all = {}, 0.0
        self.cold_loads = self.copy_loads = self.cold_loads_after_removal = self.migrated_loads = 0
        self.reload_gaps = []
        self.refused = self._refused_rate = 0.0
        self._refused = {}
        self._pending = TickStats()

    # -- time -------------------------------------------------------------------------------------------

    def step(self, now: float) -> TickStats:
        """Serve one tick; returns what happened in it (including cold loads since the last step)."""
        stats, self._pending = self._pending, TickStats()
        t = self.tick_s
        busy_mark = self.copies.busy_mark
        for pod in self.pods:  # the requests each copy on a busy pod takes, for the next rate check
            count_for_rate_check(pod, t, busy_mark)
        for pod in self.pods:
            if not pod.ready:
                continue
            done = serve(pod, self.shape, t)
            self.arrived += done.arrived
            self.served += done.served
            stats.delayed += done.delayed
            if done.overloaded:
                stats.overloaded = True
        if self._refused_rate:  # loads every pod refused: those requests fail
            failed = self._refused_rate * t
            self.arrived += failed
            self.refused += failed
            stats.delayed += failed
        if self._unrouted:  # no Ready pod: the requests wait for one, all delayed
            waiting = self._unrouted * t
            self.arrived += waiting
            self.orphan += waiting
            stats.delayed += waiting
            stats.overloaded = True
        self.delayed += stats.delayed
        self.delayed_loading += stats.delayed_loading
        return stats

    def samples(self, now: float, per_model: bool = True) -> tuple[PodSample, ...]:
        """Every pod as its exporter reports it now (not-Ready pods with no data); `per_model` False leaves out
        the per-model use (`recent_models`), for a reader that never looks at it (mean-hpa: GPU busy only)."""
        cache_models = self.shape.cache_models
        return tuple(sample(pod, now, cache_models, per_model) for pod in self.pods)

    def queued(self) -> float:
        return sum(p.backlog for p in self.pods) + self.orphan
