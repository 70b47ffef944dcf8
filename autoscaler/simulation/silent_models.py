"""One busy model's rows missing while the trace's other models report: a target down, not a quiet model.

`missing_intervals` names stretches where no model has a row; a Prometheus export where the busiest model's
target was down for 40 minutes, the other models reporting as usual, went unsaid, and was replayed as no
requests for that model: a policy scaled down through it and met its traffic after with too few pods.

A model's silence is named where it is implausible as the model's own traffic and the trace's shape: the model
had rows with `BUSY_REQUESTS` or more in (nearly) every one of the `AROUND` intervals either side, had rows in
`NEARLY` of the intervals as far either side as the silence is long (a night job busy an hour a day has a day
around its silence with an hour of rows), the trace's other models have rows in `NEARLY` of the silence's
intervals (a trace that is silent as a whole is `missing_intervals`' to name; the longest such stretch inside the
model's silence is left out of that count, the model's silence named whole), it lasts `LONG_S` or more, and
it is not one of the model's rhythm (`unlike_the_rest`). A model that appears midway or goes quiet for good has
no silence between its rows, so none is named; quiet models (timers, a client's request every few seconds)
are under `BUSY_REQUESTS`. Works on the rows sorted by model, without a loop over models or intervals: a trace
of 5,000 models reads in seconds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import numpy as np

from autoscaler.simulation.hpa_spec import DOWNSCALE_STABILIZATION_S
from autoscaler.simulation.lost_cells import NO_CELLS, LostCells
from autoscaler.simulation.missing_intervals import AROUND, BUSY_REQUESTS, unlike_the_rest
from autoscaler.simulation.timestamps import moment_text, span_text

if TYPE_CHECKING:
    from autoscaler.simulation.trace import Trace

NEARLY: Final = 0.9
"""The share of intervals with rows that is "nearly every": of the model's around a silence, of the other
models' within it, and of the `AROUND` either side (4 of 5)."""
LONG_S: Final = float(DOWNSCALE_STABILIZATION_S)
"""The shortest silence of one model named: the HPA's scale-down window. One model among others silent for less
moves the trace's load by its share for less time than the HPA waits before scaling down."""
NAMES_SHOWN: Final = 5
"""Models named in the warning (then how many more)."""


def silent_model_notes(trace: Trace, lines: np.ndarray, lost: LostCells = NO_CELLS) -> list[str]:
    """One warning naming the models whose rows stop for `LONG_S` or more inside their busy traffic while the
    other models report: the longest such silence (the model, how long, its rows either side, the line after
    it), the others' models, how many and how long in all, and what to do. `lost`: the rows written with
    requests empty, NaN or null, named by their own warning: a silence is judged across them, and one that is
    nothing but them is theirs alone; around a silence they count as rows (their traffic left out)."""
    # Which rows carry BUSY_REQUESTS or more (a row without a value does: its traffic is left out), not the rows'
    # requests: the notes' arrays are a big trace's peak while it is read, and a copy of them was 8 bytes a row
    slot, model, heavy = trace.slot, trace.model, trace.requests >= BUSY_REQUESTS
    valued: np.ndarray | None = None  # which rows have a value (None: all)
    lost_lines = lost.line[lost.model >= 0]
    if len(lost_lines):
        known = lost.model >= 0
        slot, model = np.concatenate([slot, lost.slot[known]]), np.concatenate([model, lost.model[known]])
        heavy = np.concatenate([heavy, np.ones(len(lost_lines), dtype=bool)])
        valued = np.concatenate([np.ones(len(trace.slot), dtype=bool), np.zeros(len(lost_lines), dtype=bool)])
    order = np.lexsort((slot, model))
    slot, model, heavy = slot[order], model[order], heavy[order]
    valued = None if valued is None else valued[order]
    del order  # the lines of the rows named are found again (`_line_of`): this was 8 bytes a row at the peak
    last, next_ = _silences(slot, model, valued)  # the rows with requests either side of each silence
    # the cheap tests first: a trace of 5,000 models has many silences, most of quiet models
    kept = heavy[last] & heavy[next_]
    last, next_ = last[kept], next_[kept]
    first, after = slot[last] + 1, slot[next_]  # each silence: [first, after) of model[last]
    busy = ((after - first) * trace.interval_s >= LONG_S) & _others_report(trace, first, after)
    last, next_, first, after = last[busy], next_[busy], first[busy], after[busy]
    if not len(last):
        return []
    busy = _busy_either_side(slot, model, heavy, last, next_) & _rows_around(slot, model, last, first, after,
                                                                              trace.intervals)
    last, next_, first, after = last[busy], next_[busy], first[busy], after[busy]
    if not len(last):
        return []
    named = np.zeros(len(last), dtype=bool)
    for each in np.unique(model[last]):  # only models with a silence named so far: a few
        of = np.flatnonzero(model[last] == each)
        named[of] = unlike_the_rest(first[of], after[of] - first[of], np.ones(len(of), dtype=bool), trace.interval_s,
                                    trace.intervals)  # judged among this model's own silences
    if not named.any():
        return []
    line_after = [_line_of(trace, lines, int(slot[row]), int(model[row])) for row in next_[named].tolist()]
    return [_warning(trace, model[last[named]], first[named], after[named], line_after)]


def _line_of(trace: Trace, lines: np.ndarray, slot: int, model: int) -> int:
    """The file line of the trace's row of `model` in interval `slot`: its rows are in time, then model order
    (trace_grid.py's `in_order`), one a model and interval."""
    lo, hi = np.searchsorted(trace.slot, [slot, slot + 1])
    return int(lines[int(lo) + int(np.searchsorted(trace.model[lo:hi], model))])


def _silences(slot: np.ndarray, model: np.ndarray, valued: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The rows with requests before and after each of a model's silences (its rows sorted by model and slot;
    `valued`: which have a value, None where all do): judged across its rows without a value, as one NaN row in
    the middle of a target's 40 minutes down split them into two silences under the scale-down window, and none
    was named. A silence that is nothing but such rows is left to their own warning."""
    if valued is None:  # the rows themselves, not a copy of them (8 bytes a row each)
        apart = np.diff(slot)
        apart -= 1  # intervals between them
        silent = model[1:] == model[:-1]
        silent &= apart > 0
        before = np.flatnonzero(silent)
        return before, before + 1
    rows = np.flatnonzero(valued)
    before, after = rows[:-1], rows[1:]
    apart = slot[after] - slot[before] - 1
    silent = (model[after] == model[before]) & (apart > 0) & (after - before - 1 < apart)  # not all rows lost
    return before[silent], after[silent]


def _busy_either_side(slot: np.ndarray, model: np.ndarray, heavy: np.ndarray, last: np.ndarray,
                      next_: np.ndarray) -> np.ndarray:
    """Whether the model had rows in nearly every one of the `AROUND` intervals before its silence (from row
    `last` to row `next_`) and after it, each with `BUSY_REQUESTS` or more (`heavy`: rows without a value are,
    left out of that)."""
    busy = np.ones(len(last), dtype=bool)
    for side, edge in ((-1, last), (1, next_)):
        near = np.zeros(len(last), dtype=np.int64)
        for step in range(AROUND):
            row = np.clip(edge + side * step, 0, len(slot) - 1)
            inside = (model[row] == model[edge]) & (np.abs(slot[row] - slot[edge]) < AROUND)
            near += inside
            busy &= ~inside | heavy[row]
        busy &= near >= int(NEARLY * AROUND)
    return busy


def _others_report(trace: Trace, first: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Whether the trace has rows (the other models', as this one has none) in nearly every interval of each
    silence [first, after), or in nearly every one but those of the longest stretch in it without any model's
    row and in `LONG_S` or more: a collector down 10 minutes inside a target's 40 minutes down left the others
    rows in 75% of the model's silence, and only the 10 minutes were named (`missing_intervals` names them; the
    model's 40 are its own). Scattered intervals without any row (the others sparse) are still counted."""
    running = _reported(trace)
    reported = running[after] - running[first]
    reporting: np.ndarray = reported >= NEARLY * (after - first)
    maybe = np.flatnonzero(~reporting & (reported * trace.interval_s >= LONG_S))
    if len(maybe):  # the few where it decides: a loop over them, not over every silence of 5,000 models
        starts, ends = _trace_silences(running)
        for i in maybe.tolist():
            longest = _longest_within(starts, ends, int(first[i]), int(after[i]))
            reporting[i] = reported[i] >= NEARLY * (after[i] - first[i] - longest)
    return reporting


def _reported(trace: Trace) -> np.ndarray:
    """How many of the trace's intervals before each have a row of any model (from 0 before the first)."""
    reported = np.zeros(trace.intervals, dtype=np.int64)
    reported[trace.slot] = 1
    return np.concatenate([[0], np.cumsum(reported)])


def _trace_silences(running: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The stretches without any model's row, [starts, ends), from `_reported`."""
    silent = np.diff(running) == 0
    edges = np.diff(np.concatenate([[0], silent.astype(np.int8), [0]]))
    return np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)


def _longest_within(starts: np.ndarray, ends: np.ndarray, first: int, after: int) -> int:
    """The longest of the stretches [starts, ends) within [first, after), cut at its ends (0 where none is)."""
    lo, hi = int(np.searchsorted(ends, first, side="right")), int(np.searchsorted(starts, after, side="left"))
    if lo >= hi:
        return 0
    return int((np.minimum(ends[lo:hi], after) - np.maximum(starts[lo:hi], first)).max())


def _rows_around(slot: np.ndarray, model: np.ndarray, last: np.ndarray, first: np.ndarray, after: np.ndarray,
                 intervals: int) -> np.ndarray:
    """Whether the model has rows in nearly every interval as far before and after its silence as the silence is
    long (cut at the trace's ends, at least `AROUND`): a batch busy an hour a day has a day of few rows around
    its silence, a target down for 40 minutes 40 minutes of rows either side."""
    span = intervals + 1
    key = model * (3 * span)  # sorted, each model's block wide enough for windows past the ends
    key += slot
    key += span
    length = after - first
    base = model[last] * (3 * span) + span
    ok = np.ones(len(last), dtype=bool)
    for lo, hi in ((np.maximum(first - length, 0), first), (after, np.minimum(after + length, intervals))):
        count = np.searchsorted(key, base + hi) - np.searchsorted(key, base + lo)
        ok &= (hi - lo >= AROUND) & (count >= NEARLY * (hi - lo))
    return ok


def _warning(trace: Trace, models: np.ndarray, first: np.ndarray, after: np.ndarray, line_after: list[int]) -> str:
    """The one line for every silence named: the longest in full, the other models with one and the totals."""
    widest = int(np.argmax(after - first))
    name = repr(trace.models[int(models[widest])])
    before_s, after_s = (trace.start_s + float(s) * trace.interval_s for s in (first[widest] - 1, after[widest]))
    others = [repr(trace.models[int(m)]) for m in np.unique(models) if m != models[widest]]
    more = f" and {len(others) - NAMES_SHOWN:,} more" if len(others) > NAMES_SHOWN else ""
    also = f"; also model{'s' if len(others) > 1 else ''} {', '.join(others[:NAMES_SHOWN])}{more}" if others else ""
    many = (f"; {len(first):,} such stretches, {span_text(float((after - first).sum()) * trace.interval_s)} in "
            "all, this the longest") if len(first) > 1 else ""
    running = _reported(trace)
    unreported = int(after[widest] - first[widest]) - int(running[after[widest]] - running[first[widest]])
    # said, as the trace's own silence inside is named on its own: the two read as one stretch named twice
    inside = (f"; {span_text(unreported * trace.interval_s)} of them without any model's rows"
              if unreported else "")
    return (f"model {name} has no rows for {span_text(float(after[widest] - first[widest]) * trace.interval_s)} "
            f"between its rows at {moment_text(before_s)} and at {moment_text(after_s)} (line "
            f"{line_after[widest]}{inside}{also}{many}), while the trace's other models have rows through "
            f"{'the rest of ' if unreported else ''}it and {name} "
            f"had rows in nearly every interval for as long before and after, with at least {BUSY_REQUESTS:g} "
            f"requests each in the {AROUND} intervals either side: replayed as no requests for {name}, so a policy "
            "may scale down through it and meet its traffic after it with too few pods. If its data is missing "
            "there (its target down, its scrapes lost), fill those intervals (from another export, or with its "
            "rows around them) or cut the trace at them; if its traffic did stop there, ignore this")
