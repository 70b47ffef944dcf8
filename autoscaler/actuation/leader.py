"""Leader election on a `coordination.k8s.io/v1` Lease, so that of several adapter replicas only one writes
pod-deletion costs (docs/design.md). Every replica keeps serving metrics; leadership only gates writes.

The algorithm is client-go's `leaderelection` package, so that it behaves the way operators know. This module is
its loop (`LeaseElector`); its parts are `lease_timing` (the three durations, the safety margin between them and
the client timeout it leaves), `lease_record` (the Lease on the wire, and the record as this replica last saw it,
timed by its own clock), `lease_news` and `lease_said` (what the log says of a failover, and in which words).

- Every `retry_period` (plus up to 1.2 x retry_period of jitter while waiting to acquire) a replica reads the
  Lease, and takes it where it is free or expired (`SeenLease.expired`: by this replica's own clock).
- The leader renews every `retry_period`. If it cannot renew within `renew_deadline` it stops leading; since
  `renew_deadline < lease_duration`, it has stopped before any other replica may take over. A renewal that
  finds another holder ends leadership at once (client-go waits for the deadline; writing on is never right).
  Its deadline runs from when its last successful attempt *started* (`lease_timing` says why).
- On a clean shutdown the leader releases the Lease (empty holder, 1 s duration), so a
  follower takes over at its next retry. The actuator first waits for the leader's writes in flight
  (`autoscaler.actuation.write_fence`): released at once, the Lease let the next leader write before a write of
  the old one landed. Where one of them got no answer (it may still land) the Lease is left to expire
  (`release_on_stop`). It is renewed no more meanwhile (`stop_trying`): those writes were sent within the term,
  which the margin covers as it does for a leader that cannot renew, so the Lease expires 15 s after the renewal
  before the stop, not after the last of up to a client timeout of renewals while the actuator waits.
- A failed attempt whose answer carries a `Retry-After` (429 from API Priority and Fairness, some 503s) is not
  followed by another before it has passed: the server throttles the adapter's whole flow, and retrying every
  retry period only adds to its load. A follower waits for it (at most a lease duration); the leader waits at
  most until its renew deadline, where it stops leading as on any failure to renew.

`LeaseElector.run()` does all of it until cancelled; `try_acquire_or_renew()` and `release()` are the single
steps, for tests with an injected clock. Listeners hear every change of `is_leader`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable

from autoscaler.actuation.lease_news import LeaseNews
from autoscaler.actuation.lease_record import LeaseStore, SeenLease, holder_spec, new_lease, released_spec
from autoscaler.actuation.lease_said import named
from autoscaler.actuation.lease_timing import JITTER_FACTOR, LeaseConfig
from autoscaler.kube.backoff import ServerThrottle
from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.plugin_waits import noting_plugin_waits
from autoscaler.kube.timestamps import micro_time

log = logging.getLogger(__name__)


class LeaseElector:
    """Acquires, renews and releases one Lease; `is_leader` says whether this replica may write now."""

    def __init__(
        self,
        store: LeaseStore,
        lease: LeaseConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self._store = store
        self.config = lease
        self._clock = clock
        self._wall_clock = wall_clock
        self._sleep = sleep
        self._rand = rand
        self._leader = False
        self._lead_until = -math.inf  # our monotonic time when the current term ends unless renewed
        self._seen = SeenLease()
        self._news = LeaseNews(lease)
        self._listeners: list[Callable[[bool], None]] = []
        self._throttle = ServerThrottle(clock=clock)  # the last failed attempt's Retry-After
        self.release_on_stop = True
        """Whether `run()` releases the Lease when cancelled. False: a write of this term may still land (it got
        no answer), so followers must wait until the Lease expires."""
        self._stopping = False  # `stop_trying` was called: no more attempts

    @property
    def is_leader(self) -> bool:
        """True while this replica leads: turns false at the renew deadline even before the loop notices."""
        return self._leader and self._clock() < self._lead_until

    @property
    def holder(self) -> str | None:
        """The holder named in the Lease as last seen (None: never read, or empty)."""
        return self._seen.holder

    def stop_trying(self) -> None:
        """Make no more attempts on the Lease, neither a renewal nor an acquisition (one under way ends as it
        does); `run()` waits to be cancelled. For a replica that is stopping and starts no more writes: those in
        flight were sent within its term, which the margin covers whether it is renewed or not (as for a leader
        that lost the API server), and renewing on while the actuator waited for them (up to a client timeout)
        only put the Lease's expiry, where it is left to expire, that much later."""
        self._stopping = True

    async def _held_if_stopping(self) -> None:
        """Return at once, or, once `stop_trying` was called, never (until cancelled)."""
        if self._stopping:
            await asyncio.get_running_loop().create_future()

    def add_listener(self, callback: Callable[[bool], None]) -> None:
        """Call `callback(is_leader)` on every change of leadership, from the elector's task."""
        self._listeners.append(callback)

    async def run(self) -> None:
        """Acquire, lead until renewal fails, repeat; when cancelled, release the Lease if this replica holds it."""
        try:
            while True:
                acquired_from = await self._acquire()
                self._lead_until = acquired_from + self.config.renew_deadline_s
                self._set_leader(True)
                await self._renew(acquired_from)
                self._set_leader(False)
        except asyncio.CancelledError:
            if self.release_on_stop:
                await self.release()  # also when cancelled mid-acquire: a write may have landed; release checks
            else:
                self._set_leader(False)
                cfg = self.config
                if self.holder == cfg.identity:
                    log.warning("lease %s/%s: not released (a write may still land); followers take over when "
                                "it expires", cfg.namespace, cfg.name)
            raise

    async def try_acquire_or_renew(self) -> bool:
        """One attempt: take the Lease if it is free or expired, renew it if it is ours. True on success."""
        try:
            result = await self._try_acquire_or_renew()
        except KubeApiError as error:
            self._throttle.replace(error)
            self._news.failed(f"attempt failed: {error}", routine=error.status == 409)  # 409: a lost race
            return False
        self._throttle.clear()
        self._news.answered()
        return result

    async def _try_acquire_or_renew(self) -> bool:
        cfg = self.config
        wall = micro_time(self._wall_clock())
        lease = await self._store.get_lease(cfg.namespace, cfg.name)
        now = self._clock()  # after the read: the record may have changed until the server answered
        if lease is None:
            if self._held_by_another(now):
                return False
            self._news.takeover(self._seen.spec, self._seen, now, leading=self._leader, deleted=True)
            spec = holder_spec(cfg, acquire_time=wall, renew_time=wall, transitions=0)
            self._seen.observe(await self._store.create_lease(cfg.namespace, new_lease(cfg, spec)), self._clock())
            return True
        spec = lease.get("spec") or {}
        self._seen.observe(lease, now)
        holder = spec.get("holderIdentity") or ""
        if holder and holder != cfg.identity and not self._seen.expired(now):
            self._news.holder(spec, leading=self._leader)
            return False
        ours = holder == cfg.identity
        self._news.takeover(spec, self._seen, now, leading=self._leader)
        transitions = int(spec.get("leaseTransitions") or 0)
        new_spec = holder_spec(
            cfg,
            acquire_time=(spec.get("acquireTime") or wall) if ours else wall,
            renew_time=wall,
            transitions=transitions if ours else transitions + 1,
        )
        written = await self._store.replace_lease(cfg.namespace, cfg.name, {**lease, "spec": new_spec})
        self._seen.observe(written, self._clock())
        return True

    async def release(self) -> bool:
        """Give the Lease up (empty holder, 1 s duration) so a follower takes over at once; True on success."""
        cfg = self.config
        self._set_leader(False)
        try:
            lease = await self._store.get_lease(cfg.namespace, cfg.name)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != cfg.identity:
                return False
            released = released_spec(lease.get("spec") or {}, micro_time(self._wall_clock()))
            await self._store.replace_lease(cfg.namespace, cfg.name, {**lease, "spec": released})
        except KubeApiError as error:
            log.warning("lease %s/%s: release failed, followers take over when it expires: %s",
                        cfg.namespace, cfg.name, error)
            return False
        log.info("lease %s/%s released by %s", cfg.namespace, cfg.name, cfg.identity)
        return True

    def _held_by_another(self, now: float) -> bool:
        """Whether the Lease, now gone, was last seen held by another replica less than its duration ago. A
        deleted Lease does not stop its holder: it leads until its next attempt, a retry period or up to a
        renew deadline later. Created at once, the follower led beside it, both writing; waiting out the
        duration it last saw is the same wait as for a Lease that stopped changing, and the holder, if it
        lives, creates the Lease again meanwhile."""
        return self._seen.held_by_other(self.config.identity, now)

    async def _acquire(self) -> float:
        """Try until the Lease is ours; returns when the successful attempt started."""
        cfg = self.config
        self._news.waiting()
        while True:
            await self._held_if_stopping()
            started = self._clock()
            if await self._attempt(cfg.renew_deadline_s):
                return started
            wait = cfg.retry_period_s * (1.0 + JITTER_FACTOR * self._rand())
            await self._sleep(max(wait, min(self._server_wait(), cfg.lease_duration_s)))

    async def _renew(self, last_renewed: float) -> None:
        """Renew every retry period (after a failure with `Retry-After`, once it has passed, if that comes before
        the renew deadline); return when leadership is lost. `last_renewed` and every later renewal count from
        when the successful attempt started."""
        cfg = self.config
        while True:
            until_deadline = cfg.renew_deadline_s - (self._clock() - last_renewed)
            await self._sleep(max(0.0, min(max(cfg.retry_period_s, self._server_wait()), until_deadline)))
            await self._held_if_stopping()
            started = self._clock()
            remaining = cfg.renew_deadline_s - (started - last_renewed)
            if remaining > 0 and self._server_wait() <= 0 and await self._attempt(remaining):
                last_renewed = started
                self._lead_until = started + cfg.renew_deadline_s
                continue
            now = self._clock()
            if self._seen.held_by_other(cfg.identity, now):
                log.warning("lease %s/%s: now held by %s; stopping writes", cfg.namespace, cfg.name,
                            named(self.holder or ""))
                return
            if now - last_renewed >= cfg.renew_deadline_s:
                log.warning("lease %s/%s: not renewed within %.1f s; stopping writes", cfg.namespace, cfg.name,
                            cfg.renew_deadline_s)
                return

    def _server_wait(self) -> float:
        """Seconds until the last failed attempt's `Retry-After` has passed (0: it has)."""
        return self._throttle.remaining()

    async def _attempt(self, timeout_s: float) -> bool:
        # A call may wait for the kubeconfig's exec plugin before it goes out (no valid token or certificate
        # left): then the time went there, not to the API server, and the warning says so.
        with noting_plugin_waits() as waits:
            try:
                async with asyncio.timeout(timeout_s):
                    return await self.try_acquire_or_renew()
            except TimeoutError:
                self._news.failed(f"no answer within {timeout_s:.1f} s{waits.said()}")
                return False

    def _set_leader(self, leader: bool) -> None:
        if leader == self._leader:
            return
        self._leader = leader
        self._news.leadership(leader)
        for listener in self._listeners:
            try:
                listener(leader)
            except Exception:
                log.exception("leadership listener failed")
