"""Leader election on a `coordination.k8s.io/v1` Lease, so that of several adapter replicas only one writes
pod-deletion costs (docs/design.md). Every replica keeps serving metrics; leadership only gates writes.

The algorithm is client-go's `leaderelection` package, so that it behaves the way operators know:

- Every `retry_period` (plus up to 1.2 x retry_period of jitter while waiting to acquire) a replica reads the
  Lease. A Lease held by someone else counts as expired once its record (holder, renewTime, ...) has not
  changed for `leaseDurationSeconds` **as measured by this replica's own monotonic clock** from when it first
  saw that record: clocks of different machines are never compared. An expired or empty Lease is taken with a
  conditional PUT (its resourceVersion), so of two replicas racing for it exactly one succeeds (the other gets
  409 Conflict); `leaseTransitions` counts the changes of holder.
- The leader renews every `retry_period`. If it cannot renew within `renew_deadline` it stops leading; since
  `renew_deadline < lease_duration`, it has stopped before any other replica may take over. A renewal that
  finds another holder ends leadership at once (client-go waits for the deadline; writing on is never right).

The safety margin is `lease_duration - renew_deadline`, and every delay is counted against it, never for it:
- the leader's deadline runs from when its last successful attempt *started* (its write may have landed at
  any moment after that; a slow answer must not extend its term), and `is_leader` turns false at that
  deadline by the clock, whenever the loop gets to notice;
- a follower stamps a record it reads with the time the read *returned* (the record may have changed just
  before the server answered);
- every Kubernetes call has a client timeout shorter than the margin (`client_timeout_s`), so a write the
  old leader sent just before its deadline has finished or been abandoned before anyone may take over.
- When the leader dies, a follower takes over one lease duration after it first saw the last renewal, at its
  next retry: 15-24 s after that renewal at the defaults (each of the two waits is up to one jittered retry
  period, 2.2 x 2 s). On a clean shutdown the leader releases the Lease (empty holder, 1 s duration), so a
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

A failover is read from the surviving replica's log (`autoscaler.actuation.lease_said` words it): a follower names
the holder once, with its record's expiry (`renewTime` + `leaseDurationSeconds`), and again only when the holder
changes; the line that says it leads names the previous holder and why it could take over: released (INFO) or
expired (WARNING: a replica died, or lost the API server, without letting go).

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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from autoscaler.actuation.lease_said import Takeover, Term, holder_of, named, renewed_until, term_of, took_over
from autoscaler.kube.backoff import ServerThrottle
from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.plugin_waits import noting_plugin_waits
from autoscaler.kube.timestamps import micro_time

if TYPE_CHECKING:  # the raw client imports aiohttp: `serve`'s start-up checks use LeaseConfig without it
    from autoscaler.kube.raw import JSON

log = logging.getLogger(__name__)

JITTER_FACTOR: Final = 1.2  # client-go's JitterFactor for acquire retries
DEFAULT_CLIENT_TIMEOUT_S: Final = 5.0


def client_timeout_s(lease_duration_s: float, renew_deadline_s: float,
                     default_s: float = DEFAULT_CLIENT_TIMEOUT_S) -> float:
    """The timeout for every Kubernetes call of an elected replica: at most half the safety margin
    `lease_duration - renew_deadline` (2.5 s at the defaults 15 and 10), so that no call the old leader made
    is still in flight when a follower may take over."""
    margin = lease_duration_s - renew_deadline_s
    return min(default_s, margin / 2) if margin > 0 else default_s


class LeaseStore(Protocol):
    """The Lease calls the elector needs (`autoscaler.kube.client.KubeClient` has them)."""

    async def get_lease(self, namespace: str, name: str) -> JSON | None: ...

    async def create_lease(self, namespace: str, lease: JSON) -> JSON: ...

    async def replace_lease(self, namespace: str, name: str, lease: JSON) -> JSON: ...


@dataclass(frozen=True, slots=True)
class LeaseConfig:
    """Which Lease, who we are, and the three durations of client-go (seconds)."""

    namespace: str
    name: str
    identity: str
    lease_duration_s: float = 15.0
    """How long followers wait, after the record last changed, before taking the Lease over."""
    renew_deadline_s: float = 10.0
    """How long the leader keeps trying to renew before it gives leadership up."""
    retry_period_s: float = 2.0
    """Time between attempts to acquire or renew."""

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("leader election needs a non-empty identity")
        if not self.retry_period_s > 0:
            raise ValueError("--leader-elect-retry-period must be greater than 0")
        if not self.lease_duration_s > self.renew_deadline_s:
            raise ValueError("--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline")
        if not self.renew_deadline_s > JITTER_FACTOR * self.retry_period_s:
            raise ValueError("--leader-elect-renew-deadline must be greater than 1.2 x --leader-elect-retry-period")


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
        self._observed: JSON | None = None  # the last Lease spec we read or wrote
        self._observed_at = -math.inf  # our monotonic time when that spec last changed
        self._last_term: Term | None = None  # the last holder (and its leaseTransitions) read in the Lease
        self._announced = ""  # the holder this replica, waiting, last named in the log
        self._takeover: Takeover | None = None  # how the last attempt that was no renewal took the Lease
        self._listeners: list[Callable[[bool], None]] = []
        self._failing: str | None = None  # the last failed attempt's error, until the API answers again
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
        return holder_of(self._observed) or None

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
            self._failed(f"attempt failed: {error}", routine=error.status == 409)  # 409: a lost race
            return False
        self._throttle.clear()
        if self._failing is not None:  # only a whole attempt that went through: a read that works while the
            # write is refused (RBAC without create or update) is no recovery, and logging it as one said
            # "answers again" and the refusal anew every retry period
            log.info("lease %s/%s: the API answers again", self.config.namespace, self.config.name)
            self._failing = None
        return result

    async def _try_acquire_or_renew(self) -> bool:
        cfg = self.config
        wall = micro_time(self._wall_clock())
        lease = await self._store.get_lease(cfg.namespace, cfg.name)
        now = self._clock()  # after the read: the record may have changed until the server answered
        if lease is None:
            if self._held_by_another(now):
                return False
            self._note_takeover(self._observed, now, deleted=True)
            spec = self._spec(acquire_time=wall, renew_time=wall, transitions=0)
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": cfg.name, "namespace": cfg.namespace}, "spec": spec}
            self._observe(await self._store.create_lease(cfg.namespace, body), self._clock())
            return True
        spec = lease.get("spec") or {}
        self._observe(lease, now)
        holder = spec.get("holderIdentity") or ""
        if holder and holder != cfg.identity and not self._expired(now):
            self._announce_holder(spec)
            return False
        ours = holder == cfg.identity
        self._note_takeover(spec, now)
        transitions = int(spec.get("leaseTransitions") or 0)
        new_spec = self._spec(
            acquire_time=(spec.get("acquireTime") or wall) if ours else wall,
            renew_time=wall,
            transitions=transitions if ours else transitions + 1,
        )
        written = await self._store.replace_lease(cfg.namespace, cfg.name, {**lease, "spec": new_spec})
        self._observe(written, self._clock())
        return True

    async def release(self) -> bool:
        """Give the Lease up (empty holder, 1 s duration) so a follower takes over at once; True on success."""
        cfg = self.config
        self._set_leader(False)
        try:
            lease = await self._store.get_lease(cfg.namespace, cfg.name)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != cfg.identity:
                return False
            spec = lease.get("spec") or {}
            wall = micro_time(self._wall_clock())
            released = {"leaseDurationSeconds": 1, "acquireTime": wall, "renewTime": wall,
                        "leaseTransitions": int(spec.get("leaseTransitions") or 0)}
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
        holder = holder_of(self._observed)
        return bool(holder) and holder != self.config.identity and not self._expired(now)

    def _spec(self, *, acquire_time: str, renew_time: str, transitions: int) -> JSON:
        return {
            "holderIdentity": self.config.identity,
            "leaseDurationSeconds": max(1, math.ceil(self.config.lease_duration_s)),
            "acquireTime": acquire_time,
            "renewTime": renew_time,
            "leaseTransitions": transitions,
        }

    def _observe(self, lease: JSON, now: float) -> None:
        spec = lease.get("spec") or {}
        if spec != self._observed:
            self._observed = spec
            self._observed_at = now
            self._last_term = term_of(spec) or self._last_term

    def _announce_holder(self, spec: JSON) -> None:
        """Name the holder once while waiting, and again only when it changes: attempts come every retry
        period, and a line each said nothing new, while a failover read from the log needs who held the Lease and
        until when."""
        holder = holder_of(spec)
        if self._leader or holder == self._announced:
            return
        held = f"now held by {named(holder)} (was {named(self._announced)})" if self._announced \
            else f"held by {named(holder)}"
        self._announced = holder
        cfg = self.config
        log.info("lease %s/%s: %s, %s; %s waits", cfg.namespace, cfg.name, held, renewed_until(spec), cfg.identity)

    def _note_takeover(self, spec: JSON | None, now: float, *, deleted: bool = False) -> None:
        """Keep how this attempt may take the Lease, for the line that says this replica leads (none while it
        leads: then the attempt is a renewal)."""
        if not self._leader:
            self._takeover = took_over(spec, identity=self.config.identity, unchanged_for_s=now - self._observed_at,
                                       released_by=self._last_term, deleted=deleted)

    def _expired(self, now: float) -> bool:
        duration = float((self._observed or {}).get("leaseDurationSeconds") or 0)
        return self._observed_at + duration <= now

    def _taken_by_other(self, now: float) -> bool:
        holder = self.holder
        return holder is not None and holder != self.config.identity and not self._expired(now)

    async def _acquire(self) -> float:
        """Try until the Lease is ours; returns when the successful attempt started."""
        cfg = self.config
        self._announced = ""
        log.info("lease %s/%s: %s trying to acquire", cfg.namespace, cfg.name, cfg.identity)
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
            if self._taken_by_other(now):
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
                self._failed(f"no answer within {timeout_s:.1f} s{waits.said()}")
                return False

    def _failed(self, message: str, *, routine: bool = False) -> None:
        """Log a failed attempt. Attempts come every retry period (2 s by default): a failure is a warning when
        it starts or changes (missing RBAC, an API server down), not at every attempt; a routine one never."""
        repeated = message == self._failing
        if not routine:  # a lost race is no failure to recover from
            self._failing = message
        log.log(logging.DEBUG if routine or repeated else logging.WARNING, "lease %s/%s: %s",
                self.config.namespace, self.config.name, message)

    def _set_leader(self, leader: bool) -> None:
        if leader == self._leader:
            return
        self._leader = leader
        cfg = self.config
        if leader:
            took = self._takeover or Takeover(logging.INFO, "")
            log.log(took.level, "lease %s/%s: %s became the leader%s", cfg.namespace, cfg.name, cfg.identity, took.how)
        else:
            log.info("lease %s/%s: %s stopped leading", cfg.namespace, cfg.name, cfg.identity)
        for listener in self._listeners:
            try:
                listener(leader)
            except Exception:
                log.exception("leadership listener failed")
