"""One pod's loading queue: its loading threads and the loads that wait for them, in ModelMesh's order.

ModelMesh runs a pod's loads on `maxLoadingConcurrency` threads (1 in ModelMesh Serving's built-in adapters) fed
by a priority queue (`loadingQueue = new PriorityBlockingQueue<>`, kserve/modelmesh ModelMesh.java l.504; "larger
priority can overtake smaller priority", l.1832). A load's priority is its model's last use (`loadLocal`,
l.5041): a pre-shutdown's copy keeps the leaving copy's, a rate check's copy is 20 s ahead (`newCopiesTimestamp`,
l.5675), a second copy for regular use has the last check's time. A load a request waits for is 2 hours ahead:
a cold load from the start (`prioritize`), a queued copy once a request for its model arrives
(`upgradePriority(now + 3600_000L, now + 7200_000L)`, l.4432), so of two such loads the one asked for later goes
first. A load under way runs to its end; the others run in priority order, first come first within equal
priority, as the threads free up.

Each `Load` carries its current `ready_at`, moved back when a load of higher priority is queued before it, so
whoever waits for it (a copy the rate check asked for, a model whose only copies left) reads the time as it
stands.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import count
from typing import Final

URGENT_AHEAD_S: Final = 7200.0
"""A load a request waits for is this far ahead of now in priority (`now + 7200_000L`, l.4432 and l.5041)."""


@dataclass(slots=True, eq=False)
class Load:
    """One load on a pod: queued, under way (`start` <= now) or done (`ready_at` <= now)."""

    priority: float  # larger loads first (a model's last use, or 2 hours ahead for one a request waits for)
    order: int  # first come first, within equal priority
    start: float = math.inf
    ready_at: float = math.inf


@dataclass(slots=True)
class LoadingQueue:
    """The loads one pod has under way and waiting, in the order they run."""

    threads: int
    load_time_s: float
    loads: list[Load] = field(default_factory=list)
    _serial: count[int] = field(default_factory=count)

    def add(self, now: float, priority: float) -> Load:
        """Queue a load at `now`; it runs once the loads under way and those of higher priority are done."""
        load = Load(priority, next(self._serial))
        self.loads.append(load)
        self._schedule(now)
        return load

    def add_urgent(self, now: float) -> Load:
        """Queue a load a request waits for (a cold load): after those under way and other urgent ones only."""
        return self.add(now, now + URGENT_AHEAD_S)

    def upgrade(self, load: Load, now: float) -> None:
        """A request waits for `load`: move it ahead as ModelMesh's `upgradePriority` does (a no-op once it runs,
        or when it is already that far ahead)."""
        if load.start <= now or load.priority >= now + URGENT_AHEAD_S / 2:
            return
        load.priority = now + URGENT_AHEAD_S
        self._schedule(now)

    def clear(self) -> None:
        """Forget every load (the warm start's, loaded before the trace)."""
        self.loads = []

    def _schedule(self, now: float) -> None:
        """Drop the loads done by `now`, keep those under way, and run the rest in priority order as threads free."""
        running = [load for load in self.loads if load.start <= now < load.ready_at]
        waiting = [load for load in self.loads if load.start > now]
        waiting.sort(key=lambda load: (-load.priority, load.order))
        free = [load.ready_at for load in running] + [now] * (self.threads - len(running))
        for load in waiting:
            thread = min(range(len(free)), key=free.__getitem__)
            load.start = max(now, free[thread])
            load.ready_at = free[thread] = load.start + self.load_time_s
        self.loads = running + waiting
