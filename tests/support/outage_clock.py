"""An outage of the fake Kubernetes API played on a clock of the test's own: every retrying loop's wait ends in the
order they fall due (`Waits`), the API comes back by the time the first falls due past the outage's end
(`back_after_outage`). How soon a loop is current again is then read off that clock: no wall-clock window."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable

from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

SETTLED_S = 120.0
"""How long after the API's return, on the test's clock, a loop may take before the test gives up on it."""


class Waits:
    """Every loop's pending wait, ended in the order they fall due as the test says (`wake_next`)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.pending: list[tuple[float, int, asyncio.Future[None]]] = []
        self.woken = 0
        self._order = itertools.count()

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self.pending, (self.now + seconds, next(self._order), future))
        await future

    def next_due(self) -> float:
        return self.pending[0][0]

    def wake_next(self) -> None:
        due, _, future = heapq.heappop(self.pending)
        self.now = max(self.now, due)
        self.woken += 1
        future.set_result(None)


async def back_after_outage(kube: FakeKubeApi, waits: Waits, outage_s: float, *, loops: int, resource: str,
                            current: Callable[[], bool]) -> tuple[float, int]:
    """Play an outage of `outage_s` from now on `waits`' clock (the caller paused `kube`, and what `current` reads
    has gone stale): the waits of the `loops` loops (each waiting, or, once the API is back, watching `resource`)
    end one after another, the API resumed once the next falls due at or past the outage's end, until `current()`.
    Returns how long after the API's return that was, and how many waits ended while the API was down."""
    end = waits.now + outage_s
    down, woken_while_down = True, 0

    def settled() -> bool:
        """Every loop waiting or watching: none has an attempt in flight."""
        return current() or len(waits.pending) + kube.watch_count(resource) == loops

    while not current():
        await eventually(settled)
        if current():
            break
        if not waits.pending:  # every loop watching again: what it replays makes it current
            await eventually(current)
            break
        if down and waits.next_due() >= end:
            await kube.resume()  # the API is back by the time the next attempt falls due
            down = False
        if down:
            woken_while_down += 1
        waits.wake_next()
        assert waits.now < end + SETTLED_S, f"not current {SETTLED_S:g} s after the API came back"
    return waits.now - end, woken_while_down
