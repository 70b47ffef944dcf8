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
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Final

from autoscaler.log_lists import NAMED, few, in_words
from autoscaler.model import POD_FIELDS, RuntimeKey, RuntimeView
from autoscaler.policies.decision import SOURCE_DOWN
from autoscaler.policies.signals import MISSING, SIGNALS, STALE

log = logging.getLogger("autoscaler.refresher")


def changed(before: RuntimeView | None, after: RuntimeView) -> bool:
    """Whether `after` is worth a line: the runtime is new, or is served, complete or warming up where it was
    not (or the other way round)."""
    return (before is None or before.known != after.known or before.complete != after.complete
            or bool(before.warming_up) != bool(after.warming_up))


Missing = tuple[tuple[str, int], ...]
"""What a runtime misses: (signal, Ready pods on which it is stale or missing) for each signal that some Ready pod
misses, in SIGNALS' order; empty when nothing is missing."""

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
    if view.complete:
        return "serving"
    if view.warming_up:
        return "warming up (503 until every Ready pod is fresh)"
    if view.known:
        signals = in_words([signal for signal, _ in missing]) if missing else ""
        return f"holding values (some Ready pods not fresh{': ' + signals + ' missing' if signals else ''})"
    return "unknown (503)"


def _level(view: RuntimeView) -> int:
    """INFO for a runtime served in full, or scaled to zero (nothing is wrong); else WARNING."""
    return logging.INFO if view.complete or view.scaled_to_zero else logging.WARNING


def _line(view: RuntimeView) -> str:
    if view.reason.startswith(SOURCE_DOWN):  # its pods' samples are the last good ones, kept: none read now
        return f"runtime {view.key}: {view.ready_pods} ready pods, none read; {view.reason}"
    return f"runtime {view.key}: {view.fresh_pods}/{view.ready_pods} ready pods fresh; {view.reason or 'serving'}"


class RuntimeTransitions:
    """Collects one refresh's changed runtimes (`note`), then logs them (`flush`). One for the refresher's life: it
    remembers what each runtime's last line said was missing (`worth_saying`)."""

    def __init__(self) -> None:
        self._views: list[tuple[RuntimeView, Missing]] = []
        self._said: dict[RuntimeKey, Missing] = {}  # runtimes whose last line said something missing
        self._kept: dict[RuntimeKey, Missing] = {}  # the same, for the runtimes of this refresh

    def note(self, before: RuntimeView | None, after: RuntimeView) -> None:
        said = self._said.get(after.key, ())
        if after.reason.startswith(SOURCE_DOWN):  # nothing read: the pods age together, the source's line says why
            missing = said
            worth = changed(before, after)
        else:
            missing = missing_now(after)
            worth = changed(before, after) or (missing != said and worth_saying(said, missing))
        if worth:
            self._views.append((after, missing))
            said = missing
        if said:
            self._kept[after.key] = said

    def flush(self) -> None:
        views, self._views = self._views, []
        self._said, self._kept = self._kept, {}  # runtimes gone (not noted) are forgotten
        if len(views) <= NAMED:
            for view, _ in views:
                log.log(_level(view), "%s", _line(view))
            return
        by_state: dict[str, list[RuntimeView]] = defaultdict(list)
        for view, missing in views:
            by_state[_state(view, missing)].append(view)
        for state, group in by_state.items():
            level = _level(group[0])
            keys = [str(view.key) for view in group]
            if len(group) == 1:
                log.log(level, "%s", _line(group[0]))
                continue
            log.log(level, "%d runtimes now %s: %s (e.g. %s)", len(group), state, few(keys), _line(group[0]))
