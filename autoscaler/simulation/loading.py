"""One pod's loading queue: its loading threads and the loads that wait for them, in ModelMesh's order.

ModelMesh runs a pod's loads on `maxLoadingConcurrency` threads (1 in ModelMesh Serving's built-in adapters) fed
by a priority queue (`loadingQueue = new PriorityBlockingQueue<>`, kserve/modelmesh ModelMesh.java l.504; "larger
priority can overtake smaller priority", l.1832). A load's priority is its model's last use (`loadLocal`,
l.5041): a pre-shutdown's copy keeps the leaving copy's, a rate check's copy is 20 s ahead (`newCopiesTimestamp`,
l.5675), a second copy for regular use has the last check's time. A load a request waits for is 2 hours ahead:
a cold load from the start (`prioritize`), a queued copy once a request for its model arrives
(`upgradePriority(now + 3600_000L, now + 7200_000L)`, l.4432), so of two such loads the one asked for later goes
first. A load under way runs to its end; the others run in priority order, first come first within equal
priority, as the threads free up. A copy evicted from its pod's cache before its load is done stops it (its
cache entry's `remove`: a queued load is dropped, one under way cancelled, `loadFuture.cancel(true)`, l.1932, which
interrupts its thread), and the loads after it move up: the freed thread takes the next load at once.

Each `Load` carries its current `ready_at`, moved back when a load of higher priority is queued before it and up
when one before it stops, so whoever waits for it (a copy the rate check asked for, a model held nowhere or
whose only copies left) reads the time as it stands.

How long each load waited for a thread, from asked to started, goes to the queue's `LoadWaits` (one a runtime,
shared by its pods' queues) once it is done, or as it stands when it is stopped (its copy evicted, `cancel`), its
pod goes (`close`) or the trace ends (`LoadWaits.with_started`): every load a thread took, whatever became of it.
The report shows them: what the runtime's `maxLoadingConcurrency` costs its loads. A cold load no thread took is
counted apart, by why (`LoadWaits.cold_evicted`, `cold_pod_removed`, `cold_queued`): the report's cold loads are
every load a request asked for, and its waits line said "11761 cold loads" under a table of 13,290 without a word
of the 1,529 others.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from heapq import heapify, heappop, heappush
from itertools import count, islice, takewhile
from typing import Final

URGENT_AHEAD_S: Final = 7200.0
"""A load a request waits for is this far ahead of now in priority (`now + 7200_000L`, l.4432 and l.5041)."""


@dataclass(slots=True, eq=False)
class Load:
    """One load on a pod: queued, under way (`start` <= now) or done (`ready_at` <= now)."""

    model: int
    priority: float  # larger loads first (a model's last use, or 2 hours ahead for one a request waits for)
    order: int  # first come first, within equal priority
    asked: float = 0.0
    cold: bool = False  # a cold load (queued as one a request waits for), not a copy
    start: float = math.inf
    ready_at: float = math.inf


@dataclass(slots=True)
class LoadWaits:
    """Seconds each load waited for a loading thread (from asked to started): cold loads, and copies (of the rate
    check, the regular-use rule and a scale-down's pre-shutdown)."""

    # Doubles, not a list of floats: a day of 46,000 functions runs a few hundred thousand loads a policy
    cold: array[float] = field(default_factory=lambda: array("d"))
    copies: array[float] = field(default_factory=lambda: array("d"))
    # Cold loads no thread took: their copy evicted from a full cache first (the model's next request loads it
    # again), their pod removed first (its pre-shutdown copies the model elsewhere), or still queued at the end
    # (set by `with_started` only); with `cold`, every cold load once
    cold_evicted: int = 0
    cold_pod_removed: int = 0
    cold_queued: int = 0

    def add(self, load: Load) -> None:
        (self.cold if load.cold else self.copies).append(load.start - load.asked)

    def clear(self) -> None:
        del self.cold[:], self.copies[:]
        self.cold_evicted = self.cold_pod_removed = self.cold_queued = 0

    def add_started(self, queue: LoadingQueue, now: float) -> None:
        """Add the waits of the loads `queue` has under way or done by `now`, not counted yet."""
        for load in queue.started(now):
            self.add(load)

    def with_started(self, queues: Iterable[LoadingQueue], now: float) -> LoadWaits:
        """These waits and those of the loads `queues` have under way or done by `now`, not counted yet, and the
        cold loads they still have queued (`cold_queued`)."""
        waits = LoadWaits(array("d", self.cold), array("d", self.copies), self.cold_evicted, self.cold_pod_removed)
        for queue in queues:
            waits.add_started(queue, now)
            waits.cold_queued += sum(1 for load in queue.loads if load.cold and load.start > now)
        return waits


def _run_order(load: Load) -> tuple[float, int]:
    return (-load.priority, load.order)


@dataclass(slots=True)
class LoadingQueue:
    """The loads one pod has under way and waiting, in the order they run (by start: those under way first,
    then the waiting ones by priority)."""

    threads: int
    load_time_s: float
    waits: LoadWaits = field(default_factory=LoadWaits)
    loads: list[Load] = field(default_factory=list)
    _serial: count[int] = field(default_factory=count)

    def add(self, model: int, now: float, priority: float, cold: bool = False) -> Load:
        """Queue a load of `model` at `now`; it runs once the loads under way and those of higher priority are
        done."""
        load = Load(model, priority, next(self._serial), now, cold)
        self._insert(load, now)
        return load

    def add_urgent(self, model: int, now: float) -> Load:
        """Queue a load a request waits for (a cold load): after those under way and other urgent ones only."""
        return self.add(model, now, now + URGENT_AHEAD_S, cold=True)

    def cancel(self, model: int, now: float) -> None:
        """The copy of `model` left the pod's cache: stop its load if not done, and move the loads after it up."""
        loads = self.loads
        index = next((i for i, load in enumerate(loads) if load.model == model), None)
        if index is None or loads[index].ready_at <= now:
            return
        load = loads[index]
        del loads[index]
        if load.start <= now:  # a thread took it: it waited, as a load under way when its pod goes
            self.waits.add(load)
        elif load.cold:
            self.waits.cold_evicted += 1
        load.start = load.ready_at = now  # stopped: whoever reads it finds it over
        if index < len(loads):
            self._reschedule(now)

    def upgrade(self, load: Load, now: float) -> None:
        """A request waits for `load`: move it ahead as ModelMesh's `upgradePriority` does (a no-op once it runs,
        or when it is already that far ahead)."""
        if load.start <= now or load.priority >= now + URGENT_AHEAD_S / 2:
            return
        self.loads.remove(load)
        load.priority = now + URGENT_AHEAD_S
        self._insert(load, now)

    def clear(self) -> None:
        """Forget every load (the warm start's, loaded before the trace)."""
        self.loads = []

    def started(self, now: float) -> Iterator[Load]:
        """The loads under way or done by `now` whose waits are not counted yet (those done are counted as the
        queue next moves)."""
        return takewhile(lambda load: load.start <= now, self.loads)

    def close(self, now: float) -> None:
        """The pod goes at `now`: count the waits of the loads started by then and the cold loads not, and forget
        every load."""
        self.waits.add_started(self, now)
        self.waits.cold_pod_removed += sum(1 for load in self.loads if load.cold and load.start > now)
        self.loads = []

    def _insert(self, load: Load, now: float) -> None:
        """Put `load` among the waiting ones by priority and start the waiting ones from there as threads free.

        A cold load on a pod is queued at every one (a day of 5,000 models: 140,000 of them, behind 38 loads on
        average), so the order is kept rather than sorted again, and with one thread the loads after the new
        one move back by exactly its load time."""
        first = self._drop_done(now)
        loads = self.loads
        place = bisect_right(loads, _run_order(load), lo=first, key=_run_order)
        loads.insert(place, load)
        self._start_from(place, first, now)

    def _reschedule(self, now: float) -> None:
        """Start the waiting loads again from the first, as the threads free (after a load stopped)."""
        first = self._drop_done(now)
        self._start_from(first, first, now)

    def _start_from(self, place: int, first: int, now: float) -> None:
        """Start the loads from `place` on as the threads free (the first `first` are under way): with one thread
        those before `place` keep their times; with several, every waiting load is started again from `first`.

        Only as many free threads as there are loads are counted: more are never used, and a list the size of
        `--load-concurrency` (every load at once, 1e8) took a minute and 1.6 GB on a 4-minute trace."""
        loads = self.loads
        if self.threads == 1:  # one after another from the end of the one before (or now, when none is)
            free = loads[place - 1].ready_at if place else now
            step = self.load_time_s
            for waiting in islice(loads, place, None):
                waiting.start = free
                free = waiting.ready_at = free + step
            return
        free_at = [load.ready_at for load in loads[:first]] + [now] * (min(self.threads, len(loads)) - first)
        heapify(free_at)
        for waiting in islice(loads, first, None):
            waiting.start = max(now, heappop(free_at))
            waiting.ready_at = waiting.start + self.load_time_s
            heappush(free_at, waiting.ready_at)

    def _drop_done(self, now: float) -> int:
        """Forget the loads done by `now`; how many are under way (they lead the list)."""
        loads = self.loads
        under_way = 0
        for load in loads:
            if load.start > now:
                break
            under_way += 1
        if any(load.ready_at <= now for load in islice(loads, under_way)):
            running = []
            for load in loads[:under_way]:
                if load.ready_at > now:
                    running.append(load)
                else:
                    self.waits.add(load)
            loads[:under_way] = running
            under_way = len(running)
        return under_way
