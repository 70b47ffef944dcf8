"""Counts that rose in a reading refused for rising faster than any pod's, read from then on as what they added
since that reading.

The refusal (`exporter.counter_ceilings`) compared each reading with the last accepted one. A count that jumped
and stays there (a ModelMesh bug adding 1e12 once, then counting on normally) had risen as far at every later
read, so every read was refused: the pod's load went stale for good and the adapter held its runtime. So a
refused reading is a new baseline for the series it raised, as a restart is for a new container's: a later count
at or above the refused one is read as the series' count before the refusal plus what it added since. What the
refused read itself added is not counted (one read's worth: the jump hides it).

A count back below the refused one (a garble that read 1e308 once, then ModelMesh's true count again) shows that
reading garbled, not jumped: every count it raised is read as it is again, against its count before the refusal,
so nothing is lost and nothing counts twice. Compared with the refused count, it would read as a restart and
count the pod's whole history again.

A count exactly at the refused one tells neither (`Unjumped.stuck`): a garble that stays, or a jump with no
request since. Read from the refused count it added nothing, and a busy pod whose count was stuck at 1e308 (its
increments lost in the float) was published idle; so while the series the refusal named sits there, each reading
is refused too, and the pod's last good values stay. Neither time nor the count's size tells the two apart: a
busy pod's count clamped to a constant (2^31 - 1) or stopped stays as exactly as an idle jump's, for ever, though
its increments would show in a float; so no number of unchanged reads makes it a baseline (the cost: an idle
model whose count jumped keeps its pod's reads refused until its next request).
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass

from exporter.counter_ceilings import Series


@dataclass(frozen=True, slots=True)
class Jump:
    """One series' rise in a refused reading."""

    read: float
    """What ModelMesh's body said in the refused reading."""
    before: float
    """The series' count as counted before it (0 when the reading was also a new container's)."""
    refused_at: float
    """When the refused reading was read: the jumps of one reading end together."""
    culprit: bool = False
    """The series that rose most in the refused reading (the one its refusal named): until it moves from the
    refused count, nothing tells a jump from a garble that stays (`Unjumped.stuck`)."""


@dataclass(frozen=True, slots=True)
class Unjumped:
    """One reading's counts as the running totals read them (`CounterJumps.read`)."""

    counts: dict[Series, float]
    stayed: bool
    """Some series is at or above its refused count: the refusal is the baseline of what it counts on from."""
    ended: frozenset[Series]
    """The series of the refused readings that some count is back below: their jumps are over once the reading
    is accepted."""
    below: int = 0
    """How many series are back below their refused count (the ones the garble hit), for the line that says so."""
    stuck: Series | None = None
    """The series a refusal named, still at exactly its refused count: a garble that stays (a count stuck at
    1e308, whose increments do not show) or a jump with no request since. Read from the refused count it adds 0,
    and a busy pod was published idle; so the reading is refused too, the last good values kept, until it moves."""


class CounterJumps:
    """The jumps of the series that rose in refused readings, until each series comes back below its jump, the
    container restarts, or the series goes unseen as long as the running totals remember one."""

    def __init__(self) -> None:
        self._jumps: dict[Series, Jump] = {}

    def read(self, counts: Mapping[Series, float]) -> Unjumped:
        """`counts` as ModelMesh's body had them, each jumped series read as its count before the jump plus what it
        added since; changes nothing (a reading may still be refused)."""
        read = dict(counts)
        if not self._jumps:  # every read but the few after a refusal
            return Unjumped(read, False, frozenset())
        below = [jump.refused_at for key, jump in self._jumps.items() if read.get(key, jump.read) < jump.read]
        garbled = set(below)
        for key, jump in self._jumps.items():
            if jump.culprit and jump.refused_at not in garbled and read.get(key) == jump.read:
                return Unjumped(read, False, frozenset(), stuck=key)
        stayed = False
        for key, jump in self._jumps.items():
            if key in read and jump.refused_at not in garbled:
                # not `value - (read - before)`: 1e308 - (1e308 - 100) is 0, not 100
                read[key] = jump.before + (read[key] - jump.read)
                stayed = True
        return Unjumped(read, stayed, frozenset(key for key, jump in self._jumps.items()
                                                if jump.refused_at in garbled), len(below))

    def refused(self, body: Mapping[Series, float], counts: Mapping[Series, float],
                before: Mapping[Series, float], at: float) -> None:
        """The reading read at `at` was refused: each series whose count (`counts`, as `read` gave them) rose above
        the one it was compared with (`before`; none: 0) counts on from its value in the `body`."""
        risen = {key: value - before.get(key, 0.0) for key, value in counts.items() if value > before.get(key, 0.0)}
        most = max(risen, key=risen.__getitem__, default=None)
        for key, increase in risen.items():
            self._jumps[key] = Jump(body[key], counts[key] - increase, at, key == most)

    def accepted(self, reading: Unjumped) -> None:
        """A reading was accepted: the jumps it ended are over."""
        for key in reading.ended:
            del self._jumps[key]

    @property
    def series(self) -> frozenset[Series]:
        """The series with a jump kept."""
        return frozenset(self._jumps)

    def forget_unseen(self, seen: Iterable[Container[Series]], before: float) -> None:
        """Forget the jumps of series in none of `seen` (the reading's and the running totals') that were refused
        before `before`: a series seen once, in a refused read, never reaches the totals, whose staleness clears
        the others (`forget`); kept, every model whose count appeared once garbled grew the memory for good."""
        if not self._jumps:  # every read but the few after a refusal
            return
        places = tuple(seen)
        for key in [key for key, jump in self._jumps.items()
                    if jump.refused_at < before and not any(key in place for place in places)]:
            del self._jumps[key]

    def forget(self, keys: Iterable[Series]) -> None:
        """Series that are gone (a restart's, or long unseen)."""
        for key in keys:
            self._jumps.pop(key, None)
