"""What the replica bridge remembers of each RuntimeScale between passes, in one place.

All of it is about one RuntimeScale and goes when it goes (deleted, or this replica stopped leading): kept in
one record per RuntimeScale, forgetting it is one `pop`, where seven dicts each had to be cleared (and two
places cleared different subsets). None of it is needed for correctness after a restart: all state lives in the
cluster; this only saves requests and keeps the log from repeating itself.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Final

SET_BACK_EPISODE_S: Final = 600.0
"""Set-backs of the same outside value of `ServingRuntime.spec.replicas` less than this apart (seconds) are one
episode, warned about once (the rest at DEBUG): a tool that keeps applying a manifest is said once, not every
resync."""

FIGHT_SET_BACKS: Final = 5
"""Set-backs of one runtime (whatever the outside values) within `FIGHT_WINDOW_S` after which the watch no longer
sets it back (`ScaleMemory.fought`): the full pass does, every resync. Another writer that puts its value back at once
(Argo CD self-heal without a delay, a mutating admission policy, another operator) otherwise made a write war at
its speed: 2,400 reads and 2,400 writes a minute on one runtime, its Deployment rescaled ten times a second."""

FIGHT_WINDOW_S: Final = 60.0
"""See `FIGHT_SET_BACKS`: a person's `kubectl apply` or `kubectl edit`, even repeated, stays under it and is set
back within a round trip."""

Generation = tuple[str, int]
"""(uid, metadata.generation) of a RuntimeScale."""


ECHOES_KEPT = 8
"""Older values of a runtime's asks whose watch events may still come (`ScaleMemory.echoes_due`): the asks of an
HPA in quick succession while the adapter is slow to read its watch."""


WRITES_KEPT = 8
"""Our own writes to a RuntimeScale whose watch events are recognised as ours (`ScaleMemory.written`)."""


@dataclass(slots=True)
class ScaleMemory:
    """One RuntimeScale's memory (`ReplicaBridge._memory`)."""

    written: list[str] = field(default_factory=list)
    """The resourceVersions our own last few writes to it left (`WRITES_KEPT`): the watch hands those writes
    back, and reading its runtime again for one was two requests per status written (10,000 after a new
    leader's first pass at 5,000 runtimes). Not the last alone: a watch a little behind hands a status write
    back after the next ask was reconciled and written (an HPA asking again while the status was written)."""
    generation: Generation | None = None
    """The newest spec reconciled: a watch stream can lag behind the pass's own consistent list, and its late
    event of an older spec wrote that older spec.replicas back to the runtime (a pod started, then removed with
    its models when the next event came)."""
    carried: tuple[str, int] | None = None
    """The ServingRuntime and spec.replicas this replica last saw it hold as the RuntimeScale asked: the runtime
    found at another value while the RuntimeScale still asks for it was changed by someone else (said, as set
    back). The runtime is part of it: a RuntimeScale pointed at another runtime finds that one at its former
    owner's value, not a hand edit (and one that was a duplicate meanwhile, `forget_carried`, finds its runtime
    at the owner's). Where this replica carried nothing yet (a new leader, a restarted adapter), the
    RuntimeScale's status says what the last leader carried (`bridge_status.bridged_spec`)."""
    carried_uid: str | None = None
    """The uid of the ServingRuntime object `carried` was seen on: one found under that name with another uid was
    deleted and created again (its manifest applied anew), a new object with its own spec.replicas, not a hand
    edit of the one carried to."""
    asked: tuple[str, int] | None = None
    """The ServingRuntime and spec.replicas its last reconcile set out to carry (before the write, which the
    watch may hand back before it is answered): a ServingRuntime event at another value is someone else's
    (`HandOvers.runtime_changed`), one at this value is the bridge's own write coming back, which starts
    nothing. None where it asks for nothing (no spec.replicas) or carries nothing (a duplicate)."""
    echoes_due: list[int] = field(default_factory=list)
    """Values written to `asked`'s runtime before `asked`, whose watch events may still be on their way (asks in
    quick succession, a loaded adapter): in the watch's order they come before `asked`'s own, so one of them
    is the bridge's write coming back late, not a hand edit; `asked`'s own event clears them."""
    scale: dict[str, Any] | None = None
    """The RuntimeScale as its last reconcile carried it: what a ServingRuntime set behind the bridge's back is
    set back to, handed over as the RuntimeScale watch hands an HPA's write."""
    classed: dict[str, Any] | None = None
    """The RuntimeScale as its last reconcile found it, where its runtime had `serving.kserve.io/autoscalerClass`
    (`AutoscalerClassConflict`: nothing carried, so `asked` is None and the runtime's events started nothing): the
    runtime's event without the class hands it over at once (`HandOvers.runtime_changed`), not at the next full
    pass, up to a resync after modelmesh-serving has applied the class's removal."""
    reason: str | None = None
    """Its `Ready` reason as last written: a change is logged (`bridge_news.ReasonChanges`)."""
    set_back: tuple[int | None, float] | None = None
    """The last outside value set back, and when (`set_back_level`)."""
    set_backs: list[float] = field(default_factory=list)
    """When its set-backs within the last `FIGHT_WINDOW_S` were made, whatever the outside value (`fought`)."""
    fight_said: float | None = None
    """When the fight was last said at WARNING (`fight_news`)."""
    refused_at: tuple[str, int | None] | None = None
    """The ServingRuntime and the spec.replicas it held when the last write to it failed: an event of that runtime
    at the same replicas (another write of its labels or annotations, the watch listing it again) brings nothing
    its retry would not (`HandOvers.runtime_changed`)."""
    misplaced: tuple[tuple[str, str], ...] = ()
    """The policy annotations on its runtime already warned about (they belong on the Deployment)."""

    def wrote(self, version: str) -> None:
        """Our own write left `version` (`written`)."""
        self.written = [*self.written[-(WRITES_KEPT - 1):], version]

    def own_write(self, version: object) -> bool:
        """Whether `version` is one our own writes left."""
        return isinstance(version, str) and version in self.written

    def reconciled_newer_than(self, scale: dict[str, Any]) -> bool:
        """Whether a newer spec of this same RuntimeScale object than `scale`'s was reconciled already: `scale`
        is a late event."""
        return older_generation(generation(scale), self.generation)

    def note_reconciled(self, scale: dict[str, Any]) -> None:
        """`scale`'s spec is reconciled: later events of older ones are late."""
        reconciled = generation(scale)
        seen = self.generation
        if reconciled is not None and (seen is None or seen[0] != reconciled[0] or seen[1] < reconciled[1]):
            self.generation = reconciled

    def forget_carried(self) -> None:
        """It is now a duplicate of the runtime's owner: what it carried is not what the runtime holds, and the
        owner warns about the runtime's annotations."""
        self.carried = self.carried_uid = self.set_back = self.asked = self.scale = self.refused_at = None
        self.classed = None
        self.misplaced = ()
        self.echoes_due.clear()

    def ask(self, runtime: str, wanted: int | None) -> None:
        """Set out to carry `wanted` to `runtime` (`asked`); the value asked before, written to the same runtime,
        may still come back from the watch (`echoes_due`, the last few)."""
        before = self.asked
        self.asked = None if wanted is None else (runtime, wanted)
        if before is None or self.asked is None or before[0] != runtime:
            self.echoes_due.clear()
        elif before[1] != wanted:
            self.echoes_due = [*self.echoes_due[-(ECHOES_KEPT - 1):], before[1]]

    def echo(self, runtime: str, found: int | None) -> bool:
        """Whether an event of `runtime` at `found` is the bridge's own write coming back: `asked`'s (which clears
        the older ones due), or a late one of an older value (it, and those due before it, are through)."""
        if self.asked is None or self.asked[0] != runtime:
            return False
        if found == self.asked[1]:
            self.echoes_due.clear()
            return True
        if found is not None and found in self.echoes_due:
            del self.echoes_due[:self.echoes_due.index(found) + 1]
            return True
        return False

    def set_back_level(self, found: int | None, now: float) -> int:
        """WARNING for the first set-back of an episode, DEBUG for the rest: a GitOps tool with self-heal that
        applies the ServingRuntime's manifest puts its value back after every set-back, and a WARNING at every
        resync (each 15 s, all day) buried every other line. An episode is the set-backs of one value less than
        `SET_BACK_EPISODE_S` apart; another value, or the same after a quiet spell, is news again."""
        last, self.set_back = self.set_back, (found, now)
        self.set_backs = [*(t for t in self.set_backs if now - t < FIGHT_WINDOW_S), now]
        same = last is not None and last[0] == found and now - last[1] < SET_BACK_EPISODE_S
        return logging.DEBUG if same else logging.WARNING

    def fought(self, now: float) -> int | None:
        """The set-backs within `FIGHT_WINDOW_S` where there were `FIGHT_SET_BACKS` or more (another writer's
        fight rather than a hand edit: the watch then leaves the runtime to the full pass, at most one set-back a
        resync, until the window holds fewer), else None. Whatever the outside values: a writer that alternates
        two is as much of a fight, and the watch's set-backs of a runtime stay at most `FIGHT_SET_BACKS` in any
        `FIGHT_WINDOW_S`."""
        count = sum(1 for t in self.set_backs if now - t < FIGHT_WINDOW_S)
        return count if count >= FIGHT_SET_BACKS else None

    def fight_news(self, now: float) -> bool:
        """Whether the fight is to be said at WARNING now: its first notice, then one every `SET_BACK_EPISODE_S`
        while it lasts (each set-back's own line is at DEBUG by then, `set_back_level`)."""
        if self.fight_said is not None and now - self.fight_said < SET_BACK_EPISODE_S:
            return False
        self.fight_said = now
        return True


def generation(scale: dict[str, Any]) -> Generation | None:
    """(uid, metadata.generation) of a RuntimeScale: the generation counts its spec's changes (the API server
    raises it on every write of spec.replicas, the HPA's through the scale subresource too)."""
    meta = scale.get("metadata") or {}
    uid, number = meta.get("uid"), meta.get("generation")
    if not isinstance(uid, str) or not isinstance(number, int) or isinstance(number, bool):
        return None
    return uid, number


def older_generation(mine: Generation | None, theirs: Generation | None) -> bool:
    """Whether `mine` is the same object as `theirs` with an older spec; None: not known."""
    return mine is not None and theirs is not None and mine[0] == theirs[0] and mine[1] < theirs[1]
