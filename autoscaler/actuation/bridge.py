"""The replica bridge (docs/design.md): the HPA scales a `RuntimeScale`; the adapter's leader carries its
`spec.replicas` to `ServingRuntime.spec.replicas`, which every modelmesh-serving release applies to the runtime
Deployment, and reports the Deployment back in the RuntimeScale's `status` (replicas, selector, conditions).

Why not let the HPA scale the Deployment: the modelmesh-serving controller sets the Deployment's replicas from
the ServingRuntime on every reconcile and reconciles on every change of the Deployment, so an HPA's change is
reverted at once; its webhook rejects unknown autoscaler classes and class `hpa` adds a second HPA.

How (`ReplicaBridge`, this module: when and which): each RuntimeScale is reconciled against its ServingRuntime and
Deployment, writing only what differs (`bridge_reconcile`: what happens to one RuntimeScale, what it reads and
writes, and why). A RuntimeScale that changes (`RuntimeScaleWatch` hands it over: the HPA's write) is reconciled
alone at once, reading its two objects: the write reaches the runtime within a round trip at any fleet size. So is
the owner of a ServingRuntime set behind the bridge's back (`ServingRuntimeWatch` hands the runtime over,
`runtime_changed`), through the same queue: a `kubectl apply` of replicas 2 while the HPA asks 6 is set back at
once, not at the next full pass (the Deployment ran at 2 until then). Every
`resync_interval_s` (Deployment replicas change without touching the RuntimeScale), after a relist and when a retry
falls due (looked at after every wake-up: a wait for the watch that never times out, HPAs writing during every pass,
held them back for good), a full pass reconciles them all from three lists a namespace (`bridge_pass`: how, and
the turns the hand-overs take between its RuntimeScales). It runs on its own task, so a slow API server never
delays a refresh or an HPA request.
Failures are per RuntimeScale: 409/429/5xx and no answer are retried with exponential backoff and jitter, others
(403: RBAC) wait for the next resync, and the retries due go out together in one pass (`bridge_retries` has the
schedule and why). A hand-over of a RuntimeScale whose retry is scheduled waits for that retry's pass, which reads
it anew: sent at once, each HPA write during an outage failed and climbed the backoff to its cap. A `Retry-After`
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

from autoscaler.actuation.bridge_memory import FIGHT_WINDOW_S, ScaleMemory, generation, older_generation
from autoscaler.actuation.bridge_news import Fight
from autoscaler.actuation.bridge_owners import RuntimeOwners, ScaleId
from autoscaler.actuation.bridge_pass import BridgeClient, FullPass, keyed
from autoscaler.actuation.bridge_reconcile import Listed, NotLeading, RuntimeScaleReconciler
from autoscaler.actuation.bridge_retries import RetrySchedule
from autoscaler.actuation.bridge_status import RUNTIME_SCALES, autoscaler_class, replicas_of
from autoscaler.kube.backoff import ServerThrottle
from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.raw import JSON, object_key
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
        self._changed: dict[ScaleId, JSON] = {}  # RuntimeScales the watch saw change since the last pass
        # Those of `_changed` handed over because their ServingRuntime was set behind the bridge's back
        # (`runtime_changed`), with the spec.replicas the runtime's last event showed: reconciled even where the
        # RuntimeScale itself brings nothing new.
        self._drifted: dict[ScaleId, int | None] = {}
        self._memory: dict[ScaleId, ScaleMemory] = {}  # what each RuntimeScale's last reconciles left
        # Which RuntimeScale owns each ServingRuntime (one per runtime, the oldest): from each full pass's list of
        # a scope, kept current by the watch's hand-overs; deletions come with a full pass (the watch wakes one).
        self._owners = RuntimeOwners()
        self._covered: set[str | None] = set()  # namespaces (None: all) whose RuntimeScales `_owners` holds
        self._throttle = ServerThrottle(self.settings.backoff_cap_s, clock)  # no call before it has passed
        self._retries = RetrySchedule(self._throttle, backoff_base_s=self.settings.backoff_base_s,
                                      backoff_cap_s=self.settings.backoff_cap_s,
                                      resync_interval_s=self.settings.resync_interval_s, clock=clock, rand=rand)
        self._clock = clock
        self._reconciler = RuntimeScaleReconciler(
            client, memory=self._memory, owners=self._owners, retries=self._retries, throttle=self._throttle,
            resync_interval_s=self.settings.resync_interval_s, metrics=metrics, may_write=may_write, clock=clock)
        self._full_pass = FullPass(client, self, scopes=self.scopes, memory=self._memory, owners=self._owners,
                                   covered=self._covered, retries=self._retries, throttle=self._throttle,
                                   metrics=metrics, may_write=may_write)

    def wake(self, scale: JSON | None = None) -> None:
        """Reconcile now: `scale` alone (a RuntimeScale the watch saw added or changed), or every one (None: a
        relist, a deletion, or leadership changed)."""
        if scale is None:
            self._full = True
        else:
            self._changed[object_key(scale)] = scale
        self._wake.set()

    def runtime_changed(self, runtime: JSON) -> None:
        """A ServingRuntime the watch saw listed, added or changed (`bridge_runtime_watch`): where its
        spec.replicas differ from what its RuntimeScale's last reconcile carried (a `kubectl apply` of a manifest
        with other replicas, a `kubectl edit`, the runtime deleted and created again), that RuntimeScale is
        handed over as an HPA's write is, through the same queue (so a retry held, the server's Retry-After and a
        full pass's turns hold it too), and reconciled at once: it reads the runtime and sets it back. Waiting
        for the full pass left the Deployment at the edited size for up to the resync.

        The bridge's own writes come back here too, at the value it carried (`ScaleMemory.asked`, noted before
        the write): they start nothing. So does a runtime no RuntimeScale of this leader has carried to yet (the
        full pass does), one with `serving.kserve.io/autoscalerClass`, and anything while not leading. Nor does a
        late event of an older write of its own (asks in quick succession on a loaded adapter: `echoes_due`),
        which read the runtime again for nothing."""
        if not self._may_write():
            return
        owner = self._owners.owner(object_key(runtime))
        memory = None if owner is None else self._memory.get(owner)
        if (owner is None or memory is None or memory.asked is None or memory.scale is None
                or autoscaler_class(runtime) is not None or memory.echo(object_key(runtime)[1], replicas_of(runtime))
                or memory.asked[0] != object_key(runtime)[1]):
            return
        found = replicas_of(runtime)
        if self._refused_at(owner, memory, found):
            # Its write at this value failed and waits for its retry: an event that changes nothing of it (the
            # modelmesh-serving controller writes status and annotations every second) tried it again at once,
            # 60 refused writes a minute a runtime instead of one a resync.
            return
        if (fought := memory.fought(self._clock())) is not None:
            self._say_fight(owner, memory, found, fought)
            return  # the full pass sets it back, once a resync
        waiting = self._changed.get(owner)
        if waiting is None or older_generation(generation(waiting), generation(memory.scale)):
            self._changed[owner] = memory.scale
        self._drifted[owner] = found
        self._wake.set()

    def _say_fight(self, owner: ScaleId, memory: ScaleMemory, found: int | None, count: int) -> None:
        """WARNING: another writer puts the runtime back (at `found` now) as soon as it is set back, `count` times
        within `FIGHT_WINDOW_S`; said when the watch stops setting it back, then every `SET_BACK_EPISODE_S` while
        the fight lasts (each set-back's own line is at DEBUG by then: the log said nothing more of a fight that
        went on all day). Said with a pass's news, woken for it (a pass with nothing handed over makes no
        request), so that a tool fighting every runtime at once is one line, not one a runtime."""
        if memory.asked is None or not memory.fight_news(self._clock()):
            return
        self._reconciler.fought(Fight(owner, memory.asked[0], found, memory.asked[1], count, FIGHT_WINDOW_S,
                                      self.settings.resync_interval_s))
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
            return 0  # kept in `_changed`: the pass after the server's wait reads them all
        self._retries.pass_started(full=False)
        todo = self._take_changed({})
        # All of them noted before any is reconciled: a RuntimeScale and its copy handed over together must not
        # each find itself alone on the runtime.
        if self._note_moves_an_owner(todo):
            # An owner pointed at another runtime (or a same-second copy that sorts first): the RuntimeScale that
            # owns the runtime now was not handed over, nor the one that no longer does. One pass over all.
            try:
                return await self._sync()
            finally:
                self._retries.full_pass_ended()
        return await self._reconcile_changed(todo, {})

    def _take_changed(self, listed: dict[ScaleId, JSON]) -> dict[ScaleId, JSON]:
        """The hand-overs waiting (now taken), less our own writes handed back and those older than the spec
        already reconciled, or than `listed` (the running pass's list, which reconciles that one in its turn):
        the watch stream can lag behind the bridge's own reads.

        Our own write is left out only where it carries a spec already reconciled: a status write answered after
        the HPA wrote again carries the HPA's newer spec, and its event replaces the HPA's among the hand-overs
        waiting (one per RuntimeScale); dropped as ours, that ask waited for the next full pass (20-50 s in a
        fleet of 300 where 20 HPAs kept writing)."""
        changed, self._changed = self._changed, {}
        todo: dict[ScaleId, JSON] = {}
        for key, scale in changed.items():
            memory = self._memory.get(key)
            if key in self._drifted:  # its runtime was set behind our back: reconciled whatever the spec
                if not self._refused_at(key, memory, self._drifted[key]) and not self._fought_now(key, memory):
                    todo[key] = self._drifted_ask(key, scale, listed)
                    continue
                del self._drifted[key]
                if memory is not None and not older_generation(memory.generation, generation(scale)):
                    continue  # only the drift brought it: its set-back waits for its retry, or the full pass
            version = (scale.get("metadata") or {}).get("resourceVersion")
            if (memory is not None and memory.own_write(version)
                    and not older_generation(memory.generation, generation(scale))):
                continue  # our own write, handed back (late, perhaps), of a spec already reconciled
            if memory is not None and memory.reconciled_newer_than(scale):
                continue  # a late event: a newer spec was reconciled already
            if key in listed and older_generation(generation(scale), generation(listed[key])):
                continue  # a late event: the pass has a newer spec listed
            todo[key] = scale
        return todo

    def _refused_at(self, key: ScaleId, memory: ScaleMemory | None, found: int | None) -> bool:
        """Whether RuntimeScale `key`'s runtime, found at `found`, is at the value whose set-back was refused and
        waits for its retry: asked in `runtime_changed` of each event, and again as a drift is taken, for the events
        that came while the refused write was on its way (the controller writes the runtime every second; a loaded
        adapter's reads and write take longer), handed over before the refusal was known."""
        return (memory is not None and memory.asked is not None and memory.scale is not None
                and memory.refused_at == (memory.asked[0], found) and self._retries.waits(key, memory.scale))

    def _fought_now(self, key: ScaleId, memory: ScaleMemory | None) -> bool:
        """Whether RuntimeScale `key`'s runtime, set behind the bridge's back, is fought over (`ScaleMemory.fought`)
        as its hand-over is taken, saying the fight if so: asked in `runtime_changed` of each event, and again
        here, where the set-backs are all answered and counted (one pass at a time). An event that came while the
        last set-back within the cap was unanswered (a slow API server: the other writer puts its value back as
        soon as the set-back is stored) was handed over as a hand edit, and set back once more than the cap."""
        if memory is None or (fought := memory.fought(self._clock())) is None:
            return False
        self._say_fight(key, memory, self._drifted[key], fought)
        return True

    def _drifted_ask(self, key: ScaleId, waiting: JSON, listed: dict[ScaleId, JSON]) -> JSON:
        """The newest spec known of RuntimeScale `key`, whose runtime was set behind the bridge's back: the one
        waiting, the one last reconciled, or the running pass's listed one, whichever is newest (an older one
        would set the runtime back to an ask already replaced)."""
        newest = waiting
        memory = self._memory.get(key)
        for other in (None if memory is None else memory.scale, listed.get(key)):
            if other is not None and older_generation(generation(newest), generation(other)):
                newest = other
        return newest

    async def _reconcile_changed(self, todo: dict[ScaleId, JSON], done: dict[ScaleId, JSON],
                                 budget: int | None = None) -> int:
        """Reconcile the hand-overs `todo` (noted in `_owners`) one by one, reading their runtimes; each one tried
        is put in `done`. Returns the writes made; stops where this replica stopped leading, or where the
        server's `Retry-After` holds the bridge. `budget`: how many to try at most (a full pass's turn between two
        of its RuntimeScales). What is not tried (held for its retry, over the budget, throttled) waits in
        `_changed`, ahead of the hand-overs that came meanwhile, which replace it where they are newer."""
        writes = tried = 0
        waiting: dict[ScaleId, JSON] = {}
        try:
            for key, scale in todo.items():
                if not self._may_write():
                    return writes
                if (self._throttled() or (budget is not None and tried >= budget)
                        or self._retries.holds(key, scale)):
                    # Held for its retry: that retry's pass reads the newest ask, and one now would fail and climb
                    # the backoff. Kept, not dropped: a full pass under way may reach it first (`bridge_pass`).
                    waiting[key] = scale
                    continue
                tried += 1
                done[key] = scale
                drifted = key in self._drifted
                self._drifted.pop(key, None)  # reconciled now: it reads the runtime as it is
                if drifted:
                    confirmed = await self._still_asked(key, scale)
                    if confirmed is None:
                        continue
                    scale = done[key] = confirmed
                if not self._covers(key[0]):
                    try:
                        await self._cover(key[0])
                    except KubeApiError as error:
                        self._failed(key, scale, error)  # its owner is not known: nothing written until it is
                        continue
                writes += await self.reconcile_guarded(key, scale, None)
            return writes
        finally:
            self._changed = {**waiting, **self._changed}

    async def _still_asked(self, key: ScaleId, scale: JSON) -> JSON | None:
        """RuntimeScale `key` read anew before its runtime, set behind the bridge's back, is set back to it; None
        where nothing is to be written: it was deleted (or deleted and created again) since. One GitOps sync that
        removes autoscaling (the RuntimeScale pruned, the ServingRuntime applied with its own replicas) brought
        the runtime's event before the RuntimeScale's deletion, and the deleted RuntimeScale's last ask was
        written over the operator's value. One read a set-back; the bridge's own writes coming back cost none."""
        try:
            fresh = await self._client.get_custom(RUNTIME_SCALES, *key)
        except KubeApiError as error:
            self._failed(key, scale, error)
            return None
        if fresh is None or _uid(fresh) != _uid(scale):
            # Its watch hands the deletion (a full pass) or the new object over; nothing to set back meanwhile.
            log.debug("replica bridge: RuntimeScale %s/%s is gone (or another object): its runtime is not set back",
                      *key)
            self.forget(key)
            return None
        if _runtime_named(fresh) != _runtime_named(scale):
            return None  # pointed at another runtime: its own hand-over (the watch's) moves the owner first
        return scale if older_generation(generation(fresh), generation(scale)) else fresh

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
        todo = self._take_changed(listed)
        if not todo:
            return 0
        if self._note_moves_an_owner(todo):
            self._full = True
            self._wake.set()
            return None
        # One, the longest waiting: all of them before each of the pass's RuntimeScales (20 HPAs writing) made a
        # pass of N RuntimeScales N x 20 round trips, and the resync and every retry waited for it.
        return await self._reconcile_changed(todo, done, budget=1)

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

    def _covers(self, namespace: str) -> bool:
        return None in self._covered or namespace in self._covered

    async def _cover(self, namespace: str) -> None:
        """List the RuntimeScales of `namespace` into `_owners` (a hand-over before the first full pass of this
        leader): who owns a runtime is only known from all the RuntimeScales that name it."""
        listed = await self._client.list_custom(RUNTIME_SCALES, namespace)
        self._owners.replace(namespace, keyed(listed, namespace))
        self._covered.add(namespace)

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
        self._changed.clear()  # this pass reads them all; a change from now on is handed over again
        self._drifted.clear()
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
        """The RuntimeScale as the pass reconciles it: a newer spec of it handed over during the pass (one held
        for its retry, or not yet had its turn) rather than the listed one, which the pass would write first
        (the retry then ended, and the held ask was dropped: the HPA's newest ask never went out). Not where the
        hand-over names another runtime: that moves an owner, which `between` handles."""
        waiting = self._changed.get(key)
        if (waiting is None or not older_generation(generation(listed), generation(waiting))
                or _runtime_named(waiting) != _runtime_named(listed)):
            return listed
        if key not in self._drifted:  # a drifted runtime may have been set after the pass listed it: kept, its
            del self._changed[key]  # hand-over reads it anew
        return waiting

    def handed_over(self) -> bool:
        """Whether a hand-over waits (for the full pass's turns, `bridge_pass`)."""
        return bool(self._changed)

    def full_due(self) -> None:
        """Another full pass at the next wake-up: the running one stopped for the server's `Retry-After`."""
        self._full = True

    def forget(self, key: ScaleId) -> None:
        """RuntimeScale `key` is gone: what the bridge remembers of it, and its series, go too."""
        self._memory.pop(key, None)
        self._drifted.pop(key, None)
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
            self._failed(key, scale, error)
            return 0
        self._retries.forget(key)
        return writes

    def _failed(self, key: ScaleId, scale: JSON, error: KubeApiError) -> None:
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


def _uid(obj: JSON) -> object:
    """The object's `metadata.uid`, as given."""
    return (obj.get("metadata") or {}).get("uid")


def _runtime_named(scale: JSON) -> object:
    """The RuntimeScale's `spec.servingRuntime`, as given."""
    return (scale.get("spec") or {}).get("servingRuntime")
