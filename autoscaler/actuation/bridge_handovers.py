"""The replica bridge's hand-over queue (`HandOvers`, held by `ReplicaBridge`): the RuntimeScales its watches hand
over between full passes, and their reconcile one by one.

A RuntimeScale that changes (`RuntimeScaleWatch` hands it over: the HPA's write) is reconciled alone at once,
reading its two objects: the write reaches the runtime within a round trip at any fleet size. So is the owner of a
ServingRuntime set behind the bridge's back (`ServingRuntimeWatch` hands the runtime over, `runtime_changed`),
through the same queue: a `kubectl apply` of replicas 2 while the HPA asks 6 is set back at once, not at the next
full pass (the Deployment ran at 2 until then). A hand-over of a RuntimeScale whose retry is scheduled waits for that
retry's pass, which reads it anew: sent at once, each HPA write during an outage failed and climbed the backoff to
its cap.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from autoscaler.actuation.bridge_memory import FIGHT_WINDOW_S, ScaleMemory, generation, older_generation
from autoscaler.actuation.bridge_news import Fight
from autoscaler.actuation.bridge_owners import RuntimeOwners, ScaleId
from autoscaler.actuation.bridge_pass import BridgeClient, keyed
from autoscaler.actuation.bridge_reconcile import Listed, RuntimeScaleReconciler
from autoscaler.actuation.bridge_retries import RetrySchedule
from autoscaler.actuation.bridge_status import RUNTIME_SCALES, autoscaler_class, replicas_of
from autoscaler.kube.backoff import ServerThrottle
from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.raw import JSON, object_key

log = logging.getLogger("autoscaler.actuation.bridge")


class HandOverHost(Protocol):
    """What the queue asks of the bridge that holds it (`ReplicaBridge`): one RuntimeScale reconciled with its
    failure said and its retry scheduled, a failure said, and a RuntimeScale forgotten."""

    async def reconcile_guarded(self, key: ScaleId, scale: JSON, known: Listed | None) -> int:
        """One RuntimeScale reconciled; the writes made (0 where it failed: its retry is scheduled)."""
        ...

    def failed(self, key: ScaleId, scale: JSON, error: KubeApiError) -> None:
        """The RuntimeScale's retry scheduled and its failure said."""
        ...

    def forget(self, key: ScaleId) -> None:
        """The RuntimeScale is gone: what the bridge remembers of it goes too."""
        ...


class HandOvers:
    """The RuntimeScales handed over since the last pass, each with the newest spec known, and which of them came
    because their runtime was set behind the bridge's back."""

    def __init__(self, client: BridgeClient, host: HandOverHost, *, memory: dict[ScaleId, ScaleMemory],
                 owners: RuntimeOwners, covered: set[str | None], retries: RetrySchedule,
                 throttle: ServerThrottle, reconciler: RuntimeScaleReconciler, resync_interval_s: float,
                 may_write: Callable[[], bool], wake: Callable[[], None], clock: Callable[[], float]) -> None:
        """`memory`, `owners` and `covered` (the namespaces, None: all, whose RuntimeScales `owners` holds) are
        shared with the bridge; `wake` wakes its loop."""
        self._client = client
        self._host = host
        self._memory = memory
        self._owners = owners
        self._covered = covered
        self._retries = retries
        self._throttle = throttle
        self._reconciler = reconciler
        self._resync_interval_s = resync_interval_s
        self._may_write = may_write
        self._wake = wake
        self._clock = clock
        self._changed: dict[ScaleId, JSON] = {}  # RuntimeScales the watch saw change since the last pass
        # Those of `_changed` handed over because their ServingRuntime was set behind the bridge's back
        # (`runtime_changed`), with the spec.replicas the runtime's last event showed: reconciled even where the
        # RuntimeScale itself brings nothing new.
        self._drifted: dict[ScaleId, int | None] = {}
        # Those of `_changed` handed over because their ServingRuntime lost its autoscaler class (`runtime_changed`):
        # read anew and reconciled whatever the RuntimeScale brings, as a drift is.
        self._unclassed: set[ScaleId] = set()

    def scale_changed(self, scale: JSON) -> None:
        """A RuntimeScale the watch saw added or changed, handed over (the bridge's loop is woken by its caller)."""
        self._changed[object_key(scale)] = scale

    def runtime_changed(self, runtime: JSON) -> None:
        """A ServingRuntime the watch saw listed, added or changed (`bridge_runtime_watch`): where its
        spec.replicas differ from what its RuntimeScale's last reconcile carried (a `kubectl apply` of a manifest
        with other replicas, a `kubectl edit`, the runtime deleted and created again), that RuntimeScale is
        handed over as an HPA's write is, through the same queue (so a retry held, the server's Retry-After and a
        full pass's turns hold it too), and reconciled at once: it reads the runtime and sets it back. Waiting
        for the full pass left the Deployment at the edited size for up to the resync.

        A runtime whose owner was left alone for its `serving.kserve.io/autoscalerClass` (`ScaleMemory.classed`)
        and that has none now is handed over too (`_hand_over_unclassed`): the RuntimeScale adopts or carries at
        once, where the full pass came up to a resync after modelmesh-serving had applied the class's removal.

        The bridge's own writes come back here too, at the value it carried (`ScaleMemory.asked`, noted before
        the write): they start nothing. So does a runtime no RuntimeScale of this leader has carried to yet (the
        full pass does), one with `serving.kserve.io/autoscalerClass`, and anything while not leading. Nor does a
        late event of an older write of its own (asks in quick succession on a loaded adapter: `echoes_due`),
        which read the runtime again for nothing."""
        if not self._may_write():
            return
        owner = self._owners.owner(object_key(runtime))
        memory = None if owner is None else self._memory.get(owner)
        if (owner is not None and memory is not None and memory.classed is not None
                and autoscaler_class(runtime) is None):
            self._hand_over_unclassed(owner, memory)
            return
        if (owner is None or memory is None or memory.asked is None or memory.scale is None
                or autoscaler_class(runtime) is not None or memory.echo(object_key(runtime)[1], replicas_of(runtime))
                or memory.asked[0] != object_key(runtime)[1]):
            return
        found = replicas_of(runtime)
        if self._refused_at(owner, memory, found):
            # Its write at this value failed and waits for its retry: an event that brings nothing new to it
            # (another writer's labels or annotations, a GitOps tool's sync, the watch listing every runtime again
            # as it reopens) tried it again at once, up to a refused write per event instead of one a resync.
            return
        if (fought := memory.fought(self._clock())) is not None:
            self._say_fight(owner, memory, found, fought)
            return  # the full pass sets it back, once a resync
        waiting = self._changed.get(owner)
        if waiting is None or older_generation(generation(waiting), generation(memory.scale)):
            self._changed[owner] = memory.scale
        self._drifted[owner] = found
        self._wake()

    def _hand_over_unclassed(self, owner: ScaleId, memory: ScaleMemory) -> None:
        """RuntimeScale `owner`'s runtime has lost its autoscaler class: reconciled at once (read anew first,
        `_still_asked`), once; a newer spec of it already waiting is kept."""
        classed, memory.classed = memory.classed, None
        if classed is None:
            return
        waiting = self._changed.get(owner)
        if waiting is None or older_generation(generation(waiting), generation(classed)):
            self._changed[owner] = classed
        self._unclassed.add(owner)
        self._wake()

    def _say_fight(self, owner: ScaleId, memory: ScaleMemory, found: int | None, count: int) -> None:
        """WARNING: another writer puts the runtime back (at `found` now) as soon as it is set back, `count` times
        within `FIGHT_WINDOW_S`; said when the watch stops setting it back, then every `SET_BACK_EPISODE_S` while
        the fight lasts (each set-back's own line is at DEBUG by then: the log said nothing more of a fight that
        went on all day). Said with a pass's news, woken for it (a pass with nothing handed over makes no
        request), so that a tool fighting every runtime at once is one line, not one a runtime."""
        if memory.asked is None or not memory.fight_news(self._clock()):
            return
        self._reconciler.fought(Fight(owner, memory.asked[0], found, memory.asked[1], count, FIGHT_WINDOW_S,
                                      self._resync_interval_s))
        self._wake()

    def take(self, listed: dict[ScaleId, JSON]) -> dict[ScaleId, JSON]:
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
            if key in self._unclassed:  # its runtime lost its class: reconciled whatever the spec
                todo[key] = self._drifted_ask(key, scale, listed)
                continue
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
        that came while the refused write was on its way (any other change of the runtime; a loaded adapter's reads
        and write take longer), handed over before the refusal was known."""
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

    async def reconcile(self, todo: dict[ScaleId, JSON], done: dict[ScaleId, JSON],
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
                if (self._throttle.remaining() > 0 or (budget is not None and tried >= budget)
                        or self._retries.holds(key, scale)):
                    # Held for its retry: that retry's pass reads the newest ask, and one now would fail and climb
                    # the backoff. Kept, not dropped: a full pass under way may reach it first (`bridge_pass`).
                    waiting[key] = scale
                    continue
                tried += 1
                done[key] = scale
                drifted = key in self._drifted or key in self._unclassed
                self._drifted.pop(key, None)  # reconciled now: it reads the runtime as it is
                self._unclassed.discard(key)
                if drifted:
                    confirmed = await self._still_asked(key, scale)
                    if confirmed is None:
                        continue
                    scale = done[key] = confirmed
                if not self._covers(key[0]):
                    try:
                        await self._cover(key[0])
                    except KubeApiError as error:
                        self._host.failed(key, scale, error)  # its owner is not known: nothing written until it is
                        continue
                writes += await self._host.reconcile_guarded(key, scale, None)
            return writes
        finally:
            self._changed = {**waiting, **self._changed}

    async def _still_asked(self, key: ScaleId, scale: JSON) -> JSON | None:
        """RuntimeScale `key` read anew before its runtime, set behind the bridge's back, is set back to it; None
        where nothing is to be written: it was deleted (or deleted and created again) since. One GitOps sync that
        removes autoscaling (the RuntimeScale pruned, the ServingRuntime applied with its own replicas) brought
        the runtime's event before the RuntimeScale's deletion, and the deleted RuntimeScale's last ask was
        written over the operator's value. One read a set-back; the bridge's own writes coming back cost none. A
        RuntimeScale handed over as its runtime lost its class is read anew too: the one kept since its conflict
        may be older than its status, or gone."""
        try:
            fresh = await self._client.get_custom(RUNTIME_SCALES, *key)
        except KubeApiError as error:
            self._host.failed(key, scale, error)
            return None
        if fresh is None or _uid(fresh) != _uid(scale):
            # Its watch hands the deletion (a full pass) or the new object over; nothing to set back meanwhile.
            log.debug("replica bridge: RuntimeScale %s/%s is gone (or another object): its runtime is not set back",
                      *key)
            self._host.forget(key)
            return None
        if _runtime_named(fresh) != _runtime_named(scale):
            return None  # pointed at another runtime: its own hand-over (the watch's) moves the owner first
        return scale if older_generation(generation(fresh), generation(scale)) else fresh

    def _covers(self, namespace: str) -> bool:
        return None in self._covered or namespace in self._covered

    async def _cover(self, namespace: str) -> None:
        """List the RuntimeScales of `namespace` into `_owners` (a hand-over before the first full pass of this
        leader): who owns a runtime is only known from all the RuntimeScales that name it."""
        listed = await self._client.list_custom(RUNTIME_SCALES, namespace)
        self._owners.replace(namespace, keyed(listed, namespace))
        self._covered.add(namespace)

    def newest_ask(self, key: ScaleId, listed: JSON) -> JSON:
        """The RuntimeScale as the pass reconciles it: a newer spec of it handed over during the pass (one held
        for its retry, or not yet had its turn) rather than the listed one, which the pass would write first
        (the retry then ended, and the held ask was dropped: the HPA's newest ask never went out). Not where the
        hand-over names another runtime: that moves an owner, which `ReplicaBridge.between` handles."""
        waiting = self._changed.get(key)
        if (waiting is None or not older_generation(generation(listed), generation(waiting))
                or _runtime_named(waiting) != _runtime_named(listed)):
            return listed
        if key not in self._drifted and key not in self._unclassed:  # a drifted (or unclassed) runtime may have
            del self._changed[key]  # changed after the pass listed it: kept, its hand-over reads it anew
        return waiting

    def waiting(self) -> bool:
        """Whether a hand-over waits (for the full pass's turns, `bridge_pass`)."""
        return bool(self._changed)

    def clear(self) -> None:
        """A full pass reads them all; a change from now on is handed over again."""
        self._changed.clear()
        self._drifted.clear()
        self._unclassed.clear()

    def forget(self, key: ScaleId) -> None:
        """RuntimeScale `key` is gone: a set-back of its runtime waiting goes too."""
        self._drifted.pop(key, None)
        self._unclassed.discard(key)


def _uid(obj: JSON) -> object:
    """The object's `metadata.uid`, as given."""
    return (obj.get("metadata") or {}).get("uid")


def _runtime_named(scale: JSON) -> object:
    """The RuntimeScale's `spec.servingRuntime`, as given."""
    return (scale.get("spec") or {}).get("servingRuntime")
