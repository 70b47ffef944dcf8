"""Timestamps off the grid of a trace's smallest gap, and how to put them on one: a scraper's jitter around its
step, a sparse trace that never states its step, or whole seconds on no common step, each told the rounding (or
the row of 0) that leads to a trace that reads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import numpy as np

from autoscaler.simulation.scrape_times import rounds_down, rows_rounded, scatter_step
from autoscaler.simulation.stated_step import rounding_states, sane_at, whole_seconds_divisor
from autoscaler.simulation.timestamps import moment_text, seconds_text
from autoscaler.simulation.trace_checks import stray_allowance
from autoscaler.simulation.trace_file import MAX_INTERVAL_S, MIN_INTERVAL_S


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
