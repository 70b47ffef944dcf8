"""Noticing a refresh that has stopped delivering: hung, not dead.

A refresh process that dies closes its workers' pipes and they exit (`autoscaler.workers`). One that hangs (a
deadlock, a wait that never ends, a stopped process) keeps them open: the workers would serve its last values
forever, Ready and live, while the load moves on and the HPA acts on numbers that no longer change. The same
holds for a refresh loop that fails every time in the one-process mode.

So the serving side watches how long its answers have not been replaced. Past `limit_s` (the age at which the
adapter calls data stale, plus one refresh: `ServeSettings.stalled_after_s`) the values are older than the
adapter itself would serve, and the API says so: runtime answers are 503 (the HPA holds its replicas),
`/readyz` fails (the Service sends the HPA to another replica) and `/livez` fails (the kubelet restarts the
pod, the only cure for a hang). The log says when it starts and when values arrive again. Before the first
snapshot the time is counted from the serving side's start, against `limit_s` plus `FIRST_VALUES_ALLOWANCE_S`
(start-up: discovery's first inventory, the first scrape of every pod, on a node that may be busy): a refresh
that hangs before it ever delivers (a deadlock in start-up) would otherwise leave the pod unready for good and
never restarted, since `/readyz` alone failing restarts nothing.

A serving worker that skips the snapshots it is sent (at its open-file limit: `autoscaler.skipped_snapshots`)
serves values that age the same way, and is judged the same way; it sets `held_back`, which the log and the 503
say instead of a hung refresh.

A refresh that stopped on purpose is not hung: after SIGTERM the refresh side stops and marks its last values
not ready (`--shutdown-delay`), and they are served, `/livez` passing, until the port closes. Judged by their
age, a delay longer than `limit_s` turned the drain into 503s (the HPA's FailedGetExternalMetric, which the
delay is there to avoid) and an ERROR that the refresh was hung.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable

from aiohttp import web

from autoscaler.api.snapshot import SnapshotStore
from autoscaler.api.status import ApiError

log = logging.getLogger(__name__)

FIRST_VALUES_ALLOWANCE_S = 120.0
"""What start-up may take beyond `limit_s` before the first values count as stalled (a loaded test machine took
over 10 s for a first refresh that normally takes well under one)."""


class StallWatch:
    """How long the answers of `store` have not been replaced, judged against `limit_s`."""

    def __init__(self, store: SnapshotStore, limit_s: float, *, refresh: str = "the refresh process",
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._store = store
        self.limit_s = limit_s
        self._refresh = refresh
        self._clock = clock
        self._started = clock()
        self._reported = False
        self.held_back: str | None = None
        """Why this process has not taken the values sent to it (None: it took every one), said in place of a hung
        refresh."""
        self.interval_s = min(1.0, limit_s / 4)
        """How often `watch` checks."""
        self.suspect = True
        """False while no stall can begin before the watch's next check: a runtime request then skips
        `refuse_if_stalled` (a call and a clock read on every request). Set by every `check` (True until the
        first): true from two intervals before the limit on, so a stall is still refused from its very
        start, and while values are late (`refuse_if_stalled` decides then, exactly)."""

    def draining(self) -> bool:
        """The refresh side has withdrawn readiness from values it delivered: only its drain after SIGTERM does
        (a snapshot is marked ready from the first refresh on), and the drain stops the refresh on purpose."""
        return self._store.updated_at is not None and not self._store.current.ready

    def stalled_for(self) -> float | None:
        """Seconds since the last snapshot (before the first, since the start) when more than `limit_s` and
        not `draining`, else None."""
        updated = self._store.updated_at
        if updated is None:
            age = self._clock() - self._started
            return age if age > self.limit_s + FIRST_VALUES_ALLOWANCE_S else None
        age = self._clock() - updated
        return age if age > self.limit_s and not self.draining() else None

    def refuse_if_stalled(self) -> None:
        """Raise the 503 a client is told while stalled; nothing otherwise. (`stalled_for`'s test inline: this
        runs on every runtime request.)"""
        updated = self._store.updated_at
        if updated is not None:
            if (age := self._clock() - updated) > self.limit_s and not self.draining():
                if self.held_back is not None:
                    raise ApiError(503, f"this serving worker's values are {age:.0f} s old ({self.held_back}); "
                                        "the HPA holds its current replicas")
                raise ApiError(503, f"the adapter's values have not been refreshed for {age:.0f} s (its refresh is "
                                    "hung or far too slow); the HPA holds its current replicas")
        elif (age := self._clock() - self._started) > self.limit_s + FIRST_VALUES_ALLOWANCE_S:
            raise ApiError(503, f"the adapter's values have not come since the start, {age:.0f} s ago (its "
                                "refresh is hung or far too slow); the HPA holds its current replicas")

    def check(self) -> None:
        """Log when a stall starts and when it ends (once each); set `suspect` for the requests until the next
        check."""
        updated = self._store.updated_at
        if updated is None:
            self.suspect = self._clock() - self._started + 2 * self.interval_s > self.limit_s + FIRST_VALUES_ALLOWANCE_S
        else:
            self.suspect = self._clock() - updated + 2 * self.interval_s > self.limit_s and not self.draining()
        age = self.stalled_for()
        if age is not None and not self._reported:
            self._reported = True
            log.error("no %s from %s for %.0f s (more than %.0f s: %s); answering 503 and failing /readyz and "
                      "/livez so that Kubernetes restarts the pod",
                      "new values" if self._store.updated_at is not None else "values at all since the start",
                      self._refresh, age, self.limit_s, self.held_back or "it is hung or far too slow")
        elif age is None and self._reported:
            self._reported = False
            log.info("values from %s arrive again; serving them", self._refresh)

    async def watch(self) -> None:
        """`check` a few times per limit, until cancelled: the log speaks even if no probe asks."""
        while True:
            self.check()
            await asyncio.sleep(self.interval_s)


STALL_KEY: web.AppKey[StallWatch] = web.AppKey("stall", StallWatch)


def stall_context(watch: StallWatch) -> Callable[[web.Application], AsyncIterator[None]]:
    """A cleanup context that runs `watch.watch()` while the app serves."""

    async def context(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(watch.watch(), name="stall-watch")
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    return context
