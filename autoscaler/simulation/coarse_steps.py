"""Stretches of a trace at a coarser step than its interval (an export whose step changed partway): found, warned
about, and their rows spread over the interval, so that each is replayed over its own step, not crowded into the
first interval of it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Final, NamedTuple

import numpy as np

from autoscaler.simulation.timestamps import moment_text
from autoscaler.simulation.trace_file import MAX_INTERVAL_S

if TYPE_CHECKING:
    from autoscaler.simulation.trace import Trace


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
