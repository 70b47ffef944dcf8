"""The replica bridge (docs/design.md): the HPA scales a `RuntimeScale`; the adapter's leader carries its
`spec.replicas` to `ServingRuntime.spec.replicas`, which every modelmesh-serving release applies to the runtime
Deployment, and reports the Deployment back in the RuntimeScale's `status` (replicas, selector, conditions).

Why not let the HPA scale the Deployment: the modelmesh-serving controller sets the Deployment's replicas from
the ServingRuntime on every reconcile and reconciles on every change of the Deployment, so an HPA's change is
reverted at once; its webhook rejects unknown autoscaler classes and class `hpa` adds a second HPA.

How (`ReplicaBridge`, this module: when and which): each RuntimeScale is reconciled against its ServingRuntime and
Deployment, writing only what differs (`bridge_reconcile`: what happens to one RuntimeScale, what it reads and
writes, and why). A RuntimeScale that changes (the HPA's write), and the owner of a ServingRuntime set behind the
bridge's back, are handed over and reconciled alone at once (`bridge_handovers`: the hand-over queue, and why). Every
`resync_interval_s` (Deployment replicas change without touching the RuntimeScale), after a relist and when a retry
falls due (looked at after every wake-up: a wait for the watch that never times out, HPAs writing during every pass,
held them back for good), a full pass reconciles them all from three lists a namespace (`bridge_pass`: how, and
the turns the hand-overs take between its RuntimeScales). It runs on its own task, so a slow API server never
delays a refresh or an HPA request.
Failures are per RuntimeScale: 409/429/5xx and no answer are retried with exponential backoff and jitter, others
(403: RBAC) wait for the next resync, and the retries due go out together in one pass (`bridge_retries` has the
schedule and why; a hand-over held for its retry waits for that retry's pass). A `Retry-After`
(429 from API Priority and Fairness, which throttles the adapter's whole flow) holds every call of the bridge until
it has passed: the pass stops there, and an HPA write handed over meanwhile waits for the pass after it, instead of
one doomed request per RuntimeScale. Only the leader writes; all state lives in the cluster, so a new leader (or a
restarted adapter) simply carries on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from autoscaler.actuation.bridge_handovers import HandOvers
from autoscaler.actuation.bridge_memory import ScaleMemory
from autoscaler.actuation.bridge_owners import RuntimeOwners, ScaleId
from autoscaler.actuation.bridge_pass import BridgeClient, FullPass
from autoscaler.actuation.bridge_reconcile import Listed, NotLeading, RuntimeScaleReconciler
from autoscaler.actuation.bridge_retries import RetrySchedule
from autoscaler.kube.backoff import ServerThrottle
from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.raw import JSON
from autoscaler.selfmetrics import AdapterMetrics

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BridgeSettings:
    resync_interval_s: float = 15.0
    """Every RuntimeScale is reconciled at least this often (seconds): the HPA's sync period, so the
    `status.replicas` it reads is at most one period old."""
    backoff_base_s: float = 1.0
    """First retry delay after a retryable failure; doubles with each further failure."""
    backoff_cap_s: float = 60.0
    """Longest retry delay."""



class ReplicaBridge:
    """Keeps every watched RuntimeScale and its ServingRuntime in step; run `run()` as its own task."""

    def __init__(
        self,
        client: BridgeClient,
        *,
        namespaces: Sequence[str] = (),
        settings: BridgeSettings | None = None,
        metrics: AdapterMetrics | None = None,
        may_write: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        """`namespaces` to reconcile RuntimeScales in; empty: all namespaces."""
        self._client = client
        self.scopes: tuple[str | None, ...] = tuple(namespaces) or (None,)
        self.settings = settings or BridgeSettings()
        self._metrics = metrics
        self._may_write = may_write
        self._wake = asyncio.Event()
        self._full = True  # a full pass is due (first run, a relist, leadership)
        self._memory: dict[ScaleId, ScaleMemory] = {}  # what each RuntimeScale's last reconciles left
        # Which RuntimeScale owns each ServingRuntime (one per runtime, the oldest): from each full pass's list of
        # a scope, kept current by the watch's hand-overs; deletions come with a full pass (the watch wakes one).
        self._owners = RuntimeOwners()
        self._covered: set[str | None] = set()  # namespaces (None: all) whose RuntimeScales `_owners` holds
        self._throttle = ServerThrottle(self.settings.backoff_cap_s, clock)  # no call before it has passed
        self._retries = RetrySchedule(self._throttle, backoff_base_s=self.settings.backoff_base_s,
                                      backoff_cap_s=self.settings.backoff_cap_s,
                                      resync_interval_s=self.settings.resync_interval_s, clock=clock, rand=rand)
        self._reconciler = RuntimeScaleReconciler(
            client, memory=self._memory, owners=self._owners, retries=self._retries, throttle=self._throttle,
            resync_interval_s=self.settings.resync_interval_s, metrics=metrics, may_write=may_write, clock=clock)
        self._full_pass = FullPass(client, self, scopes=self.scopes, memory=self._memory, owners=self._owners,
                                   covered=self._covered, retries=self._retries, throttle=self._throttle,
                                   metrics=metrics, may_write=may_write)
        # The RuntimeScales the watches hand over between full passes (`bridge_handovers`); its `runtime_changed`
        # is the ServingRuntime watch's hand-over.
        self.handovers = HandOvers(client, self, memory=self._memory, owners=self._owners, covered=self._covered,
                                   retries=self._retries, throttle=self._throttle, reconciler=self._reconciler,
                                   resync_interval_s=self.settings.resync_interval_s, may_write=may_write,
                                   wake=self._wake.set, clock=clock)

    def wake(self, scale: JSON | None = None) -> None:
        """Reconcile now: `scale` alone (a RuntimeScale the watch saw added or changed), or every one (None: a
        relist, a deletion, or leadership changed)."""
        if scale is None:
            self._full = True
        else:
            self.handovers.scale_changed(scale)
        self._wake.set()

    async def run(self) -> None:
        """Reconcile what changed on every wake-up, and everything every resync interval, after a relist and
        when a retry falls due, until cancelled."""
        while True:
            try:
                if self._full:
                    await self.sync()
                else:
                    await self.sync_changed()
            except Exception:
                log.exception("replica bridge pass failed; trying again at the next resync")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.next_pass_in_s()):
                    await self._wake.wait()
            # Asked after the wait, not only when it times out: with a hand-over already waiting it returns at
            # once, however late the resync or a retry is, and while an HPA wrote during every pass of the
            # changed no full pass ran at all (a hand edit stayed, an ask held for its retry stayed held).
            if self.next_pass_in_s() <= 0:
                self._full = True  # the resync, or a retry fell due
            self._wake.clear()

    async def sync_changed(self) -> int:
        """Reconcile only the RuntimeScales the watch handed over since the last pass; returns the writes made."""
        try:
            return await self._sync_changed()
        finally:
            self._reconciler.flush_news()

    async def _sync_changed(self) -> int:
        if self._throttled():
            return 0  # kept in the queue: the pass after the server's wait reads them all
        self._retries.pass_started(full=False)
        todo = self.handovers.take({})
        # All of them noted before any is reconciled: a RuntimeScale and its copy handed over together must not
        # each find itself alone on the runtime.
        if self._note_moves_an_owner(todo):
            # An owner pointed at another runtime (or a same-second copy that sorts first): the RuntimeScale that
            # owns the runtime now was not handed over, nor the one that no longer does. One pass over all.
            try:
                return await self._sync()
            finally:
                self._retries.full_pass_ended()
        return await self.handovers.reconcile(todo, {})

    async def between(self, listed: dict[ScaleId, JSON], done: dict[ScaleId, JSON]) -> int | None:
        """The hand-overs waiting while a full pass runs, reconciled between two of its RuntimeScales: waiting
        for the pass to end held an HPA's scale-up back by the whole pass (a new leader's first pass writes the
        status of every RuntimeScale, a round trip each: tens of seconds with a slow API server).

        At most one at a time, and a turn only at the pass's start and after each RuntimeScale it wrote
        (`bridge_pass._Pass.turn_due`), so a pass writing W RuntimeScales takes about 2 x W round trips however
        many HPAs write (a settled fleet's pass: its lists alone), and a hand-over waits for at most as many turns
        as there are other RuntimeScales waiting.

        `listed`: the pass's RuntimeScales of the scope it is in; `done` collects the ones reconciled here, which
        the pass then leaves alone unless it lists a newer spec (its older `spec.replicas` would undo the
        HPA's). Returns the writes made, or None when a hand-over moves a runtime to another owner: the new owner
        may be behind the pass already, so the pass stops and a new one, which lists again, follows at once
        (`_full`), as `sync_changed` does for it."""
        todo = self.handovers.take(listed)
        if not todo:
            return 0
        if self._note_moves_an_owner(todo):
            self._full = True
            self._wake.set()
            return None
        # One, the longest waiting: all of them before each of the pass's RuntimeScales (20 HPAs writing) made a
        # pass of N RuntimeScales N x 20 round trips, and the resync and every retry waited for it.
        return await self.handovers.reconcile(todo, done, budget=1)

    def _note_moves_an_owner(self, scales: dict[ScaleId, JSON]) -> bool:
        """Note `scales` in `_owners`; whether a runtime they named or name now changed hands (from one
        RuntimeScale to another: a first claim moves nothing)."""
        runtimes: set[tuple[str, str]] = set()
        for key, scale in scales.items():
            claim = self._owners.claim(key)
            if claim is not None:
                runtimes.add(claim.runtime)
            named = (scale.get("spec") or {}).get("servingRuntime")
            if isinstance(named, str) and named:
                runtimes.add((key[0], named))
        before = {runtime: self._owners.owner(runtime) for runtime in runtimes}
        for key, scale in scales.items():
            self._owners.note(key, scale)
        return any(owner is not None and self._owners.owner(runtime) != owner for runtime, owner in before.items())

    async def sync(self) -> int:
        """One pass over every RuntimeScale; returns the number of writes made. The RuntimeScales whose
        `Ready` reason changed are logged at the end of the pass: one line each, or, when more than ten changed
        (the first pass of every new leader finds them all), one line per reason with how many."""
        try:
            return await self._sync()
        finally:
            self._retries.full_pass_ended()
            self._reconciler.flush_news()

    async def _sync(self) -> int:
        self._full = False
        self.handovers.clear()  # this pass reads them all; a change from now on is handed over again
        if not self._may_write():
            self._retries.clear()
            for key in list(self._memory):
                self.forget(key)
            # Not kept current while not leading: all forgotten, in place (the reconciler holds this object).
            self._owners.replace(None, ())
            self._covered.clear()
            return 0
        if self._throttled():
            self._full = True  # due once the server's wait has passed
            return 0
        return await self._full_pass.run()

    def newest_ask(self, key: ScaleId, listed: JSON) -> JSON:
        """The RuntimeScale as the pass reconciles it (`HandOvers.newest_ask`)."""
        return self.handovers.newest_ask(key, listed)

    def handed_over(self) -> bool:
        """Whether a hand-over waits (for the full pass's turns, `bridge_pass`)."""
        return self.handovers.waiting()

    def full_due(self) -> None:
        """Another full pass at the next wake-up: the running one stopped for the server's `Retry-After`."""
        self._full = True

    def forget(self, key: ScaleId) -> None:
        """RuntimeScale `key` is gone: what the bridge remembers of it, and its series, go too."""
        self._memory.pop(key, None)
        self.handovers.forget(key)
        if self._metrics is not None:
            self._metrics.forget_runtime_scale(*key)

    async def reconcile_guarded(self, key: ScaleId, scale: JSON, known: Listed | None) -> int:
        """RuntimeScale `key` reconciled (from a full pass's lists `known`, or read); the writes made, none
        where it failed: its retry is scheduled and the failure said."""
        try:
            writes = await self._reconciler.reconcile(key, scale, known)
        except NotLeading:
            log.debug("replica bridge: RuntimeScale %s/%s: stopped leading mid-reconcile", *key)
            return 0  # the next leader's first pass reconciles it
        except KubeApiError as error:
            self.failed(key, scale, error)
            return 0
        self._retries.forget(key)
        return writes

    def failed(self, key: ScaleId, scale: JSON, error: KubeApiError) -> None:
        """Schedule the RuntimeScale's retry (`bridge_retries`) and say why it failed."""
        wait = self._retries.failed(key, scale, error)
        self._full_pass.warn_and_fail_pass(f"RuntimeScale {key[0]}/{key[1]} not reconciled (next try in "
                                           f"{wait:.0f} s): {error}", kind=str(error.status))

    def _throttled(self) -> bool:
        return self._throttle.remaining() > 0

    def next_pass_in_s(self) -> float:
        """Seconds until the next full pass (`run` waits that long for a watch event): the server's `Retry-After`,
        the resync or the next retry due (`RetrySchedule.next_pass_in_s`)."""
        return self._retries.next_pass_in_s()

