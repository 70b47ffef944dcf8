"""Where each model's copies are, which copies are loading, and ModelMesh's rate check that asks for more.

A load puts a copy on a pod, evicting that pod's least recently used one when its cache is full. Every 10 s
ModelMesh's rate check (rate_check.py) gives a model more copies, placed as any load is (placement.py), when one
copy's own request rate over the last 10 s reached 90% of what its pod has left for it (untimed, `--queue-untimed`:
`--scaleup-rpm`, 2000 rpm): rate / threshold copies, at most max(2, a third of the pods), none while another copy's
load is recent.
A copy the rate check (or the regular-use rule) asks for serves once its pod has loaded it, in its pod's loading
queue (loading.py). The rate check also stamps each copy whose rate passed three quarters of its threshold
(`heavy`), and every unload that leaves a model more than two copies is kept (`last_unload`): the janitor reads both
(janitor.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from autoscaler.simulation.loading import Load
from autoscaler.simulation.placement import choose_pod
from autoscaler.simulation.pods import ClusterShape, SimPod, flush_counts
from autoscaler.simulation.rate_check import (
    HEAVY_SHARE,
    NEW_COPY_AHEAD_S,
    copies_to_load,
    copy_threshold,
    excluded,
    fair_level,
    flat_quiet_count,
    flat_threshold,
    heavy_mark,
    loaded_since,
    quiet_count,
    recent_load_cutoff,
    threshold,
    young_copies,
)


class ModelCopies:
    """The copies of every model on the pods of one runtime, loaded and loading."""

    def __init__(self, shape: ClusterShape) -> None:
        self.shape = shape
        self.holders: dict[int, list[SimPod]] = {}  # model -> pods holding a loaded copy
        self.copying: dict[tuple[int, str], Load] = {}  # (model, pod) -> the extra copy's load in the pod's queue
        # model -> the pods `copying` has a copy of it loading on: asked per model at every placement and rate
        # check, and copies can wait minutes in a busy pod's queue (a day of 20,000 functions: a third of mean-hpa's
        # time went to finding a model's among all)
        self._loading_at: dict[int, set[str]] = {}
        self.load_start: dict[int, dict[str, float]] = {}  # model -> pod -> when its copy there began loading
        # Untimed ModelMesh is not latency-based: every copy's threshold is the flat `scaleUpRpmThreshold`, 2000 rpm
        # unless set (rate_check.py)
        self.timed = shape.queue_timed
        self.flat_rps = flat_threshold(shape.scaleup_rpm)
        self.busy_mark = threshold(shape.pod_rps) if self.timed else self.flat_rps
        # Pods below this serve no copy over `HEAVY_SHARE` of its threshold (rate_check.heavy_mark): not counted
        self.heavy_mark = heavy_mark(shape.pod_rps) if self.timed else HEAVY_SHARE * self.flat_rps
        self.evicted: dict[int, float] = {}  # model -> last use of its last copy, evicted from a full cache
        # model -> when a copy of it was last unloaded leaving more than two (`ModelRecord.updateLastUnloadTime`:
        # "instanceIds.size() <= 2 ? 0L : System.currentTimeMillis()"); the janitor waits 80 s after it
        self.last_unload: dict[int, float] = {}

    def load(self, pod: SimPod, model: int, now: float, used: float | None = None) -> None:
        """Put a copy on `pod`, evicting its least recently used one; `used`: a moved copy's last use."""
        cache = pod.cache
        if len(cache) >= self.shape.cache_models:
            evicted, last_used = cache.popitem(last=False)
            pod.loading.cancel(evicted, now)  # a copy evicted while it loads stops its load
            self.load_start[evicted].pop(pod.name, None)
            pod.heavy.pop(evicted, None)
            pod.young.pop(evicted, None)
            holders = self.holders[evicted]
            holders.remove(pod)
            if not holders:
                del self.holders[evicted]
                self.evicted[evicted] = last_used
            self.unloaded(evicted, now)
        self.holders.setdefault(model, []).append(pod)
        self.load_start.setdefault(model, {}).setdefault(pod.name, now)  # a copy load began when asked for
        pod.young[model] = 0.0  # a new cache entry: no request completed on it yet
        if used is None:
            cache[model] = now
            return
        cache[model] = used  # a moved copy keeps its age: its place in the LRU order
        if len(cache) > 1:
            ordered = sorted(cache.items(), key=_last_used)
            cache.clear()
            cache.update(ordered)

    def drop(self, removed: Sequence[SimPod]) -> list[tuple[float, int]]:
        """Forget the copies of pods that go, and the loads they had started; (last used, model) of every model
        they held, its most recent use among them, once a model (whether or not a remaining pod holds it)."""
        gone = {p.name for p in removed}
        for key in [k for k in self.copying if k[1] in gone]:  # their loads stop with them
            self._forget_copy(key)
            self.load_start.get(key[0], {}).pop(key[1], None)
        leaving: dict[int, float] = {}
        for pod in removed:
            for model, used in pod.cache.items():
                self.load_start[model].pop(pod.name, None)
                holders = self.holders[model]
                holders.remove(pod)
                if not holders:
                    del self.holders[model]
                if used > leaving.get(model, -math.inf):
                    leaving[model] = used
        return [(used, model) for model, used in leaving.items()]

    def remove(self, pod: SimPod, model: int, now: float) -> None:
        """Unload the copy of `model` on `pod` (the janitor's scale-down; another pod holds a loaded one)."""
        del pod.cache[model]
        pod.loading.cancel(model, now)
        pod.heavy.pop(model, None)
        pod.young.pop(model, None)
        self.load_start[model].pop(pod.name, None)
        self.holders[model].remove(pod)
        self.unloaded(model, now)

    def unloaded(self, model: int, now: float) -> None:
        """A copy of `model` was unloaded at `now`: note it when more than two copies, loaded or loading, are left
        (`ModelRecord.updateLastUnloadTime`)."""
        held = len(self.holders.get(model, ()))
        if held > 2 or (held + self.loading(model) > 2):
            self.last_unload[model] = now
        else:
            self.last_unload.pop(model, None)

    def loading_on(self, model: int) -> set[str]:
        """The pods where a copy of `model` is loading."""
        return set(self._loading_at.get(model, ()))

    def start_copy(self, model: int, pod: SimPod, now: float, last_used: float) -> None:
        """An extra copy of `model` is asked of `pod` (in the model record from now); it serves once loaded, its
        load queued on `pod` with priority `last_used` (loading.py)."""
        self.copying[(model, pod.name)] = pod.loading.add(model, now, last_used)
        self._loading_at.setdefault(model, set()).add(pod.name)
        self.load_start.setdefault(model, {})[pod.name] = now

    def loading(self, model: int) -> int:
        """Copies of `model` still loading."""
        return len(self._loading_at.get(model, ()))

    def _forget_copy(self, key: tuple[int, str]) -> None:
        """The extra copy's load is over (loaded, or its pod gone)."""
        del self.copying[key]
        model, name = key
        names = self._loading_at[model]
        names.discard(name)
        if not names:
            del self._loading_at[model]

    def finish(self, now: float, pods: Sequence[SimPod], evict: bool = True) -> int:
        """Load the extra copies due by `now` on the pods still there; how many loaded. `evict` False: a copy whose
        pod is full by then is dropped, not loaded over a held model (the warm start's: several copies asked of one
        pod with one slot free each saw it free, as a copy takes no slot until loaded)."""
        if not self.copying:
            return 0
        by_name = {p.name: p for p in pods}
        loaded = 0
        for key, load in list(self.copying.items()):
            if load.ready_at <= now:
                self._forget_copy(key)
                pod = by_name.get(key[1])
                if pod is None or key[0] in pod.cache:
                    continue
                if not evict and len(pod.cache) >= self.shape.cache_models:
                    self.load_start.get(key[0], {}).pop(pod.name, None)
                    continue
                self.load(pod, key[0], now)
                loaded += 1
        return loaded

    def rate_check(self, now: float, interval: float, pods: Sequence[SimPod], ready: Sequence[SimPod],
                   evict: bool = True) -> None:
        """ModelMesh's `rateTrackingTask` (rate_check.py) over the requests each copy on a busy pod took
        since the last run (`interval` seconds ago): more copies of a model whose copy reached its threshold.
        `evict` False: a copy goes only where a pod has room, as a full pod under the churn limit takes it (the
        warm start's, whose held models are all in use: cluster.py)."""
        counted = [p for p in pods if p.counted_all or p.counting_s]
        for pod in counted:
            if pod.counted and pod.counting_s:  # shares changed since the last check: add the current ones up
                flush_counts(pod)
            pod.counted_all = 0.0
        mu = self.shape.pod_rps
        if interval > 0.0:  # completions count whether or not the check goes on (`afterInvoke`, l.2738)
            for pod in ready:
                if pod.young and pod.shares:
                    young_copies(pod.young, pod.shares, interval, min(1.0, mu / pod.rate) if pod.rate > mu else 1.0)
        if len(ready) < 2 or interval <= 0.0:  # l.5658: no other pod to copy to
            for pod in counted:
                pod.counted, pod.counting_s = {}, 0.0
            return
        cutoff = recent_load_cutoff(now, interval, self.shape.load_time_s)
        churn_age = self.shape.min_churn_age_s if evict else math.inf  # inf: every full pod refuses
        rates = [(p.name, p.rate) for p in ready]
        # Per model, the pods whose copy began loading after the cutoff, found once per check: each of a hot
        # model's thousands of copies looked through all the others' (a run of 3,750 pods took minutes a check)
        recent: dict[int, dict[str, float]] = {}
        for pod in counted:
            counts, pod.counted = pod.counted, {}
            factor = 1.0
            if not counts:  # one set of shares since the last check: the requests are share x seconds
                counts, factor = pod.shares, pod.counting_s
            pod.counting_s = 0.0
            if not factor:
                continue
            total = sum(counts.values()) * factor / interval
            quiet = quiet_count(mu, total, interval) if self.timed else flat_quiet_count(interval, self.flat_rps)
            least = quiet / factor
            if max(counts.values(), default=least) <= least:  # no copy to look at (below): `max` runs in C
                continue
            # The pod's fair level and its copies in use (the threshold's floor) are worked out at its first copy
            # over `least`, not for every counted pod: most pods have none, and counting a day's copies at every
            # check took a tenth of a run
            level: float | None = None
            active = 0
            for model, value in counts.items():
                if value <= least:  # neither heavy nor asking for a copy (most copies of a pod not saturated)
                    continue
                count = value * factor
                rate = count / interval
                if not self.timed:
                    limit = self.flat_rps
                else:
                    if level is None:
                        level = (fair_level([v * factor / interval for v in counts.values()], mu) if total > mu
                                 else math.inf)
                        active = sum(1 for v in counts.values() if v > 0.0)
                    limit = copy_threshold(mu, rate, total, pod.young.get(model, math.inf), level, active)
                held = model in pod.cache  # a loaded copy here: `holders` has the pod
                if held and rate > HEAVY_SHARE * limit:  # "if (rpm > heavyRpms) ce.setLastHeavyTime(now)" (l.5710)
                    pod.heavy[model] = now
                if rate < limit or not held:
                    continue
                if model not in recent:
                    recent[model] = {p: t for p, t in self.load_start.get(model, {}).items() if t > cutoff}
                if loaded_since(recent[model], cutoff, pod.name):
                    continue
                holders = self.holders[model]
                taken = {h.name for h in holders} | self._loading_at.get(model, set())
                candidates = len(ready) - len(taken)
                if candidates <= 0:
                    continue
                busy = excluded(rates, pod.name, pod.rate, self.busy_mark)
                if busy:
                    candidates -= sum(1 for name in busy if name not in taken) + len(busy)
                spares = [p for p in ready if p.name not in taken and p.name not in busy]
                for _ in range(copies_to_load(rate, limit, candidates, len(ready))):
                    spare = choose_pod(spares, self.shape.cache_models, now, -NEW_COPY_AHEAD_S, churn_age)
                    if spare is None:
                        break
                    spares.remove(spare)
                    self.start_copy(model, spare, now, now + NEW_COPY_AHEAD_S)
                    recent[model][spare.name] = now


def _last_used(item: tuple[int, float]) -> float:
    return item[1]
