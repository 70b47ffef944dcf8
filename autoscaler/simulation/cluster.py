"""A simulated ModelMesh runtime: the pods of one runtime, the models on them, and the counts a report reads.

The parts, one module each: a pod, how it serves a tick and what its exporter reports (pods.py); where
requests go (routing.py); where copies are and when ModelMesh makes more (copies.py, rate_check.py,
placement.py, regular_use.py) or unloads extra ones (janitor.py); the copies a pre-shutdown sends and the loads
requests wait for (preshutdown.py). This module wires them to the simulated
clock: pods that start, become Ready and go, and the counts (arrived, served, delayed, cold loads, copies,
models moved by a scale-down, copies the janitor unloaded).

New pods become Ready after the start-up delay with an empty cache. Every model a removed pod held gets a copy
on a remaining pod that neither holds nor loads it, as ModelMesh's pre-shutdown asks (each such load is a
*migrated load*), and its queued requests go to the least busy remaining pod (ModelMesh retries them), so
no request is lost. The requests for a model whose only copies left wait for its new copy, as those for a model
held nowhere wait for its cold load (`AwaitedLoad`). Each pod runs its loads (cold loads, and the copies a
pre-shutdown, the rate check and the regular-use rule ask of it) through one loading queue, `load_concurrency`
at a time, in ModelMesh's priority order (loading.py). Every 6 minutes each
pod's janitor unloads copies of models held elsewhere that are no longer busy, while the caches are close to
full (janitor.py).
"""

from __future__ import annotations

import math
from typing import Final

from autoscaler.model import PodSample
from autoscaler.simulation import janitor, routing
from autoscaler.simulation.copies import ModelCopies
from autoscaler.simulation.loading import LoadWaits
from autoscaler.simulation.pods import (
    ClusterShape,
    SimPod,
    TickStats,
    last_uses,
    new_pod,
    sample,
    serve,
)
from autoscaler.simulation.preshutdown import AwaitedLoad, migrate
from autoscaler.simulation.rate_check import RATE_CHECK_S
from autoscaler.simulation.regular_use import RegularUse
from autoscaler.simulation.replicaset import ReplicaPod, pods_to_remove
from autoscaler.simulation.stuck_copies import StuckCopies
from autoscaler.simulation.warm_start import busiest_that_fit

WARM_ROUNDS: Final = 64
"""Rounds of routing and rate checks at most to reach the copies a runtime serving the first bucket's load for
a while holds. Four rounds left a hot model at 74 requests/s on too few pods: 60,000 requests delayed in the
first four minutes under every policy, a start that decided the day's delays on a trace that delays none after."""

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
        self.migrated_loads = 0  # copies a scale-down made of a leaving pod's models on the remaining pods
        self.janitor_removals = 0  # copies of models held elsewhere the janitor unloaded (janitor.py)
        # Untimed, copies over what a pod serves but under the threshold, never copied (stuck_copies.py)
        self.stuck = None if shape.queue_timed else StuckCopies(shape.pod_rps, self.copies.flat_rps)
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
        self._next_janitor = math.inf  # the earliest `janitor_at` of the pods
        self._awaited: dict[int, AwaitedLoad] = {}  # model -> the load its requests wait for
        # Each pod's copies' last uses as its exporter reports them, kept while no cache changes: `_caches_changed`
        # counts the calls that may change one (a routing, a load, an unload, a scale), and an HPA sync comes
        # every 15 s where routings come every bucket (a day of 20,000 functions: a fifth of skew-aware's time
        # went to making them anew at each sync)
        self._caches_changed = 0
        self._load_waits = LoadWaits()  # how long each load waited for its pod's loading thread (loading.py)
        self._last_uses: dict[SimPod, dict[str, float]] = {}
        self._last_uses_at = -1
        for i in range(replicas):  # running since before the trace, the first oldest
            pod = self._new_pod(start_s - shape.startup_delay_s - (replicas - i), start_s)
            pod.ready = True

    @property
    def holders(self) -> dict[int, list[SimPod]]:
        """Model -> the pods holding a loaded copy of it."""
        return self.copies.holders

    # -- pods -------------------------------------------------------------------------------------------

    def _new_pod(self, now: float, ready_at: float) -> SimPod:
        pod = new_pod(f"pod-{self._serial}", now, ready_at, self.shape, self.tick_s, self._load_waits)
        self._serial += 1
        self.pods.append(pod)
        self._next_janitor = min(self._next_janitor, pod.janitor_at)
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
        unloaded = self._janitor(now) if now >= self._next_janitor else 0
        if loaded or unloaded:
            self._caches_changed += 1
        return changed or loaded > 0 or unloaded > 0

    def _janitor(self, now: float) -> int:
        """Run the janitor of each pod whose run is due, on its own 6-minute grid; how many copies it unloaded."""
        ready = self.ready_pods()
        stats = janitor.cluster_stats(ready, self.shape.cache_models)
        unloaded = 0
        for pod in self.pods:
            if pod.janitor_at > now:
                continue
            if pod.ready:
                unloaded += janitor.run(pod, ready, self.copies, stats, now)
            while pod.janitor_at <= now:  # a fixed rate: late, not shifted
                pod.janitor_at += janitor.JANITOR_PERIOD_S
        self._next_janitor = min((p.janitor_at for p in self.pods), default=math.inf)
        self.janitor_removals += unloaded
        return unloaded

    def scale_to(self, replicas: int, now: float) -> list[str]:
        """Add pods (Ready after the start-up delay) or remove them in the ReplicaSet's order; removed names."""
        self._caches_changed += 1
        if replicas > len(self.pods):
            for _ in range(replicas - len(self.pods)):
                self._new_pod(now, now + self.shape.startup_delay_s)
            return []
        view = [ReplicaPod(p.name, p.ready, p.deletion_cost, p.created_at) for p in self.pods]
        gone = {r.name for r in pods_to_remove(view, len(self.pods) - replicas)}
        removed = [p for p in self.pods if p.name in gone]
        self.pods = [p for p in self.pods if p.name not in gone]
        leaving = self.copies.drop(removed)
        self._next_janitor = min((p.janitor_at for p in self.pods), default=math.inf)
        for pod in removed:
            pod.loading.close(now)  # its loads stop with it; those started count their waits
            if pod.backlog:
                self._requeue(pod.backlog)
            if pod.waiting_for_load:  # counted delayed before they arrived here: taken back, they count where they go
                self._wait_for_load(pod, -pod.waiting_for_load)
        if self._awaited:  # loads on a removed pod load nowhere
            self._awaited = {m: a for m, a in self._awaited.items() if a.pod.name not in gone}
        self.migrated_loads += migrate(leaving, self.ready_pods(), self.copies, self.shape, now, self._lost,
                                       self._awaited)
        return sorted(gone)

    def _hurry(self, now: float, rate_of: dict[int, float]) -> None:
        """Move the awaited loads of the models requested now ahead in their pods' queues (`upgradePriority`)."""
        for model, awaited in self._awaited.items():
            if rate_of.get(model) and model in awaited.pod.cache:
                awaited.pod.loading.upgrade(awaited.load, now)

    def _count_awaited(self, now: float, rate_of: dict[int, float], until: float) -> None:
        """Count the requests that wait for a load, at this routing's rates, up to `until` (the end of the
        bucket) or the load's end, whichever is first; the next routing counts on."""
        for model, awaited in list(self._awaited.items()):
            if self._count_awaited_load(model, awaited, rate_of.get(model, 0.0), now, until):
                del self._awaited[model]

    def _count_awaited_load(self, model: int, awaited: AwaitedLoad, rate: float, now: float, until: float) -> bool:
        """Count the requests at `rate` that wait for `awaited` from `now` to `until`; True when it is done with
        (loaded by now, or its copy gone)."""
        pod, ready_at = awaited.pod, awaited.load.ready_at
        past = awaited.counted_until - max(now, ready_at)
        if past > 0.0 and awaited.rate:  # counted to an end that came sooner, or for a copy gone: given back
            self._wait_for_load(pod, -min(awaited.rate * past, pod.waiting_for_load))
            awaited.counted_until -= past
        held = model in pod.cache
        start, end = max(now, awaited.counted_until), min(until, ready_at)
        if end > start and rate and held:
            self._wait_for_load(pod, rate * (end - start))
            awaited.rate = rate
        awaited.counted_until = max(awaited.counted_until, end)
        return ready_at <= now or not held

    def _requeue(self, requests: float) -> None:
        ready = self.ready_pods()
        if ready:
            min(ready, key=lambda p: p.rate + p.backlog).backlog += requests
        else:
            self.orphan += requests

    # -- routing ----------------------------------------------------------------------------------------

    def route(self, now: float, models: list[int], rates: list[float], remaining_s: float) -> None:
        """Spread the bucket's rates over the Ready pods; cold-load models no pod holds."""
        self._caches_changed += 1
        ready = self.ready_pods()
        routing.begin(self.pods, ready)
        self._unrouted = 0.0 if ready else sum(rates)
        self._refused, self._refused_rate = {}, 0.0
        if self.stuck is not None:
            self.stuck.routed(())
        if not ready:
            return
        if self.orphan:
            orphan, self.orphan = self.orphan, 0.0
            self._requeue(orphan)
        cold, self._refused = routing.spread(ready, self.copies, self._regular, now, models, rates)
        self._refused_rate = sum(self._refused.values())
        # The loads requests already waited for, hurried before the cold loads queue (asked for first), and
        # counted after them (the cold loads count their own when queued)
        rate_of = dict(zip(models, rates, strict=True)) if self._awaited else None
        if rate_of is not None:
            self._hurry(now, rate_of)
        self._count_cold(cold, now, remaining_s)
        if rate_of is not None:
            self._count_awaited(now, rate_of, now + remaining_s)
        routing.end(self.pods)
        if self.stuck is not None:
            self.stuck.routed(ready)

    def retry_refused(self, now: float, remaining_s: float) -> None:
        """Try the loads every pod refused at the last routing again, as ModelMesh's next request for each
        model does (it keeps no record of a churn refusal); `remaining_s`: seconds left of the bucket."""
        if not self._refused:
            return
        ready = self.ready_pods()
        cold = routing.retry(ready, self.copies, self._regular, now, self._refused)
        if self.stuck is not None:
            self.stuck.routed(ready)
        if cold:
            self._caches_changed += 1
            self._refused_rate = sum(self._refused.values())
            self._count_cold(cold, now, remaining_s)

    def _count_cold(self, cold: list[tuple[int, float, SimPod]], now: float, remaining_s: float) -> None:
        """Queue the cold loads routing started, ahead of the loads waiting on their pods, and count them: their
        requests wait for the load under way there and their own (up to the end of the bucket, `remaining_s`
        from `now`; the next routing counts on)."""
        until = now + remaining_s
        for model, rate, target in cold:
            self.cold_loads += 1
            self._pending.cold_loads += 1
            last_used = self.copies.evicted.pop(model, None)
            if last_used is not None:
                self.reload_gaps.append(now - last_used)
            if model in self._lost:
                self._lost.discard(model)
                self.cold_loads_after_removal += 1
            awaited = AwaitedLoad(target, target.loading.add_urgent(model, now), now)
            if not self._count_awaited_load(model, awaited, rate, now, until):
                self._awaited[model] = awaited

    def _wait_for_load(self, pod: SimPod, requests: float) -> None:
        """Count `requests` that wait for a load on `pod` as delayed, now: the pod serves them as they arrive
        (a fluid), and its queue does not count them again (`waiting_for_load`)."""
        self._pending.delayed += requests
        self._pending.delayed_loading += requests
        pod.waiting_for_load += requests

    def _rate_check(self, now: float, evict: bool = True) -> None:
        interval = now - self._last_check
        self._last_check = now
        self.copies.rate_check(now, interval, self.pods, self.ready_pods(), evict)

    def warm(self, now: float, models: list[int], rates: list[float]) -> None:
        """Start as a runtime that has served this load for a while: its models (and copies of the hot
        ones, in the slots left) already loaded, nothing queued, and none of those loads counted. Where the
        models outnumber the slots, the busiest that fit are the ones held, as LRU caches keep them
        (warm_start.py); the others' loads are tried, and refused or not, from the trace's first routing on."""
        copies = self.copies
        models, rates = busiest_that_fit(models, rates, len(self.ready_pods()) * self.shape.cache_models)
        for _ in range(WARM_ROUNDS):  # each round may start copies; load them at once and route again
            self.route(now, models, rates, 0.0)
            for ready in self.ready_pods():
                ready.counted = {m: r * RATE_CHECK_S for m, r in ready.shares.items()}
                ready.counted_all = ready.rate * RATE_CHECK_S
                ready.young.clear()  # copies that have served a while: each has a measure of its bandwidth
            self._last_check = now - RATE_CHECK_S
            # Extra copies take free slots only: every held model is in use, and a runtime whose caches are full
            # of models in use keeps them before a second copy (the churn limit refuses it anyway, unless 0)
            self._rate_check(now, evict=False)
            loaded = copies.finish(math.inf, self.pods, evict=False)  # the copies it started, loaded at once
            for starts in copies.load_start.values():  # loaded long ago, as far as the next round knows
                for name in starts:
                    starts[name] = -math.inf
            if not loaded:  # the rate check asks for no more: as a runtime serving this load for a while is
                break
        self._last_check = now
        for pod in self.pods:  # the warm copies loaded before the trace: every loading thread free
            pod.counted, pod.counted_all, pod.counting_s = {}, 0.0, 0.0
            pod.loading.clear()
        self.cold_loads = self.copy_loads = self.cold_loads_after_removal = self.migrated_loads = 0
        self.janitor_removals = 0
        if self.stuck is not None:
            self.stuck.clear()
        self.reload_gaps = []
        self.refused = self._refused_rate = 0.0
        self._refused = {}
        self._awaited = {}  # the warm start's cold loads, done before the trace
        self._load_waits.clear()
        self._pending = TickStats()
        self._caches_changed += 1  # its last copies loaded after its last routing

    # -- time -------------------------------------------------------------------------------------------

    def step(self, now: float) -> TickStats:
        """Serve one tick; returns what happened in it (including cold loads since the last step)."""
        stats, self._pending = self._pending, TickStats()
        t = self.tick_s
        heavy_mark = self.copies.heavy_mark
        pods, shape = self.pods, self.shape
        # The tick counts for the next rate check on a Ready pod taking at least `heavy_mark` requests per second
        # (below it no copy on it is heavy or asks for more: rate_check.heavy_mark); its copies' requests are
        # added up when their shares change (`flush_counts`) or at the rate check, not every tick. (Inline: a
        # call per pod per tick cost more than the test.)
        for pod in pods:
            if pod.ready and pod.rate >= heavy_mark:
                pod.counting_s += t
        if self.stuck is not None:
            self.stuck.tick(t)
        # (Summed in locals, written back once: every pod every tick, the attributes' reads and writes added up)
        arrived, served, delayed, overloaded = self.arrived, self.served, stats.delayed, stats.overloaded
        mu = shape.pod_rps
        threshold, capacity = mu * shape.slo_queue_s, mu * t
        for pod in pods:
            if not pod.ready:
                continue
            a, s, d, o = serve(pod, mu, threshold, capacity, t)
            arrived += a
            served += s
            delayed += d
            if o:
                overloaded = True
        self.arrived, self.served, stats.delayed, stats.overloaded = arrived, served, delayed, overloaded
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
        cache_models, timed = self.shape.cache_models, self.shape.queue_timed
        if not per_model:
            return tuple(sample(pod, now, cache_models, None, queue_timed=timed) for pod in self.pods)
        if self._last_uses_at != self._caches_changed:
            self._last_uses, self._last_uses_at = {}, self._caches_changed
        known = self._last_uses
        samples = []
        for pod in self.pods:
            uses = known.get(pod)
            if uses is None:
                uses = known[pod] = last_uses(pod.cache)
            samples.append(sample(pod, now, cache_models, uses, queue_timed=timed))
        return tuple(samples)

    def load_waits(self, now: float) -> LoadWaits:
        """How long each load waited for a loading thread, of those under way or done by `now` (a copy)."""
        return self._load_waits.with_started((pod.loading for pod in self.pods), now)

    def queued(self) -> float:
        return sum(p.backlog for p in self.pods) + self.orphan
