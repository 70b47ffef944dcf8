"""Where a trace's lost scrapes state a finer step than its rows with requests: an export with scrapes lost in a
pattern.

The rows with requests decide a trace's step; the rows without a value (`LostScrapes`) state one only where those
state none (lost_readings.py). A 60 s export with every other scrape lost has its values 120 s apart and NaN rows on the
minutes between: read at 120 s, each row's minute of requests was spread over two, half the load in the minute it
came (a replay then under-provisions). Letting every lost row state the step read a 15 s trace at 7.5 s where one
lost row fell between two values: a lone row off the values' grid is as likely a series at its own offset or a
stray as a scrape of a finer export. So the lost rows refine the step only where they *fill* a finer grid: the
values and the lost rows lie on one regular grid whose step divides the values' own, and the lost rows hold at
least `FILL_SHARE` of that grid's times that no value holds within the values' span, and at least `MIN_FILLED` of
them. Only the lost rows of models with a value count: a series never scraped says nothing of the others' step.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from typing import Final

import numpy as np

from autoscaler.simulation.lost_scrapes import LostScrapes
from autoscaler.simulation.trace_file import MIN_INTERVAL_S

FILL_SHARE: Final = 0.5
"""The share of the finer grid's empty times (in the values' span, no value there) the lost rows must hold. An
export with every other (or three in four) scrape lost holds them all; half leaves room for stretches an export
dropped outright, and no stray row or two fills half of a grid across a trace."""
MIN_FILLED: Final = 3
"""The fewest lost rows' times that fill a finer grid: one or two beside the values state no regular grid (the 15 s
trace read at 7.5 s had one), three one finer step apart do state one, from their own gaps."""
TOLERANCE: Final = 1e-6
"""How far from a grid time, in steps of the grid, a row still sits on it (as trace_grid.py's `_checked` reads a
trace's rows)."""


@dataclass(frozen=True, slots=True)
class FinerGrid:
    """The step the lost rows fill, and those of them on it within the values' span (read with the values)."""

    step_s: float
    rows: LostScrapes


def finer_grid(lost: LostScrapes, value_times: np.ndarray, valued: Container[str]) -> FinerGrid | None:
    """The finer grid the lost rows fill (module docstring) in a trace whose rows with requests, of the models
    `valued`, are at `value_times`, their step the smallest gap between them; None where they fill none."""
    if not lost.lines:
        return None
    distinct = np.unique(value_times)
    if len(distinct) < 2:
        return None
    step_s = float(np.diff(distinct).min())
    start, end = float(distinct[0]), float(distinct[-1])
    times = np.asarray(lost.times, dtype=np.float64)
    counted = np.fromiter((model in valued for model in lost.models), dtype=bool, count=len(lost.models))
    counted &= (times > start) & (times < end) & ~np.isin(times, distinct)
    inner = np.unique(times[counted])
    if len(inner) < MIN_FILLED:
        return None
    finer = _common_gap(np.union1d(distinct, inner))
    ratio = step_s / finer
    if finer < MIN_INTERVAL_S or round(ratio) < 2 or abs(ratio - round(ratio)) > TOLERANCE * ratio:
        return None
    empty = round((end - start) / finer) + 1 - len(distinct)
    if np.count_nonzero(_on_grid(inner, start, finer)) < max(MIN_FILLED, FILL_SHARE * empty):
        return None
    taken = LostScrapes()
    for at in np.flatnonzero((times >= start) & (times <= end) & _on_grid(times, start, finer)).tolist():
        taken.add(lost.lines[at], lost.times[at], lost.models[at])
    return FinerGrid(finer, taken)


def _common_gap(times: np.ndarray) -> float:
    """The gap that comes most often between consecutive `times` (the smaller on a tie): a grid's step, where the
    smallest gap would be a stray row's."""
    gaps, counts = np.unique(np.round(np.diff(times), 6), return_counts=True)
    return float(gaps[int(np.argmax(counts))])


def _on_grid(times: np.ndarray, start: float, step_s: float) -> np.ndarray:
    """Which of `times` sit on the grid of `step_s` from `start`."""
    position = (times - start) / step_s
    return np.asarray(np.abs(position - np.rint(position)) <= TOLERANCE)
