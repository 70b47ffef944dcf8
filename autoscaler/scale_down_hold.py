"""Holding a runtime's scale-down until its deletion costs are written (`RankingHold`), by the rules
`autoscaler.ranking_hold` gives with the reasons for them: each runtime's hold is a spell (`_Spell`) from the refresh
that first held it until its costs are on the pods, its clock stopped by data outages, bounded by
`COST_HOLD_MAX_S`, its news said once a refresh in lines that name a fleet's runtimes together.

Logs go to `autoscaler.ranking_hold`'s logger, where the hold's lines always were.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from autoscaler.log_lists import count_of, few
from autoscaler.model import RuntimeKey, RuntimeView, ServedValue
from autoscaler.names import ServedMetric
from autoscaler.policies.load_noise import load_noise_need
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.ranking_hold import (
    COST_HOLD_MAX_S,
    EXPIRED,
    NAMED_PODS,
    RBAC_HINT,
    CostsPending,
    HoldReason,
    RankingWrites,
    pods_removed,
)

__all__ = ["RankingHold"]

log = logging.getLogger("autoscaler.ranking_hold")
"""The hold's logger, by the module that says why it holds (operators and tests filter on it)."""

_DESIRED: Final = ServedMetric.DESIRED_REPLICAS


_FAILING: Final = frozenset({HoldReason.REFUSED, HoldReason.THROTTLED, HoldReason.NO_ANSWER})
"""The waits that name something to fix, as against the writer's turn (`queued`) or the leader's (`leader`)."""


@dataclass(slots=True)
class _Spell:
    """One runtime's hold, from the refresh that first held it until its costs are on the pods."""

    since: float
    """When the hold started, moved on by each data outage within it (`paused_at`): the bound counts only the
    time the held value was served."""
    warned: bool = False
    past: bool = False
    paused_at: float | None = None
    """The first refresh of a data outage within the hold (it decided nothing); None while refreshes decide."""
    paused_s: float = 0.0
    """The outages' time within the hold, said with its length."""
    before_outage: CostsPending | None = None
    """What the writes last failed on when the last outage started: after it they may read `queued` (the writer has
    not tried since) where they waited on a refusal, and the log named nothing to fix."""
    failed: CostsPending | None = None
    """What the writes waited on at the last refresh that judged them failing (refused, throttled, no answer). Not
    the last judged alone: a refresh between the writer's tries reads `queued`, and when the outage began right after
    one, the cause seen a refresh earlier was lost (a CI run's 'held ... (queued)' with the 503s unnamed)."""
    graced: bool = False
    """A refresh after an outage held it past the bound, once: the writer had not been handed its ranking."""

    def pause(self, now: float) -> None:
        """A refresh decided nothing (its data stale): the HPA keeps its replicas, so the hold's clock stops."""
        if self.paused_at is None:
            self.paused_at = now
            self.before_outage = self.failed

    def resume(self, now: float) -> None:
        """A refresh decides again: the outage's time is not the hold's."""
        if self.paused_at is not None:
            self.since += now - self.paused_at
            self.paused_s += now - self.paused_at
            self.paused_at = None

    def waiting_on(self, pending: CostsPending) -> CostsPending:
        """`pending`, and what the writes waited on before an outage where only queued now: the cause to fix."""
        if pending.reason in _FAILING:
            self.failed = pending
        before = self.before_outage
        if pending.reason is not HoldReason.QUEUED or before is None or before.reason is HoldReason.QUEUED:
            return pending
        return dataclasses.replace(pending, causes=(
            *pending.causes, *(f"{cause} before the data outage" for cause in before.causes)))

    def length(self, waited: float) -> str:
        """`75 s`, or `75 s, not counting 300 s without data`: the time held, as the bound counts it."""
        return f"{waited:.0f} s" + (f", not counting {self.paused_s:.0f} s without data" if self.paused_s else "")


class RankingHold:
    """Holds the served replica count of runtimes whose ranking is not yet written; keeps each spell's start."""

    def __init__(self, bound_s: float = COST_HOLD_MAX_S, counted: Callable[[str], None] | None = None) -> None:
        """`counted`: told the reason at each refresh that holds a runtime, and `EXPIRED` as a hold reaches
        `bound_s` (the self-metric `modelmesh_autoscaler_scale_down_holds_total`): a hold of one refresh is never
        logged, and without the count nothing said how often scale-downs waited, or on what."""
        self.bound_s = bound_s
        self._counted = counted or (lambda reason: None)
        self._spells: dict[RuntimeKey, _Spell] = {}
        self._waiting: list[str] = []  # this refresh's new warnings, said by `flush`
        self._past: list[str] = []
        self._past_refused_403 = False  # one of this refresh's runtimes past the bound had a write refused 403
        self._written: list[RuntimeKey] = []
        self._in_order: list[str] = []  # holds let go as the order is right without the costs this ranking wants
        self._turned: list[str] = []  # runtimes whose clearly turned ranking is written at once (`_hurry_turn`)
        self._told_turned: set[RuntimeKey] = set()  # runtimes whose turn the log named, until it is over
        self._removing: dict[RuntimeKey, int] = {}  # pods the decided value removed at the last refresh
        self._handed: dict[RuntimeKey, RuntimeView] = {}  # the last view that decided a scale-down (`_handed_to`)
        self._undecided: set[RuntimeKey] = set()  # runtimes whose last refresh decided no replica count
        self._served_before_outage: dict[RuntimeKey, RuntimeView] = {}  # of the `_undecided`: served before

    def hold(self, view: RuntimeView, before: RuntimeView | None, now: float, writes: RankingWrites,
             policy: RuntimePolicy) -> RuntimeView:
        """The view to serve: `view`, or with its replica count held (and /debug's `held` and reason saying so).
        `before`: the view served at the last refresh; `now`: seconds on the clock the spell is timed on;
        `policy`: the runtime's, whose weights say how far load noise moves its ranking (`_hurry_turn`)."""
        key = view.key
        served = view.values.get(_DESIRED)
        current = view.current_replicas
        if served is None or served.value is None or current is None:
            # Not decided (its data stale, the API answers 503): the HPA keeps its replicas, and the hold keeps
            # its spell and the pods judged. Dropped, a refresh without data ended a hold whose write was still
            # refused, and restarted its bound. Its clock stops meanwhile: running on, every runtime held when a
            # Prometheus outage started went ahead together at the first refresh with data, before the writer
            # had that refresh's ranking.
            if key not in self._undecided and before is not None:
                self._served_before_outage[key] = before
            self._undecided.add(key)
            if (paused := self._spells.get(key)) is not None:
                paused.pause(now)
            return view
        undecided = key in self._undecided
        self._undecided.discard(key)
        if undecided:  # what the HPA read last is what was served before the outage (it read 503 meanwhile)
            before = self._served_before_outage.pop(key, None)
        earlier = before.values.get(_DESIRED) if before is not None else None
        floor = float(current) if earlier is None or earlier.value is None else min(earlier.value, float(current))
        target = math.ceil(served.value)  # as the HPA rounds it
        removing = pods_removed(view, current, target)
        handed = self._handed_to(view, removing)
        if removing <= 0:  # no pod would go
            self._spells.pop(key, None)
            self._told_turned.discard(key)
            return view
        if served.value >= floor:  # below what runs since an earlier refresh: judged then
            spell = self._spells.pop(key, None)
            if spell is not None and spell.past:  # the misplacement just let go, not a turn: said already
                self._told_turned.add(key)
            self._hurry_turn(view, removing, writes, policy)
            return view
        pending = writes.misordered(key, view, removing, handed)
        if pending is None:
            spell = self._spells.pop(key, None)
            if spell is not None and spell.warned:
                if unwritten := writes.unwritten(key, view):
                    self._in_order.append(f"{key} (deletion costs of {few(unwritten, NAMED_PODS)} still not on "
                                          f"the pods)")
                else:
                    self._written.append(key)
            self._hurry_turn(view, removing, writes, policy)
            return view
        spell = self._spells.setdefault(key, _Spell(now))
        spell.resume(now)
        waited = now - spell.since
        pending = spell.waiting_on(pending)
        missing = pending.describe()
        expired = waited > self.bound_s
        if expired and undecided and not spell.graced:  # after an outage the writer has not had this ranking
            spell.graced = True  # once a spell: refreshes that flap between data and none do not hold for ever
            expired = False
        if expired:
            if not spell.past:
                spell.past = True
                if pending.reason is not HoldReason.LEADER:
                    # Counted by the replica that leads as it goes ahead: every replica holds, and all counting
                    # it made one scale-down read 2 (the shipped 2 replicas) in the alert that sums them. Not
                    # `max` over replicas: across a hand-over or a rolling upgrade each replica counts different
                    # spells, and the largest undercounts.
                    self._counted(EXPIRED)
                self._past.append(f"{key} ({missing} for {spell.length(waited)}; falls to {served.value:g})")
                self._past_refused_403 |= any("refused with 403" in cause for cause in pending.causes)
            note = (f"{missing} for {spell.length(waited)}, past the {self.bound_s:g} s a scale-down waits for "
                    f"them: {_DESIRED.value} falls with the costs as they are")
            return dataclasses.replace(view, reason=f"{view.reason}; {note}" if view.reason else note)
        if waited > 0 and not spell.warned:
            spell.warned = True
            self._waiting.append(f"{key} (held at {floor:g}, not {served.value:g}; {missing})")
        self._counted(pending.reason)
        why = (f"{missing}, not the least needed; held at {floor:g} (not {served.value:g}) so that the "
               f"scale-down removes the least needed pods, until the first refresh past {self.bound_s:g} s")
        held = dict(view.held)
        held[_DESIRED.value] = f"{held[_DESIRED.value]}; {why}" if _DESIRED.value in held else why
        part = f"{_DESIRED.value} held: {why}"
        return dataclasses.replace(
            view, values={**view.values, _DESIRED: ServedValue(floor, served.raw, served.timestamp)}, held=held,
            reason=f"{view.reason}; {part}" if view.reason else part)

    def _handed_to(self, view: RuntimeView, removing: int) -> RuntimeView | None:
        """The view whose ranking the writer was last handed for this scale-down (remembering `view` for the next
        refresh), or None where it starts or grows now. Across refreshes that decided nothing (their data stale),
        the one before them: taken as news, the first refresh with data after each outage was judged by its own
        exact ranking, load noise held it, each hold put the replicas that run back into the HPA's window, and
        outages every few refreshes stopped scale-downs for good. A misorder the writer has not fixed (its writes
        refused) was in that view too, and still holds."""
        key = view.key
        was = self._handed.pop(key, None)
        handed = was if removing <= self._removing.get(key, 0) else None
        if removing > 0:
            self._removing[key] = removing
            self._handed[key] = view
        else:
            self._removing.pop(key, None)
        return handed

    def _hurry_turn(self, view: RuntimeView, removing: int, writes: RankingWrites, policy: RuntimePolicy) -> None:
        """A scale-down not held whose ranking clearly turned (the load moved onto a pod the ReplicaSet would
        remove): its costs are written at the writer's next pass, not at each pod's minute. Only a turn beyond
        load noise (`load_noise_need`): noise is written at the minute, as holding there held scale-downs back
        and hurrying every turn sent two thirds more PATCHes. The log names a turn once, as the hold's warning
        does, until it is over (the costs on the pods, or the turn within noise) or the value no longer removes a
        pod: said at every refresh, it repeated itself 20 times in 5 minutes while the writes were refused, beside
        the writer's own "next try in 300 s"."""
        key = view.key
        if not writes.hurry_turned(key, view, removing, lambda: load_noise_need(policy, view)):
            self._told_turned.discard(key)
        elif key not in self._told_turned:
            self._told_turned.add(key)
            self._turned.append(str(key))

    def forget(self, key: RuntimeKey) -> None:
        """Drop the runtime's spell and the pods its last value removed: it is gone, or another object whose
        scale-down starts now (`autoscaler.forgetting`)."""
        self._spells.pop(key, None)
        self._removing.pop(key, None)
        self._handed.pop(key, None)
        self._undecided.discard(key)
        self._served_before_outage.pop(key, None)
        self._told_turned.discard(key)

    def flush(self) -> None:
        """Say this refresh's news (one line each, a fleet's runtimes together)."""
        waiting, self._waiting = self._waiting, []
        past, self._past = self._past, []
        written, self._written = self._written, []
        in_order, self._in_order = self._in_order, []
        turned, self._turned = self._turned, []
        if waiting:
            log.warning(
                "scale-down waits for deletion costs: %s of %s held, as the costs of their new ranking are not on "
                "the pods yet and the ReplicaSet would remove a pod still needed; until the first refresh past %g s "
                "held, then it goes ahead: %s",
                _DESIRED.value, count_of(len(waiting), "runtime"), self.bound_s, few(waiting))
        if past:
            refused, self._past_refused_403 = self._past_refused_403, False
            log.warning(
                "scale-down goes ahead with stale deletion costs: %s held past %g s for them; the ReplicaSet may "
                "remove a pod still needed. Fix what each names the writes wait on (the 'deletion costs ... not "
                "written' lines of the leader's log%s): %s", count_of(len(past), "runtime"), self.bound_s,
                f"; {RBAC_HINT}" if refused else "", few(past))
        if turned:
            log.info("ranking turned while %s is below the replicas (the load moved onto a pod the ReplicaSet would "
                     "remove): writing deletion costs now, not at each pod's minute, for %s", _DESIRED.value,
                     few(turned))
        if written:
            log.info("deletion costs written: %s may fall again for %s", _DESIRED.value,
                     few([str(key) for key in written]))
        if in_order:
            log.info("scale-down no longer waits for deletion costs: %s may fall again for %s, as the pods the "
                     "ReplicaSet would remove by the costs they carry are now among the least needed (the load "
                     "moved); the costs of this ranking are not all written (the 'deletion costs ... not written' "
                     "lines of the leader's log say why): %s", _DESIRED.value, count_of(len(in_order), "runtime"),
                     few(in_order))
