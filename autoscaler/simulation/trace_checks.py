"""What a trace's rows as a whole are warned about or refused for, beyond any one field.

Warnings (`notes`: on stderr and in report.json's `warnings`) for what replays but may not be what the user
meant: a long stretch without rows, a stretch at a coarser step, requests that only rise (a counter's running
total). Refusals for what cannot replay into a figure: a stretch of nothing that is most of the trace (two time
origins pasted together), timestamps a scraper's jitter keeps off the grid, or any other timestamp off it, an
interval outside 1 s to 10 min, epoch milliseconds, a model listed twice in one interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Final, NamedTuple

import numpy as np

from autoscaler.simulation.local_time import skipped_hour_advice
from autoscaler.simulation.lost_cells import NO_CELLS, LostCells
from autoscaler.simulation.missing_intervals import silences_between_rows
from autoscaler.simulation.scrape_times import rounds_down, rows_rounded, scatter_step
from autoscaler.simulation.stated_step import export_step, rounding_states, sane_at, whole_seconds_divisor
from autoscaler.simulation.timestamps import SECONDS_PER_YEAR, long_span_text, moment_text, seconds_text
from autoscaler.simulation.trace_file import MAX_INTERVAL_S, MIN_INTERVAL_S

if TYPE_CHECKING:
    from autoscaler.simulation.trace import Trace

QUIET_GAP_S: Final = 3600.0
"""A stretch this long without a row for any model is named: more often missing data than no traffic."""


def gap_notes(trace: Trace, lines: np.ndarray, lost: LostCells = NO_CELLS, *, zoneless: bool = False) -> list[str]:
    """The longest stretch without a row, if any is past QUIET_GAP_S: an absent row is replayed as no requests,
    which is right for a quiet model and wrong for data that is missing (a collector down, exports pasted
    together), and the report cannot tell the two apart. `lost`: rows written with requests empty, NaN or null,
    as `missing_notes` has them: a stretch is judged across them, and one that is nothing but them is named by
    their own warning alone (a 90-minute block of NaN rows was said twice, the second time as "cut the trace at
    the gap"). `zoneless`: the timestamps are date-times without a zone, whose missing hour is more likely the
    clocks going forward than data missing (`local_time`)."""
    has_rows = np.zeros(trace.intervals, dtype=bool)
    has_rows[trace.slot] = True
    first, after = silences_between_rows(has_rows, lost)
    gaps = (after - first + 1) * trace.interval_s  # row to row
    long = np.flatnonzero(gaps > QUIET_GAP_S)
    if not len(long):
        return []
    widest = int(long[np.argmax(gaps[long])])
    before, after_s = (trace.start_s + float(slot) * trace.interval_s for slot in (first[widest] - 1, after[widest]))
    line = int(lines[int(np.flatnonzero(trace.slot == after[widest])[0])])
    more = f" ({len(long)} such gaps, this the longest)" if len(long) > 1 else ""
    missing = after_s - before - trace.interval_s
    advice = (skipped_hour_advice(missing) if zoneless else None) or ("if data is missing there rather than traffic, "
                                                                     "cut the trace at the gap")
    return [f"no rows for {missing / 3600:.3g} h between the rows at {moment_text(before)} and at "
            f"{moment_text(after_s)} (line {line}){more}: replayed as no requests at all; {advice}"]


COARSE_RUN: Final = 20
"""Steps in a row, all the same multiple of the interval, that make a stretch of rows at a coarser step."""


class CoarseStretch(NamedTuple):
    """Rows of all models every `every` intervals from slot `first` to slot `last` (the last such row), in a trace
    whose interval is finer: an export whose step changed there."""

    first: int
    last: int
    every: int


def coarse_stretches(trace: Trace) -> list[CoarseStretch]:
    """The stretches whose rows, of all models, come every k intervals (k >= 2, at most 10 min) for COARSE_RUN
    steps in a row, where a model in them came an interval apart elsewhere (`_fine_elsewhere`) and the rate carries
    on across their ends (`_rate_carried_on`): the interval is the finest step of the file, so where an export's
    step changed (Prometheus answers 11,000 points a query, and a day is fetched in pieces) each coarse row holds
    k intervals' requests. The trace's last row ends a stretch that runs to it."""
    slots = np.unique(trace.slot)
    gaps = np.diff(slots)
    if len(gaps) < COARSE_RUN:
        return []
    change = np.flatnonzero(np.diff(gaps)) + 1  # runs of equal gaps: [starts[i], ends[i])
    starts, ends = np.append(0, change), np.append(change, len(gaps))
    coarse = (gaps[starts] >= 2) & (gaps[starts] * trace.interval_s <= MAX_INTERVAL_S)
    coarse &= ends - starts >= COARSE_RUN
    found = []
    for run in np.flatnonzero(coarse).tolist():
        every = int(gaps[starts[run]])
        first, last = int(slots[starts[run]]), int(slots[ends[run] - 1])
        if not _fine_elsewhere(trace, first, last) or not _rate_carried_on(trace, first, last, every):
            continue
        # The row after the run's last gap is the first of the next stretch, but for the trace's last row
        found.append(CoarseStretch(first, int(slots[-1]) if ends[run] == len(gaps) else last, every))
    return found


def step_notes(trace: Trace, lines: np.ndarray, stretches: Sequence[CoarseStretch]) -> list[str]:
    """The longest of `stretches` (`coarse_stretches`), named with its lines and how it is replayed: each row's
    requests over its own step (`spread_coarse_rows`). They were replayed within one fine interval, k times the
    rate, and none in the k - 1 after: a 15 s export with an hour at 60 s of even load delayed 3.3% of requests
    under mean-hpa and cost it 6.83 pod-hours, where the same load at one step delays none in 4.0."""
    if not stretches:
        return []
    widest = max(stretches, key=lambda stretch: (stretch.last - stretch.first, -stretch.first))
    first_line, last_line = (int(lines[np.searchsorted(trace.slot, slot)]) for slot in (widest.first, widest.last))
    step = widest.every * trace.interval_s
    more = f" ({len(stretches)} such stretches, this the longest)" if len(stretches) > 1 else ""
    return [f"rows come every {step:g} s from {moment_text(trace.start_s + widest.first * trace.interval_s)} to "
            f"{moment_text(trace.start_s + widest.last * trace.interval_s)} (lines {first_line} to "
            f"{last_line}){more} but every {trace.interval_s:g} s elsewhere, each carrying the "
            f"requests of its {step:g} s, as an export whose step changed writes them: each of those rows' requests "
            f"are replayed spread over its own {step:g} s ({widest.every} intervals of {trace.interval_s:g} s), not "
            f"within {trace.interval_s:g} s. If they did arrive within {trace.interval_s:g} s of their row's time, "
            "export the whole trace at one step"]


def spread_coarse_rows(trace: Trace, stretches: Sequence[CoarseStretch]) -> Trace:
    """`trace` with each row of `stretches` split into `every` rows of equal requests, one an interval, so that it
    is replayed at its own step: the replay spreads a row's requests over one interval (`trace_buckets.buckets`), the
    trace's finest. The total is kept; the trace's end moves to the end of a last coarse row."""
    if not stretches:
        return trace
    every = np.ones(len(trace.slot), dtype=np.int64)
    for stretch in stretches:
        inside = (trace.slot >= stretch.first) & (trace.slot <= stretch.last)
        every[inside] = stretch.every
    rows = np.repeat(np.arange(len(trace.slot)), every)
    offset = np.arange(len(rows)) - np.repeat(np.cumsum(every) - every, every)
    slot = trace.slot[rows] + offset
    order = np.lexsort((trace.model[rows], slot))
    return replace(trace, slot=slot[order], model=trace.model[rows][order],
                   requests=(trace.requests[rows] / every[rows])[order],
                   intervals=max(trace.intervals, int(slot.max()) + 1))


def _fine_elsewhere(trace: Trace, first: int, last: int) -> bool:
    """Whether a model with rows in the slots `first`..`last` has two rows one interval apart outside them: its
    series was exported at the fine step there, so a coarser one here is the export's. A model that never
    came an interval apart (a night's job every 5 minutes in a trace busy by day at 60 s) is traffic that
    sparse, on the trace's own grid, which the note called a changed step."""
    order = np.lexsort((trace.slot, trace.model))
    slot, model = trace.slot[order], trace.model[order]
    outside = (slot < first) | (slot > last)
    apart = (np.diff(slot) == 1) & (model[1:] == model[:-1]) & outside[1:] & outside[:-1]
    inside = np.unique(model[~outside])
    return bool(np.isin(model[1:][apart], inside).any())


def _rate_carried_on(trace: Trace, first: int, last: int, every: int) -> bool:
    """Whether the requests per second next to each end of the stretch (rows `every` intervals apart from slot
    `first` to `last`) are, within it, at least 1/sqrt(every) of those just outside it. An export at a coarser
    step writes the same traffic in fewer rows, each holding `every` intervals' requests, so the rate carries on
    across the change; a model that merely comes less often (a health check every 10 s at night in a request
    log's 1 s trace, a cron's few requests a minute in a 15 s export) has rows no heavier than those around
    them, and the rate falls `every` times or more: no export can be asked to change that."""
    span = COARSE_RUN * every  # as many slots as the fewest coarse rows a stretch is named for
    end = last + every  # the last coarse row holds `every` intervals
    slot = trace.slot
    inside = ((slot >= first) & (slot < first + span)) | ((slot >= end - span) & (slot < end))
    outside = ((slot >= first - span) & (slot < first)) | ((slot >= end) & (slot < end + span))
    outside_slots = min(span, first) + min(span, max(trace.intervals - end, 0))
    if not outside_slots:  # nothing on either side to compare with
        return True
    rate_inside = float(trace.requests[inside].sum()) / min(2 * span, end - first)
    rate_outside = float(trace.requests[outside].sum()) / outside_slots
    return rate_inside * math.sqrt(every) >= rate_outside


COUNTER_ROWS: Final = 10
"""Rows a model needs before its requests are judged as a counter's running total or not."""


def counter_notes(trace: Trace) -> list[str]:
    """A warning when the models' requests only rise from one row to the next, as a counter's running total
    does: a Prometheus counter (`..._count`, `..._total`) exported without `increase()` replays millions of
    requests an interval, and every figure of the report is then wrong with nothing to show it. Traffic rises
    and falls; a model whose count stays level is left out (an idle counter, or a flat test trace), and a
    fall in one step of twenty is allowed (a counter restarts with its pod)."""
    n = len(trace.models)
    order = np.lexsort((trace.slot, trace.model))
    model, requests = trace.model[order], trace.requests[order]
    del order  # no more full-size arrays at once than three: a big trace's peak while read was here
    change = np.diff(requests)
    del requests
    same = model[1:] == model[:-1]
    owner = model[1:]
    steps = np.bincount(owner[same], minlength=n)
    rises = np.bincount(owner[same & (change > 0)], minlength=n)
    falls = np.bincount(owner[same & (change < 0)], minlength=n)
    judged = (steps >= COUNTER_ROWS - 1) & (rises > 0)
    counting = judged & (falls <= 0.05 * steps) & (rises >= 0.5 * steps)
    if not judged.any() or counting.sum() < 0.9 * judged.sum():
        return []
    example = int(np.flatnonzero(counting)[np.argmax(steps[counting])])
    mine = trace.model == example
    first, last = int(trace.slot[mine].argmin()), int(trace.slot[mine].argmax())
    values = trace.requests[mine]
    step = f"{trace.interval_s:g}"
    return [f"the requests of {int(counting.sum())} of {int(judged.sum())} models only rise from one interval to "
            f"the next (model {trace.models[example]!r}: {values[first]:,.0f} to {values[last]:,.0f}), as a "
            "counter's running total does: if they are one, export the requests in each interval instead (PromQL: "
            f"sum by (model) (increase(COUNTER[{step}s])) at a query_range step of {step}s (the range the step: a "
            f"longer one counts each request more than once), each row then holding the interval ending at its "
            f"time: move every timestamp back {step} s, as a trace's row is the interval starting at its time); if "
            "the traffic does rise all along, ignore this"]


MOSTLY_GAP_S: Final = 30 * 86400.0
"""A stretch without rows longer than this and than the rest of the trace is refused, not replayed: a month of
nothing is no quiet weekend, and replaying it costs a minute a policy for no figure (shorter gaps are warned
about, QUIET_GAP_S: a log of a few requests two weeks apart still replays)."""
EPOCH_FROM_S: Final = 1e8
"""Timestamps from here (1973) on are taken as the epoch's; under it, as seconds from a trace's start."""
MILLIS_FROM_S: Final = EPOCH_FROM_S * 1000
"""Timestamps from here (the year 5138 as seconds; 1973 as milliseconds) on are taken as epoch milliseconds."""
MILLIS_HINT: Final = "these look like milliseconds since the epoch; divide timestamp_s by 1000"


def mostly_gap(distinct: np.ndarray, gaps: np.ndarray, interval: float, t: np.ndarray,
                line_of: Callable[[int], int]) -> str | None:
    """What to fix where one stretch without rows is over a month and most of the trace: rows with two time
    origins (a converted trace's seconds from its start pasted onto epoch seconds: 54 years between them) or
    captures far apart. Replayed, each empty interval is ticked through by every policy: a run of hours, then
    days, at 0% on its progress bar."""
    widest = int(np.argmax(gaps))
    gap = float(gaps[widest])
    if gap <= MOSTLY_GAP_S or 2 * gap <= float(distinct[-1] - distinct[0]):
        return None
    before, after = float(distinct[widest]), float(distinct[widest + 1])
    line_before, line_after = (line_of(int(np.argmax(t == moment))) for moment in (before, after))
    text = (f"line {line_after}: no rows for {long_span_text(gap - interval)} before {moment_text(after)}, after "
            f"{moment_text(before)} on line {line_before}: ")
    if before < EPOCH_FROM_S <= after:
        return text + ("the timestamps mix seconds from the trace's start with seconds since the epoch: write them "
                       "all one way")
    return text + (f"replayed, that is {long_span_text(gap)} of nothing to simulate: cut the trace at the gap, or "
                   "shift the rows after it to follow on")


def finer_grid(gaps: np.ndarray) -> float | None:
    """The step of a grid finer than the smallest gap that every gap is a whole number of (their greatest common
    divisor, in whole seconds from 1 s), or None. A trace at that step whose rows are never one step apart (rows
    only where a model has requests, every model quiet most minutes) reads at the smallest gap instead: said,
    not guessed, as integer gaps of a jittered export (59, 60, 61) have one too."""
    common = whole_seconds_divisor(gaps)
    if common is None:
        return None
    step = float(common)
    # A common step of a few seconds under gaps of a minute is more likely whole-second jitter than a grid.
    return step if 1.0 <= step < float(gaps.min()) and step * 10 >= float(gaps.min()) else None


STRAY_MAX: Final = 3
"""The most timestamps off a trace's step that `strays` names as strays (and at most 1% of them): more are
another step of the export, which `step_notes` speaks of."""


def strays(distinct: np.ndarray, gaps: np.ndarray, interval: float) -> tuple[float, np.ndarray] | None:
    """(the trace's step, the timestamps off it) where a few timestamps alone make the smallest gap: the step
    is the most common gap, and at most `STRAY_MAX` timestamps (1% of them) are off its grid (anchored where most
    are). Taken for the step, one row 10 s off the minute replayed a whole 60 s trace in 10 s intervals, six times
    the rate, with a warning that named the good rows; 13 s off, it was refused naming a good row."""
    if abs(float(gaps[0]) - interval) < 1e-6 and np.all(np.abs(np.mod(gaps / interval + 0.5, 1.0) - 0.5) < 1e-6):
        # The trace states its step, as a sparse trace is told to (a row of 0 one step after the first, then rows
        # only where requests came, every timestamp on that grid): 0, 60, 780, 1500 named 0 a stray of a 720 s step.
        return None
    values, counts = np.unique(np.round(gaps, 6), return_counts=True)
    step = float(values[np.argmax(counts)])
    if step <= interval + 1e-6:
        return None
    residue = np.round(np.mod(distinct - distinct[0], step), 6)
    residue[np.abs(residue - step) < 1e-6] = 0.0
    kinds, many = np.unique(residue, return_counts=True)
    off = np.abs(residue - kinds[np.argmax(many)]) > 1e-6
    if not off.any() or off.sum() > stray_allowance(len(distinct)):
        return None
    return step, distinct[off]


def stray_allowance(timestamps: int) -> int:
    """How many of a trace's distinct timestamps off its step are strays to name, not the export's own times."""
    return min(STRAY_MAX, max(1, timestamps // 100))


ROUND_WITHIN: Final = 0.3
"""How far into the step, as a share of it, times may gather and be told to round to it: with a tenth of a step
of jitter either side, rounding keeps them on one side of the half up to 0.4, flooring keeps them in one step
from 0.1; past 0.3, flooring is told, with the more room."""


def jitter(distinct: np.ndarray) -> tuple[float, float, float, bool] | None:
    """(step, largest distance from its grid, the timestamp that far off, whether to floor rather than round) when
    the distinct timestamps sit within a tenth of a whole-second step of one grid of that step (a scraper's times:
    15 s apart give or take milliseconds, at the target's own offset in the step: one target 17.4 s past each
    minute, ±1 ms, was told to round down to 59 s, measured against whole minutes) and, moved onto it, two are one
    step apart (`rounding_states`: three requests of a sparse log were told to round to 529 s, then refused as
    1058 s apart), else None. Rounding to the step moves times at an offset near half of it either way; those are
    floored (`ROUND_WITHIN`)."""
    if len(distinct) < 2:
        return None
    typical = float(np.median(np.diff(distinct)))
    if typical <= 0:
        return None
    # The whole-second step near the typical gap that keeps the times closest to one grid: one gap's jitter is the
    # step's error over one gap, and the span's over all of them (a 300 s step, ±15 s, read 299 s on the median
    # of 40 gaps and on their span, 301 s between the median's neighbours)
    reach = max(2.0, float(np.ceil(0.1 * typical)))  # the median of gaps ±10% of a step is off by up to that
    near = np.rint(typical) + np.arange(-reach, reach + 1.0)
    fits = [(float(_grid_offsets(distinct, float(step))[0].max()), float(step)) for step in near
            if MIN_INTERVAL_S <= step <= MAX_INTERVAL_S]
    if not fits:
        return None
    step = min(fits)[1]
    off, phase = _grid_offsets(distinct, step)
    whole = np.abs(distinct - np.rint(distinct / step) * step)  # from the step's own multiples, said so where
    if whole.max() <= 0.1 * step:  # all are near them
        off = whole
    worst = int(np.argmax(off))
    down = ROUND_WITHIN * step < phase < (1 - ROUND_WITHIN) * step
    if off[worst] > 0.1 * step or not rounding_states(distinct, step, down=down):
        return None
    return step, float(off[worst]), float(distinct[worst]), down


def _grid_offsets(distinct: np.ndarray, step: float) -> tuple[np.ndarray, float]:
    """How far each timestamp is from the grid of `step` where the times gather (their circular mean), and where
    in the step that is."""
    turn = np.exp(2j * np.pi * np.mod(distinct, step) / step)
    phase = float(np.mod(np.angle(turn.mean()) / (2 * np.pi) * step, step))
    off: np.ndarray = np.abs(np.mod(distinct - phase + step / 2, step) - step / 2)
    return off, phase


def interval_problem(distinct: np.ndarray, interval: float) -> str | None:
    """What to do where the timestamps are epoch milliseconds (Grafana's CSV export and many dashboards write
    them), or the smallest gap between them is no interval the simulator replays (1 s to 10 min). Milliseconds
    are named whatever their gaps: rows at each target's own offset in the step are a few hundred "seconds"
    apart, were told to state a 1 s step with a row of 0, and 4 h read as 166 days of 1 s intervals."""
    in_range = MIN_INTERVAL_S - 1e-9 <= interval <= MAX_INTERVAL_S + 1e-9
    start = float(distinct[0])
    if start >= MILLIS_FROM_S:
        if not in_range:
            return f"timestamps are {interval:g} s apart; intervals must be 1 s to 10 min: {MILLIS_HINT}"
        return (f"timestamp_s {seconds_text(start)} is the year {1970 + int(start / SECONDS_PER_YEAR):,} as "
                f"seconds since the epoch: {MILLIS_HINT}")
    if in_range:
        return None
    if interval > MAX_INTERVAL_S:
        coarser = ("export at a step of 10 min or less (an autoscaler acts within minutes, which coarser rows "
                   "cannot show)")
        # Rows only where requests came, from jobs every half hour, read 1800 s apart in a 60 s export; not past a
        # month of nothing, which is refused whatever the step (`mostly_gap`): two rows a month apart were told
        # the row of 0 for 60 s, then refused for the month.
        step = export_step(distinct) if float(np.diff(distinct).max()) <= MOSTLY_GAP_S else None
        hint = f": {coarser}" if step is None else (
            f": if the trace's step is {step:g} s, with rows only where requests came, add a row of 0 requests "
            f"at {moment_text(start + step)} (any model) to state it; if it is an export at {interval:g} s, "
            f"{coarser}")
    else:
        hint = (": sum the rows into 1 s intervals (pandas: .dt.floor('1s'), then sum by timestamp_s and model; "
                "a log of single requests: python -m autoscaler.simulation.request_log --interval 1)")
    return f"timestamps are {interval:g} s apart; intervals must be 1 s to 10 min{hint}"


def off_grid_problem(distinct: np.ndarray, gaps: np.ndarray, interval: float, t: np.ndarray, model: np.ndarray,
                     off: np.ndarray, line_of: Callable[[int], int]) -> str | None:
    """How to put the rows `off` the grid of the smallest gap onto one, or None where none is: the fix depends on
    why they are off (a scraper's jitter, a sparse trace that never states its step, whole seconds on no common
    step), and flooring every trace alike moved requests and changed the step."""
    if not off.any():
        return None
    bad = int(np.argmax(off))
    if (strayed := _jitter_advice(distinct, t, model, line_of)) is not None:
        return strayed
    start = float(distinct[0])
    where = (f"line {line_of(bad)}: timestamp {moment_text(float(t[bad]))} is not on the {interval:g} s grid "
             f"starting at {seconds_text(start)}")
    if (fine := finer_grid(gaps)) is not None and sane_at(distinct, fine):
        # A sparse trace (rows only where a model has requests) whose rows are never one step apart: flooring
        # to the smallest gap, as said before, moved its requests and changed its step.
        return (f"{where}; every timestamp is on a {fine:g} s grid, but no two rows are {fine:g} s apart, so the "
                f"step read is the smallest gap: where the trace's step is {fine:g} s (an interval without a row "
                f"has no requests), add a row of 0 requests at {seconds_text(start + fine)} (any model) to state it")
    # The grid named, in whole seconds: the median gap (a 60.5/89.5 s trace read "floor('75s')") put two of
    # the smallest gap's intervals into one, and named a step the line did not.
    step = max(MIN_INTERVAL_S, float(np.floor(interval)))
    if whole_seconds_divisor(gaps) is not None:
        # Whole seconds on no common step (batches every 60 s, give or take 3): the smallest gap (57 s) is no
        # step of the trace. The typical gap is, for an export whose times stray; 1 s is, for a sparse trace.
        return f"{where}: {_whole_seconds_advice(distinct, gaps, interval, t, model)}"
    # Offered where the rows so floored read, or rounded to the step each model's rows then come at: floored to
    # 36 s, models each every 180 s at its own 45 s slot, 4 s off, were refused as targets at their offsets
    rounding = _rounding_that_reads(distinct, t, model, step, True)
    if rounding is None:
        return (f"{where}, and rounded down to a {step:g} s step they would not read at it: export with "
                "query_range, whose steps are exact")
    to, down = rounding
    if to != step:
        return f"{where}{_own_slots(step, to)}: {_rounding_text(to, down)}"
    return (f"{where}: round every timestamp down to a {step:g} s step (pandas: .dt.floor('{step:g}s'), then sum by "
            "timestamp_s and model)")


def _jitter_advice(distinct: np.ndarray, t: np.ndarray, model: np.ndarray,
                   line_of: Callable[[int], int]) -> str | None:
    """How to round timestamps that stray around a step (`jitter`), or None where no rounding reads
    (`_rounding_that_reads`). Three models each every 180 s at its own 45 s slot of it (0, 45, 90 s), times up to
    4.2 s off, were told to round to 45 s, and so rounded, refused as targets at their own offsets in the 180 s
    step; they are told that step."""
    strayed = jitter(distinct)
    if strayed is None:
        return None
    step, worst, at, down = strayed
    rounding = _rounding_that_reads(distinct, t, model, step, down)
    if rounding is None:
        return None
    said = (f"timestamps are about {step:g} s apart but not exactly (up to {worst:.2g} s off, as scrape times are; "
            f"line {line_of(int(np.argmax(t == at)))}: {moment_text(at)})")
    exact = "or export with query_range, whose steps are exact"
    to, down = rounding
    if to == step:
        return f"{said}: {_rounding_text(step, down)}, {exact}"
    return f"{said}{_own_slots(step, to)}: {_rounding_text(to, down)}, {exact}"


def _rounding_that_reads(distinct: np.ndarray, t: np.ndarray, model: np.ndarray, step: float,
                         down: bool) -> tuple[float, bool] | None:
    """(step, whether to floor) of a rounding of the rows that, followed, reads: to `step` (floored, `down`)
    where the rows so rounded read (`_rounding_reads`); where they would be refused as each model at its own slot
    of a coarser step (`_refused_once_rounded`), to that step, rounded or floored as keeps more of each model's
    rows a step apart (`rounds_down`), where that reads; else None."""
    if not rounding_states(distinct, step, down=down):
        return None
    coarser = _refused_once_rounded(t, model, step, down)
    if coarser is None:
        return step, down
    down = rounds_down(t, model, coarser)
    return (coarser, down) if _rounding_reads(distinct, t, model, coarser, down=down) else None


def _own_slots(step: float, coarser: float) -> str:
    """Why the rounding named is to `coarser`, not `step`."""
    return (f", and each model's rows about {coarser:g} s apart, each at its own slot of it (rounded to {step:g} s, "
            f"they would read as targets at their own offsets in the {coarser:g} s step)")


def _rounding_text(step: float, down: bool) -> str:
    """The line that says to round (or floor, `down`) every timestamp to `step`, with pandas' call."""
    how = "round every timestamp down" if down else "round every timestamp"
    return (f"{how} to the {step:g} s step (pandas: .dt.{'floor' if down else 'round'}('{step:g}s'), then sum by "
            "timestamp_s and model)")


def _whole_seconds_advice(distinct: np.ndarray, gaps: np.ndarray, interval: float, t: np.ndarray,
                          model: np.ndarray) -> str:
    """The ways through for whole-second timestamps on no common step: the row of 0 for a 1 s step (rows only
    where requests came), rounding to the typical gap (an export whose times stray), each where it leads to a
    trace that reads (`sane_at`, `_rounding_reads`); where neither does (a handful of requests over months), the
    minute. A sparse log over 2 days was told only to round to its 2377 s typical gap, then refused for it."""
    start = float(distinct[0])
    typical = float(np.rint(np.median(gaps)))
    text = f"the rows are typically {typical:g} s apart ({interval:g} s at the least)"
    keep = (f"if the trace's step is 1 s (rows only where requests came), add a row of 0 requests at "
            f"{seconds_text(start + 1)} (any model) to state it") if sane_at(distinct, 1.0) else None
    reads = typical <= MAX_INTERVAL_S and _rounding_reads(distinct, t, model, typical)
    rounding = (f"round every timestamp to the {typical:g} s step (pandas: .dt.round('{typical:g}s'), then sum by "
                "timestamp_s and model)") if reads else None
    if keep and rounding:
        return f"{text}: {keep}; if it is an export at about {typical:g} s whose times stray, {rounding}"
    if keep or rounding:
        return f"{text}: {keep or rounding}"
    minute = 60.0
    floored = np.unique(np.floor(distinct / minute)) * minute
    pin = floored[0] + minute
    if not sane_at(np.union1d(floored, [pin]), minute):
        return f"{text}: too few for so long a trace at any step; cut it to the stretch to simulate"
    stated = "" if pin in floored else (f", then add a row of 0 requests at {seconds_text(float(pin))} (any "
                                        "model) to state the step")
    return (f"{text}, too far apart to read at 1 s or at the typical gap: round every timestamp down to the "
            f"{minute:g} s step (pandas: .dt.floor('{minute:g}s'), then sum by timestamp_s and model){stated}")


def _rounding_reads(distinct: np.ndarray, t: np.ndarray, model: np.ndarray, step: float, *,
                    down: bool = False) -> bool:
    """Whether the rows, rounded (or floored, `down`) to `step` and summed, read: their first two timestamps one
    step apart (`rounding_states`), and the models' rows not then each at its own slot of a coarser step
    (`_refused_once_rounded`). Four rows of a sparse 1 s trace, typically 71 s apart, were told to round to 71 s;
    so rounded they sat on one 71 s grid, each model every third step at its own slot, and were refused as targets
    at their own offsets in a 213 s step."""
    return rounding_states(distinct, step, down=down) and _refused_once_rounded(t, model, step, down) is None


def _refused_once_rounded(t: np.ndarray, model: np.ndarray, step: float, down: bool) -> float | None:
    """The coarser step at which the rows, rounded (or floored, `down`) to `step` and summed, are refused as each
    model at its own slot of it (`scatter_step`), or None where they are not."""
    at, of = rows_rounded(t, model, step, down=down)
    moved = np.unique(at)
    return scatter_step(at, of, moved, step, stray_allowance(len(moved)))


def repeated_problem(t: np.ndarray, slot: np.ndarray, model: np.ndarray, models: tuple[str, ...],
                     spaced: Mapping[str, tuple[str, int]], line_of: Callable[[int], int]) -> str | None:
    """The first row repeating a model and interval, how many do, and how to sum them, or None: a converted
    public trace (a function under two triggers, files of two regions pasted together) repeats many, and was told
    only of the first. `spaced`: names written with spaces around them (as written, and the first line)."""
    key = slot * len(models)
    key += model
    if len(key) < 2 or bool((key[1:] > key[:-1]).all()):  # rows in order, none repeated: no sorted copy to count
        return None
    uniq, repeats = np.unique(key, return_counts=True)
    if not (repeats > 1).any():
        return None
    dup = int(np.flatnonzero(key == uniq[int(np.argmax(repeats > 1))])[1])
    extra = len(key) - len(uniq)
    more = f"; {extra:,} rows in all repeat a model and interval" if extra > 1 else ""
    twice = models[int(model[dup])]
    if twice in spaced:  # " m0" beside "m0": the line shown reads " m0", the error 'm0'
        written, at = spaced[twice]
        more += f"; model names are read without the spaces around them: {written!r} on line {at} is {twice!r}"
    return (f"line {line_of(dup)}: model {twice!r} at {moment_text(float(t[dup]))} is listed twice{more} (one row "
            "per model and interval: sum them first: pandas df.groupby(['timestamp_s', 'model'], as_index=False)"
            ".sum(); an export per pod: sum by (model) in PromQL)")
