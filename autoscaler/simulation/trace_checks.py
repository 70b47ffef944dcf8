"""What a trace's rows as a whole are warned about or refused for, beyond any one field.

Warnings (`notes`: on stderr and in report.json's `warnings`) for what replays but may not be what the user
meant: a long stretch without rows, a stretch at a coarser step, requests that only rise (a counter's running
total). Refusals for what cannot replay into a figure: a stretch of nothing that is most of the trace (two time
origins pasted together), timestamps a scraper's jitter keeps off the grid, or any other timestamp off it, an
interval outside 1 s to 10 min, epoch milliseconds, a model listed twice in one interval.

A stretch at a coarser step is found, said and spread in coarse_steps.py; timestamps off the grid, and the
rounding that puts them on one, in off_grid.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final

import numpy as np

from autoscaler.simulation.local_time import skipped_hour_advice
from autoscaler.simulation.lost_cells import NO_CELLS, LostCells
from autoscaler.simulation.missing_intervals import silences_between_rows
from autoscaler.simulation.stated_step import export_step
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


COUNTER_ROWS: Final = 10
"""Rows a model needs before its requests are judged as a counter's running total or not."""


MODELMESH_COUNTER: Final = "modelmesh_invoke_model_milliseconds_count"
"""The counter docs/simulation.md exports: ModelMesh's requests, per pod, labelled `modelId`."""


def increase_query(step: str) -> str:
    """docs/simulation.md's query, its counter `COUNTER`: `sum by (model)` alone, on ModelMesh's counter (labelled
    `modelId`), summed every model into one series without a `model` label, and the guide's export that a user
    pasted it into failed (KeyError: 'model') with a trace of its header alone."""
    return (f'sum by (model) (label_replace(increase(COUNTER{{modelId!=""}}[{step}s]), "model", "$1", "modelId", '
            f'"(.+)"))')


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
            f"{increase_query(step)} at a query_range step of {step}s (the range the step: a longer one counts "
            f"each request more than once; COUNTER: ModelMesh's {MODELMESH_COUNTER}, whose modelId label_replace "
            f"copies into the trace's model column), each row then holding the interval ending at its "
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



def repeated_problem(t: np.ndarray, slot: np.ndarray, model: np.ndarray, models: tuple[str, ...],
                     spaced: Mapping[str, tuple[str, int]], line_of: Callable[[int], int],
                     requests: Callable[[], np.ndarray] | None = None) -> str | None:
    """The first row repeating a model and interval, how many do, and how to sum them, or None: a converted
    public trace (a function under two triggers, files of two regions pasted together) repeats many, and was told
    only of the first. `spaced`: names written with spaces around them (as written, and the first line).
    `requests`: the rows' counts, in the order of `t` (asked for only where rows repeat): where every repeat has
    the count of the row it repeats, in a few intervals, they are exports joined that overlap (`overlap_text`),
    not counts to sum."""
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
    where = f"line {line_of(dup)}: model {twice!r} at {moment_text(float(t[dup]))} is listed twice{more}"
    if requests is not None and _overlap(key, t, requests()):
        return f"{where}{OVERLAP}"
    return (f"{where} (one row per model and interval: sum them first: pandas df.groupby(['timestamp_s', 'model'], "
            "as_index=False).sum(); an export per pod: sum by (model) in PromQL)")


OVERLAP: Final = (
    ", each time with the count of the row it repeats: files joined whose ranges overlap (Prometheus's query_range "
    "includes its end, so a range that ends where the next one starts writes that step into both files); keep one "
    "row of each (pandas: df.drop_duplicates()), or export each range to end one step before the next one's start "
    "(END=2025-12-01T23:59:00Z at a 60 s step, then START=2025-12-02T00:00:00Z); summed, those intervals' requests "
    "would count twice")
"""What rows repeated exactly, in few intervals, are, and what to do: a reviewer joined two exports as the guide said,
and the refusal told them to sum the repeated minute, which doubled its requests."""


def _overlap(key: np.ndarray, t: np.ndarray, requests: np.ndarray) -> bool:
    """Whether every repeat of a model and interval has the count of the row it repeats, and the repeats lie in at
    most half of the trace's timestamps: the boundary of exports joined (one step each, or the stretch two ranges
    share). An export per pod whose pods' counts happen to agree repeats in nearly every interval, and is summed."""
    order = np.argsort(key, kind="stable")
    same = key[order][1:] == key[order][:-1]
    counts = requests[order]
    if not bool((counts[1:][same] == counts[:-1][same]).all()):
        return False
    return 2 * len(np.unique(t[order][1:][same])) <= len(np.unique(t))
