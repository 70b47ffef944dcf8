"""The log lines of runtimes whose state changed in one refresh: each said once, and a fleet's in a few lines.

A runtime is logged when it starts or stops being served, complete or warming up: `runtime NS/DEPLOYMENT: 1/2
ready pods fresh; <why>`. One at a time that is the line to read. But a refresh can change thousands at once:
the first refresh after every start (or a rollout of the adapter) finds every runtime, and a broken network
policy or a lost node turns hundreds stale together. One line per runtime then is 5,000 lines saying the same
thing at each restart. So a refresh that changes more than `NAMED` runtimes logs one line per state instead,
with how many, the first few named (`autoscaler.log_lists`) and the first one's own line as an example;
which runtimes exactly, and why, is in `modelmesh_autoscaler_runtime_values_known` and `/debug/runtimes`.

A runtime that stays held changes too: its GPU reading comes back on one pod while another pod stops reporting
requests, or a missing GPU spreads from one pod to three. The line said first would then describe a fault that is
gone, with only /debug current, so a change in *what* is missing is logged as well (`missing_now`,
`worth_saying`): any change in which signals are missing, and a count of pods that at least doubled, or fell
below half, since the line last said it. A count that creeps by one pod each refresh (a rollout, a node
draining) is then a few lines, not one every refresh, and one that goes back and forth by a pod says nothing new;
in between, /debug has the exact count.

A runtime that goes back and forth between states (a GPU collector timing out at every other scrape) is said
once when it starts flapping and once when it is steady again (`autoscaler.transition_flaps`), not at every
refresh.
"""

from __future__ import annotations

import logging
from typing import Final

from autoscaler.log_lists import count_of, in_words, say_each_or_grouped
from autoscaler.model import POD_FIELDS, RuntimeKey, RuntimeView
from autoscaler.policies.decision import SOURCE_DOWN
from autoscaler.policies.signals import MISSING, SIGNALS, STALE
from autoscaler.policies.warmup import WAITING_FOR_ASK
from autoscaler.transition_flaps import FLAP_REFRESHES, FlapWatch, Steady

log = logging.getLogger("autoscaler.refresher")


def changed(before: RuntimeView | None, after: RuntimeView) -> bool:
    """Whether `after` is worth a line: the runtime is new, or is served, complete or warming up where it was
    not (or the other way round)."""
    return (before is None or before.known != after.known or before.complete != after.complete
            or bool(before.warming_up) != bool(after.warming_up))


Missing = tuple[tuple[str, int], ...]
"""What a runtime misses: (signal, Ready pods on which it is stale or missing) for each signal that some Ready pod
misses, in SIGNALS' order; empty when nothing is missing."""


_Noted = tuple[RuntimeView, Missing, str, str]
"""A changed runtime of a refresh: its view, what it misses, its kind (`_FLAPPING`, `_STEADY`, `_LEFT` or "") and
its note."""

assert POD_FIELDS[1] == "ready" and POD_FIELDS[12] == "signals"  # the rows' places `missing_now` reads
_NOT_READ: Final = frozenset((STALE, MISSING))


def missing_now(view: RuntimeView) -> Missing:
    """What `view`'s Ready pods miss. Read from its pods only when it is not complete (a complete runtime misses
    nothing, and is nearly every runtime of a refresh): a pass over 10,000 pods each refresh would cost for
    nothing."""
    if view.complete:
        return ()
    counts = dict.fromkeys(SIGNALS, 0)
    for row in view.pods.rows:
        if row[1]:  # Ready
            for signal, state in row[12]:  # its signals' states
                if state in _NOT_READ and signal in counts:
                    counts[signal] += 1
    return tuple((signal, count) for signal, count in counts.items() if count)


def worth_saying(said: Missing, now: Missing) -> bool:
    """Whether what a runtime misses changed enough for a line since the last one said `said`: another set of
    signals, or a signal's count of pods at least doubled or fell below half. Why not every change of a count: a
    runtime of 200 pods whose count moves by one each refresh as a node drains would log every refresh; doubling
    says it at 1, 2, 4, 8, ... pods. Why below half, not at half: a count going 1, 2, 1, 2 would then log every
    refresh; so a count that moves back and forth by one pod says nothing new."""
    if tuple(signal for signal, _ in said) != tuple(signal for signal, _ in now):
        return True
    return any(count >= 2 * before or 2 * count < before for (_, before), (_, count) in zip(said, now, strict=True))


def _state(view: RuntimeView, missing: Missing) -> str:
    if view.scaled_to_zero:
        return "scaled to zero (nothing to judge; 503, the HPA holds)"
    if view.being_deleted:
        return "being deleted (nothing to judge; 503, the HPA holds)"
    if view.complete:
        return "serving"
    if view.warming_up.startswith(WAITING_FOR_ASK):
        return "warming up (503 until the RuntimeScales are listed)"
    if view.warming_up:
        return "warming up (503 until every Ready pod is fresh)"
    if view.known:
        signals = in_words([signal for signal, _ in missing]) if missing else ""
        return f"holding values (some Ready pods not fresh{': ' + signals + ' missing' if signals else ''})"
    return "unknown (503)"


def _level(view: RuntimeView) -> int:
    """INFO for a runtime served in full, scaled to zero, being deleted, or waiting at start for the RuntimeScales'
    first list (a round trip at every start: nothing is wrong); else WARNING."""
    return (logging.INFO if view.complete or view.nothing_to_judge or view.warming_up.startswith(WAITING_FOR_ASK)
            else logging.WARNING)


def _line(view: RuntimeView, note: str = "") -> str:
    """The runtime's line; `note` (flapping, steady again) comes first, what it is now after it."""
    if view.reason.startswith(SOURCE_DOWN):  # its pods' samples are the last good ones, kept: none read now
        now = f"{view.ready_pods} ready pods, none read; {view.reason}"
    else:
        now = f"{view.fresh_pods}/{view.ready_pods} ready pods fresh; {view.reason or 'serving'}"
    return f"runtime {view.key}: {note}; now {now}" if note else f"runtime {view.key}: {now}"


_FLAPPING: Final = "flapping"
_STEADY: Final = "steady"
_LEFT: Final = "left"  # a flapping runtime gone to a state it did not flap between
_UNTIL_STEADY: Final = f"its changes are not logged until it keeps one state for {FLAP_REFRESHES} refreshes"


def _flapping_note(between: tuple[str, ...]) -> str:
    return f"flapping between {in_words(between)} ({_UNTIL_STEADY})"


def _steady_note(steady: Steady) -> str:
    if steady.left:
        return (f"no longer flapping, a new state after {count_of(steady.changes, 'change')} in "
                f"{steady.refreshes} refreshes of flapping")
    return (f"steady again after {count_of(steady.changes, 'change')} in {steady.refreshes} refreshes "
            "of flapping")


def _flap_state(view: RuntimeView, missing: Missing) -> tuple[object, ...]:
    """What a runtime flaps between: served or not, complete, warming up, scaled to zero or being deleted, its
    source down, and which signals it misses (not on how many pods: a count that wavers is `worth_saying`'s)."""
    return (view.known, view.complete, bool(view.warming_up), view.scaled_to_zero, view.being_deleted,
            view.reason.startswith(SOURCE_DOWN), tuple(signal for signal, _ in missing))


def _said(view: RuntimeView, missing: Missing) -> tuple[object, ...]:
    """What a line about a runtime tells: its state, and on how many pods each signal misses."""
    return (*_flap_state(view, missing), missing)


class RuntimeTransitions:
    """Collects one refresh's changed runtimes (`note`), then logs them (`flush`). One for the refresher's life: it
    remembers what each runtime's last line said was missing (`worth_saying`), and which runtimes flap
    (`FlapWatch`)."""

    def __init__(self) -> None:
        self._views: list[_Noted] = []
        self._said: dict[RuntimeKey, Missing] = {}  # runtimes whose last line said something missing
        self._kept: dict[RuntimeKey, Missing] = {}  # the same, for the runtimes of this refresh
        self._flaps = FlapWatch()

    def note(self, before: RuntimeView | None, after: RuntimeView) -> None:
        key = after.key
        said = self._said.get(key, ())
        if after.reason.startswith(SOURCE_DOWN):  # nothing read: the pods age together, the source's line says why
            missing = said
            worth = changed(before, after)
        else:
            missing = missing_now(after)
            worth = changed(before, after) or (missing != said and worth_saying(said, missing))
        flaps = self._flaps
        if flaps.flapping(key):
            steady = flaps.steady(key, _said(after, missing), _flap_state(after, missing), _state(after, missing))
            if steady is not None:
                self._views.append((after, missing, _LEFT if steady.left else _STEADY, _steady_note(steady)))
            said = missing  # what it misses now, for the line after it is steady
        elif worth:
            between = flaps.said(key, _said(after, missing), _flap_state(after, missing), _state(after, missing))
            if between is None:
                self._views.append((after, missing, "", ""))
            else:
                self._views.append((after, missing, _FLAPPING, _flapping_note(between)))
            said = missing
        else:
            flaps.keep(key)
        if said:
            self._kept[key] = said

    def forget(self, key: RuntimeKey) -> None:
        """Drop what the last lines said of the runtime (a runtime gone is dropped at `flush` anyway: not noted)."""
        self._said.pop(key, None)
        self._kept.pop(key, None)
        self._flaps.forget(key)

    def flush(self) -> None:
        views, self._views = self._views, []
        self._said, self._kept = self._kept, {}  # runtimes gone (not noted) are forgotten
        self._flaps.end_refresh()
        say_each_or_grouped(log, views, one=_own_line, state=_group_state, many=_group_line, shown=_runtime_name,
                            level=_own_level)


def _own_line(noted: _Noted) -> str:
    view, _, _, note = noted
    return _line(view, note)


def _own_level(noted: _Noted) -> int:
    view, _, kind, _ = noted
    return _flap_level(view, kind)


def _group_state(noted: _Noted) -> str:
    """The state a refresh's line for many runtimes says they are now in."""
    view, missing, kind, _ = noted
    state = _state(view, missing)
    if kind == _FLAPPING:
        return f"flapping ({_UNTIL_STEADY}), now {state}"
    if kind == _LEFT:
        return f"no longer flapping, a new state: {state}"
    if kind == _STEADY:
        return f"steady again after flapping: {state}"
    return state


def _group_line(count: int, state: str, named: str, first: _Noted) -> str:
    return f"{count} runtimes now {state}: {named} (e.g. {_own_line(first)})"


def _runtime_name(noted: _Noted) -> str:
    return str(noted[0].key)


def _flap_level(view: RuntimeView, kind: str) -> int:
    """`_level`, but WARNING for a runtime that starts flapping, whatever it is now."""
    return logging.WARNING if kind == _FLAPPING else _level(view)
