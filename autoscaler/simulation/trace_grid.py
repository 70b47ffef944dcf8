"""Rows put on a trace's grid (`in_order`): in one order whatever the file's (models by name, rows by time then
model), the interval inferred as the smallest gap between distinct timestamps, each row's interval found, and the
rows refused where they do not sit on that grid (scattered, off it, strays, mostly gaps, a model repeated in an
interval), with times that carry a float's noise read rounded to the millisecond. What makes a `Trace` of rows,
whether read from a file (`trace.read_csv`, `lost_readings`) or given as lists (`from_rows`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from autoscaler.simulation.off_grid import off_grid_problem
from autoscaler.simulation.scrape_times import scatter_problem
from autoscaler.simulation.timestamps import moment_text
from autoscaler.simulation.trace_arrays import Trace
from autoscaler.simulation.trace_checks import interval_problem, mostly_gap, repeated_problem, stray_allowance, strays
from autoscaler.simulation.trace_file import TraceError, by_name


def from_rows(times: list[float], names: list[str], counts: list[float], name: str = "trace",
              lines: list[int] | None = None) -> Trace:
    """A Trace from parallel lists; infers and checks the interval. `lines`: the file line of each row, for
    errors (default: row i on line i + 2, under a header)."""
    index: dict[str, int] = {}
    model = np.fromiter((index.setdefault(n, len(index)) for n in names), dtype=np.int64, count=len(names))
    numbered = np.asarray(lines if lines is not None else range(2, len(names) + 2), dtype=np.int64)
    return in_order(np.asarray(times, dtype=np.float64), model, tuple(index), np.asarray(counts, dtype=np.float64),
                    name, numbered)[0]


def in_order(t: np.ndarray, model: np.ndarray, models: tuple[str, ...], counts: np.ndarray, name: str,
             lines: np.ndarray, spaced: Mapping[str, tuple[str, int]] | None = None,
             lost_rows: np.ndarray | None = None) -> tuple[Trace, np.ndarray]:
    """`_checked` on the rows in one order whatever the file's: models numbered by name (`by_name`), rows by time,
    then model (sums then come in one order too), and the file lines of the rows so ordered (int64), for the notes.
    `spaced`: names written with spaces around them (as written, and the first line), for the error they cause.
    `lost_rows`: which rows are without a value (read for their timestamps alone): no repeat of a row beside them.
    Times with a float's noise in their last digits are read rounded to the millisecond (`_snapped`). Rows already
    in that order (a file written by time, its models by name, as `write_csv` writes one) are not copied: the
    copies and a list of the lines as Python ints were 170 bytes a row at the peak of a big trace's reading."""
    models, model = by_name(models, model)
    snapped = _snapped(t)
    tries: list[tuple[np.ndarray, float | None]] = [(t, None)]
    if snapped is not None:  # rounded first: as written, a float's noise read as a step of 59.999999 s
        moved = float(np.abs(snapped - t).max())
        # said only past a float's own error of the times (2.4e-7 s at the epoch's): no noise of the export's
        tries.insert(0, (snapped, moved if moved > 2 * float(np.spacing(np.abs(t).max())) else None))
    as_written: TraceError | None = None
    for times, noise in tries:
        rows = None if _ordered(times, model) else np.lexsort((model, times))  # stable: repeats keep file order
        ordered = lines if rows is None else lines[rows]
        try:
            return _checked(_take(times, rows), _take(model, rows), models, counts, name, ordered, spaced or {},
                            None if lost_rows is None else _take(lost_rows, rows), noise, rows), ordered
        except TraceError as error:
            as_written = error  # the last tried: the times as written
    assert as_written is not None
    raise as_written


def _ordered(t: np.ndarray, model: np.ndarray) -> bool:
    """Whether the rows are in time, then model order already (repeats of a model and time side by side)."""
    if len(t) < 2:
        return True
    later = t[1:] > t[:-1]
    if later.all():
        return True
    return bool((later | ((t[1:] == t[:-1]) & (model[1:] >= model[:-1]))).all())


def _take(values: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    """`values` in the order of `rows` (None: as they are, not copied)."""
    return values if rows is None else values[rows]


def _checked(t: np.ndarray, model: np.ndarray, models: tuple[str, ...], counts: np.ndarray, name: str,
             lines: np.ndarray, spaced: Mapping[str, tuple[str, int]],
             lost_rows: np.ndarray | None = None, noise: float | None = None,
             rows: np.ndarray | None = None) -> Trace:
    """The Trace of rows as arrays (time, model index into `models`, requests); infers and checks the interval.
    `counts`: in the order of `rows` (None: of `t`), taken so once the checks' own arrays are gone. `lost_rows`: the
    rows without a value, left out of the check for a model repeated in an interval. `noise`: how far the times
    were moved rounding them to the millisecond (`_snapped`), said in a note."""

    def line_of(row: int) -> int:
        return int(lines[row])

    distinct = np.unique(t)
    gaps = np.diff(distinct)
    interval = float(gaps.min()) if len(gaps) else 60.0
    if len(gaps) and (scatter := scatter_problem(t, model, models, distinct, interval,
                                                 stray_allowance(len(distinct)), line_of)):
        raise TraceError(f"{name}: {scatter}")
    if (problem := interval_problem(distinct, interval)) is not None:
        raise TraceError(f"{name}: {problem}")
    if len(gaps) and (problem := mostly_gap(distinct, gaps, interval, t, line_of)):
        raise TraceError(f"{name}: {problem}")
    if len(gaps) and (stray := strays(distinct, gaps, interval)) is not None:
        step, off = stray
        named = ", ".join(f"line {line_of(int(np.argmax(t == at)))}: timestamp {moment_text(float(at))}" for at in off)
        raise TraceError(f"{name}: {named} {'is' if len(off) == 1 else 'are'} off the {step:g} s step of the "
                         f"trace's other {len(distinct) - len(off):,} timestamps; taken for the step, the smallest "
                         f"gap ({interval:g} s) would replay every row's requests within {interval:g} s: move "
                         f"{'it' if len(off) == 1 else 'them'} onto the {step:g} s step, or remove "
                         f"{'it' if len(off) == 1 else 'them'}")
    start = float(distinct[0])
    position = t - start  # in place from here: a big trace's arrays are 8 bytes a row each
    position /= interval
    slot = np.rint(position).astype(np.int64)
    position -= slot
    off = np.abs(position, out=position) > 1e-6
    del position
    if (problem := off_grid_problem(distinct, gaps, interval, t, model, off, line_of)) is not None:
        raise TraceError(f"{name}: {problem}")
    del off
    if lost_rows is None:
        problem = repeated_problem(t, slot, model, models, spaced, line_of, lambda: _take(counts, rows))
    else:
        kept = np.flatnonzero(~lost_rows)
        problem = repeated_problem(t[kept], slot[kept], model[kept], models, spaced,
                                   lambda row: line_of(int(kept[row])), lambda: _take(counts, rows)[kept])
    if problem is not None:
        raise TraceError(f"{name}: {problem}")
    notes: tuple[str, ...] = () if len(gaps) else (
        f"the trace has one timestamp, so no step to infer its interval from: taken as {interval:g} s (the requests "
        f"of each row arrive over {interval:g} s)",)
    if noise is not None:
        notes += (f"timestamps up to {noise:.2g} s off the step (the noise of a float's last digits) were read "
                  "rounded to the millisecond",)
    return Trace(models, start, interval, int(slot.max()) + 1, slot, model, _take(counts, rows), notes)


def _snapped(t: np.ndarray) -> np.ndarray | None:
    """`t` rounded to the millisecond, for a trace refused as it is: an export through floats writes 60 s rows with
    a float's noise in their last digits (1764547200.1229990 beside .1230006, refused as "2.38419e-07 s apart ...
    sum into 1 s intervals"; a lone model's ±1 µs as off the grid, or a stray), and Prometheus times are
    milliseconds. Read so only where it then reads (`in_order`): a request log's sub-second times are still told
    to sum into 1 s, a scraper's jitter of milliseconds to round to its step. None where rounding moves nothing."""
    snapped: np.ndarray = t * 1000.0
    np.rint(snapped, out=snapped)
    snapped /= 1000.0
    return None if np.array_equal(snapped, t) else snapped
