"""Which runtimes flap, for the transition log: one line when a runtime starts flapping, one when it is steady.

A runtime whose GPU collector times out at every other scrape, or whose exporter answers just within
`max_staleness_s` half the time, goes from held to served and back at every refresh. A line per change is a line
every 15 s for as long as it lasts, the same two lines in turn, and they bury the runtimes that changed once.
So a runtime that goes back to a state a line said less than `FLAP_REFRESHES` refreshes ago, for the second time
within as many refreshes, is *flapping* (once is a blip: a node lost for a refresh, said as it happens): that line
says so, with the states it goes between; its changes are then counted, not logged, until it keeps one state
for `FLAP_REFRESHES` refreshes, and a line says it is steady again, in which state, after how many changes. The
log's last line about a runtime is then never a state it left for good (a limit of one line a minute would leave
the last flip unsaid). A runtime that changes to states it has not been in lately is logged at each change, as
before: those are news; so is a flapping runtime's change to a state it did not flap between (a pod's request
rate missing every other refresh after its GPU did): it is no longer flapping, and the line says the new state.
Back from there within `FLAP_REFRESHES` refreshes in a state it flapped between, it flaps again (said as such).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Final

FLAP_REFRESHES: Final = 4
"""A runtime back in a state said within this many refreshes, twice within as many, flaps; it is steady once it
keeps one state this many refreshes (a minute at the default 15 s --refresh-interval)."""


@dataclass(slots=True)
class _Record:
    """One runtime's recent lines: the refresh each state was last said at, and its flapping if it flaps."""

    said: dict[Hashable, tuple[int, str, Hashable]] = field(default_factory=dict)  # -> (refresh, description, state)
    returned_at: int | None = None  # the refresh of its last line back to what a line said lately
    flapping_since: int | None = None
    state: Hashable = None  # while flapping: its state at the last refresh
    changed_at: int = 0  # while flapping: the refresh its state last changed
    changes: int = 0  # while flapping: its changes since it started
    between: set[Hashable] = field(default_factory=set)  # while flapping: the states it flaps between


@dataclass(frozen=True, slots=True)
class Steady:
    """A flapping runtime that kept one state `FLAP_REFRESHES` refreshes, or (`left`) went to a state it did not
    flap between: after `changes` in `refreshes`."""

    changes: int
    refreshes: int
    left: bool = False


class FlapWatch:
    """Remembers each runtime's recent lines (`said`), and which flap (`flapping`, `steady`). One for the
    transition log's life; `end_refresh` after each refresh forgets what no longer matters."""

    def __init__(self) -> None:
        self._records: dict[Hashable, _Record] = {}
        self._kept: dict[Hashable, _Record] = {}  # the same, for the runtimes of this refresh
        self._refresh = 0

    def flapping(self, key: Hashable) -> bool:
        record = self._records.get(key)
        return record is not None and record.flapping_since is not None

    def said(self, key: Hashable, said: Hashable, state: Hashable, description: str) -> tuple[str, ...] | None:
        """A line about the runtime is due, saying `said` (what a line tells: its state and counts) of its
        `state` (what it flaps between, `steady` compares). None: say it as it is. Else it went back to what a
        line said lately a second time (`returned_at`), and now flaps: the descriptions of the states it goes
        between, for the line that says so. Why two: a count of pods that doubles is news ("gpu missing on 2"
        after "on 1"), not a return; but once it flaps, a count that moves is no change of state that keeps it
        from being steady."""
        record = self._records.get(key) or _Record()
        self._kept[key] = record
        recent = {line: at for line, at in record.said.items() if self._refresh - at[0] < FLAP_REFRESHES}
        record.said = recent
        if said in recent:
            returned_at, record.returned_at = record.returned_at, self._refresh
            if returned_at is not None and self._refresh - returned_at < FLAP_REFRESHES:
                record.flapping_since = record.changed_at = self._refresh
                record.state, record.changes = state, 1
                record.between = {*(was for _, _, was in recent.values()), state}
                return tuple(dict.fromkeys((*(what for _, what, _ in recent.values()), description)))
        recent[said] = (self._refresh, description, state)
        return None

    def steady(self, key: Hashable, said: Hashable, state: Hashable, description: str) -> Steady | None:
        """For a flapping runtime, at each refresh: None while it flaps (a change between its states counted, or not
        steady long enough); else it is steady, or it went to a state it did not flap between (`Steady.left`):
        no longer flapping, and its line is due (saying `said`)."""
        record = self._records[key]
        self._kept[key] = record
        left = state != record.state and state not in record.between
        if state != record.state and not left:
            record.state, record.changed_at = state, self._refresh
            record.changes += 1
            return None
        if not left and self._refresh - record.changed_at < FLAP_REFRESHES:
            return None
        since = record.flapping_since or 0
        record.flapping_since = None
        if left:
            # The states it flapped between were its state until now: back in one of them soon, it flaps again
            # (said as flapping), where forgetting them logged that return as news, a line a refresh on.
            record.returned_at = self._refresh
            record.said = {line: (self._refresh - 1, what, was) for line, (_, what, was) in record.said.items()
                           if was in record.between}
        else:
            record.returned_at = None
            record.said = {}
        record.said[said] = (self._refresh, description, state)
        return Steady(record.changes + left, self._refresh - since, left)

    def keep(self, key: Hashable) -> None:
        """The runtime was noted this refresh without a line: keep its record while it still matters (its lines
        within `FLAP_REFRESHES` refreshes hold its last return too: one is said with them)."""
        record = self._records.get(key)
        if record is not None and (record.flapping_since is not None or any(
                self._refresh - at < FLAP_REFRESHES for at, _, _ in record.said.values())):
            self._kept[key] = record

    def forget(self, key: Hashable) -> None:
        """The runtime was created again under its name: another object, whose lines do not return to the old one's."""
        self._records.pop(key, None)
        self._kept.pop(key, None)

    def end_refresh(self) -> None:
        """Runtimes not noted this refresh (gone) are forgotten, and so are those without a recent line."""
        self._records, self._kept = self._kept, {}
        self._refresh += 1
