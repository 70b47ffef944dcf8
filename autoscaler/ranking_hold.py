"""A scale-down waits for its deletion costs: while the costs of a runtime's new ranking are not yet on its pods,
`modelmesh_desired_replicas` may rise but not fall below what runs (docs/design.md, "Choosing the pod to remove").

Why: the HPA lowers the replicas as soon as it reads the lower value, and the ReplicaSet then removes the pod with
the lowest `controller.kubernetes.io/pod-deletion-cost`. The writer patches the costs on its own task, apart from the
refresh: a PATCH refused (503, 403), a `Retry-After` pausing the writer, or a fleet-wide drop queueing thousands of
patches (20 a second) left the lower value served while the cluster still ranked the pod now most needed lowest,
and that pod was removed. So, as for missing data ("never signal a scale-down on missing data"), the served
value is held where it would fall below both what was served before and the current replicas (a pod would go)
while some pod that the writer writes does not carry the cost this refresh ranks it at.

For at most `COST_HOLD_MAX_S` (one writer backoff cap, four HPA syncs): a lasting failure (a Role without `patch` on
`pods`) must not stop scale-downs for good. Past it the value falls with the costs as they are, and a warning says
what to fix. Usually the hold lasts one refresh: the refresh that lowers the value is also the one that hands the
writer the new ranking, which it writes within the next 15 s. The log says it only when it lasts longer (the
writer had its chance), once per runtime and spell, a fleet's runtimes in one line.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from autoscaler.log_lists import few
from autoscaler.model import RuntimeKey, RuntimeView, ServedValue
from autoscaler.names import ServedMetric

log = logging.getLogger(__name__)

COST_HOLD_MAX_S: Final = 60.0
"""The longest a scale-down waits for its deletion costs (seconds): the writer's backoff cap, so that a failing
PATCH is tried again at least once meanwhile; four syncs of the HPA."""

_DESIRED: Final = ServedMetric.DESIRED_REPLICAS


class RankingWrites(Protocol):
    """What the hold needs from the deletion-cost writer (`DeletionCostWriter` has it), without importing it."""

    def offer(self, views: Mapping[RuntimeKey, RuntimeView]) -> None:
        """Take the refresh's views as decided, before any hold: the writer must see the scale-down to hurry."""

    def unwritten_pods(self, key: RuntimeKey, view: RuntimeView) -> tuple[int, int]:
        """(pods whose cost the view ranks them at is not on them yet, pods the writer writes) for the runtime."""


@dataclass(slots=True)
class _Spell:
    since: float
    warned: bool = False
    past: bool = False


class RankingHold:
    """Holds the served replica count of runtimes whose ranking is not yet written; keeps each spell's start."""

    def __init__(self, bound_s: float = COST_HOLD_MAX_S) -> None:
        self.bound_s = bound_s
        self._spells: dict[RuntimeKey, _Spell] = {}
        self._waiting: list[str] = []  # this refresh's new warnings, said by `flush`
        self._past: list[str] = []
        self._written: list[RuntimeKey] = []

    def hold(self, view: RuntimeView, before: RuntimeView | None, now: float, writes: RankingWrites) -> RuntimeView:
        """The view to serve: `view`, or with its replica count held (and /debug's `held` and reason saying so).
        `before`: the view served at the last refresh; `now`: seconds on the clock the spell is timed on."""
        key = view.key
        served = view.values.get(_DESIRED)
        current = view.current_replicas
        if served is None or served.value is None or current is None:
            self._spells.pop(key, None)
            return view
        earlier = before.values.get(_DESIRED) if before is not None else None
        floor = float(current) if earlier is None or earlier.value is None else min(earlier.value, float(current))
        if served.value >= floor:  # no pod would go on this value's account
            self._spells.pop(key, None)
            return view
        unwritten, of = writes.unwritten_pods(key, view)
        if not unwritten:
            spell = self._spells.pop(key, None)
            if spell is not None and spell.warned:
                self._written.append(key)
            return view
        spell = self._spells.setdefault(key, _Spell(now))
        waited = now - spell.since
        missing = f"deletion costs of {unwritten} of {of} pods not written"
        if waited > self.bound_s:
            if not spell.past:
                spell.past = True
                self._past.append(f"{key} ({missing} for {waited:.0f} s; falls to {served.value:g})")
            note = (f"{missing} for {waited:.0f} s, past the {self.bound_s:g} s a scale-down waits for them: "
                    f"{_DESIRED.value} falls with the costs as they are")
            return dataclasses.replace(view, reason=f"{view.reason}; {note}" if view.reason else note)
        if waited > 0 and not spell.warned:
            spell.warned = True
            self._waiting.append(f"{key} (held at {floor:g}, not {served.value:g}; {unwritten} of {of} pods)")
        why = (f"{missing} yet; held at {floor:g} (not {served.value:g}) so that the scale-down removes the least "
               f"needed pod, for at most {self.bound_s:g} s")
        held = dict(view.held)
        held[_DESIRED.value] = f"{held[_DESIRED.value]}; {why}" if _DESIRED.value in held else why
        part = f"{_DESIRED.value} held: {why}"
        return dataclasses.replace(
            view, values={**view.values, _DESIRED: ServedValue(floor, served.raw, served.timestamp)}, held=held,
            reason=f"{view.reason}; {part}" if view.reason else part)

    def flush(self, present: Collection[RuntimeKey]) -> None:
        """Say this refresh's news (one line each, a fleet's runtimes together) and forget runtimes gone."""
        waiting, self._waiting = self._waiting, []
        past, self._past = self._past, []
        written, self._written = self._written, []
        if waiting:
            log.warning(
                "scale-down waits for deletion costs: %s of %d runtime%s held, as the costs of their new ranking "
                "are not on the pods yet (refused, throttled or still queued: the 'deletion costs ... not written' "
                "lines say why) and the ReplicaSet would remove a pod still needed; for at most %g s, then it goes "
                "ahead: %s", _DESIRED.value, len(waiting), "" if len(waiting) == 1 else "s", self.bound_s,
                few(waiting))
        if past:
            log.warning(
                "scale-down goes ahead with stale deletion costs: %d runtime%s waited %g s for them; the ReplicaSet "
                "may remove a pod still needed. Fix what refuses the writes (the 'deletion costs ... not written' "
                "lines: a 403 is a Role without the verb patch on pods in that namespace): %s",
                len(past), "" if len(past) == 1 else "s", self.bound_s, few(past))
        if written:
            log.info("deletion costs written: %s may fall again for %s", _DESIRED.value,
                     few([str(key) for key in written]))
        for key in [key for key in self._spells if key not in present]:
            del self._spells[key]
