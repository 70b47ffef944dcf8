"""Request traces: the CSV users bring (`timestamp_s,model,requests`), read and checked.

A trace row says how many requests arrived for one model in the interval starting at `timestamp_s`. The
three columns are found by name, in any order (converters write their own), others left out (pandas writes
its index, exports keep what a trace does not need; `notes` says which), a byte-order mark (Excel's
"CSV UTF-8") is skipped, and `FILE.csv.gz` is read without unpacking (fleet traces are kept compressed). The
interval (1 s to 10 min) is inferred as the smallest gap between distinct timestamps, and every timestamp
must sit on that grid (lost scrapes, rows without a value, refine it only where they fill a finer grid:
lost_grid.py); rows of a stretch at a coarser step (an export whose step changed partway) are split into rows of
the interval, so that each is replayed over its own step (coarse_steps.py's `spread_coarse_rows`), and times
with a float's noise in their last digits are read rounded to the millisecond.

Opening the file and what one field may hold: trace_file.py; what the rows as a whole are warned about or
refused for (gaps, a changed step, a counter's running total, two time origins): trace_checks.py; a table of
a row per model and a column per minute (Azure Functions' trace as it comes): trace_minutes.py. The replay's
buckets: trace_buckets.py; a trace written back: trace_write.py; the synthetic generator: synthetic_trace.py.
"""

from __future__ import annotations

import contextlib
import csv
import io
import itertools
import math
import os
import sys
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from autoscaler.simulation.coarse_steps import coarse_stretches, spread_coarse_rows, step_notes
from autoscaler.simulation.local_time import repeated_hour_problem
from autoscaler.simulation.lost_grid import finer_grid
from autoscaler.simulation.lost_scrapes import LostScrapes
from autoscaler.simulation.memory_room import MemoryWatch
from autoscaler.simulation.missing_intervals import missing_notes
from autoscaler.simulation.off_grid import off_grid_problem
from autoscaler.simulation.scrape_times import scatter_problem
from autoscaler.simulation.silent_models import silent_model_notes
from autoscaler.simulation.standard_input import STDIN as STDIN  # its importers keep their import
from autoscaler.simulation.standard_input import STDIN_NAME as STDIN_NAME
from autoscaler.simulation.standard_input import input_name, opened
from autoscaler.simulation.timestamps import moment_text, zoneless
from autoscaler.simulation.trace_checks import (
    QUIET_GAP_S,
    counter_notes,
    gap_notes,
    interval_problem,
    mostly_gap,
    repeated_problem,
    stray_allowance,
    strays,
)
from autoscaler.simulation.trace_file import (
    HEADER,
    LATEST_S,
    MAX_INTERVAL_S,
    MIN_INTERVAL_S,
    PROGRESS_ROWS,
    TraceError,
    by_name,
    columns,
    minute_columns,
    number_field,
    numbered_rows,
    timestamp_field,
)
from autoscaler.simulation.trace_head import sampled
from autoscaler.simulation.trace_minutes import MINUTE_S, read_minutes
from autoscaler.simulation.trace_opening import gzipped, known_size, not_utf8, text_of, unpacking, with_head

__all__ = ["HEADER", "MAX_INTERVAL_S", "MIN_INTERVAL_S", "Trace", "TraceError", "from_rows", "read_csv"]


@dataclass(frozen=True, slots=True)
class Trace:
    """Rows as arrays: interval index from `start_s`, model index into `models`, and requests."""

    models: tuple[str, ...]
    start_s: float
    interval_s: float
    intervals: int
    slot: np.ndarray  # int64 interval index of each row
    model: np.ndarray  # int64 model index of each row
    requests: np.ndarray  # float64 requests of each row
    notes: tuple[str, ...] = ()  # what a user should know of how the file was read (columns left out)

    @property
    def duration_s(self) -> float:
        return self.intervals * self.interval_s

    @property
    def total_requests(self) -> float:
        return float(self.requests.sum())

    def rate_per_interval(self) -> np.ndarray:
        """Total requests per second in each interval."""
        return np.bincount(self.slot, weights=self.requests, minlength=self.intervals) / self.interval_s




def read_csv(path: str | os.PathLike[str], progress: Callable[[int, int], None] | None = None, *,
             all_zero_ok: bool = False, warn: Callable[[str], None] | None = None) -> Trace:
    """Read and check a trace file (`STDIN`: standard input); TraceError names the first problem.
    `progress(done, total)`: bytes of the file read so far (compressed ones for `.gz`), every `PROGRESS_ROWS`
    rows and once at the end: a 2 GB export takes minutes to read, which without it looked like a hang.
    `all_zero_ok`: a per-minute table of nothing but 0 is read (a quiet day among others), not refused.
    `warn(message)`: said as soon as the file's first rows show it too big for the memory left (`MemoryWatch`),
    rather than after minutes of reading, by the run being killed."""
    name = os.fspath(path)
    piped = name == STDIN
    shown = input_name(name)
    try:
        with unpacking(shown), (_standard_input() if piped else opened(name)) as raw:
            if not piped and os.isatty(raw.fileno()):  # `--trace /dev/stdin` typed with nothing piped in
                raise TraceError(f"--trace {name}: a terminal: pipe a trace into it (zcat day.csv.gz | "
                                 f"modelmesh-autoscaler simulate --trace {name} ...), or give the file's name")
            size = known_size(raw)
            watch = None if warn is None or size is None else MemoryWatch(shown, warn)

            def report(rows: int) -> None:
                assert size is not None
                done = min(raw.tell(), size - 1)  # short of the end until read: the text is read ahead of the rows
                if watch is not None:  # first, so that a bar drawn after it starts its own line again
                    watch(rows, done, size)
                if progress is not None:
                    progress(done, size)

            head, raw = with_head(raw)  # a file's is the same object: `report` asks it where it is
            with text_of(raw, gzipped=gzipped(shown, head)) as fh:
                trace = _parse(csv.reader(fh), shown, None if size is None or (progress, watch) == (None, None)
                               else report, all_zero_ok)
        if progress is not None and size is not None:
            progress(size, size)
        return trace
    except OSError as exc:
        raise TraceError(f"{shown}: cannot read trace: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise TraceError(not_utf8(shown)) from exc


def _standard_input() -> contextlib.AbstractContextManager[io.BufferedReader]:
    """A trace piped in (`zcat day.csv.gz | ... --trace -`, an export query's output), read as a file is. A
    terminal is refused: `--trace -` with nothing piped in waited, silent, for a CSV to be typed."""
    if sys.stdin.isatty():
        raise TraceError(f"--trace {STDIN}: {STDIN_NAME} is a terminal: pipe a trace into it (zcat day.csv.gz | "
                         f"modelmesh-autoscaler simulate --trace {STDIN} ...), or give the file's name")
    return opened(STDIN)


def _parse(rows: Iterator[list[str]], name: str, report: Callable[[int], None] | None = None,
           all_zero_ok: bool = False) -> Trace:
    numbered = numbered_rows(rows)
    header = next(numbered, None)
    if header is not None and (span := minute_columns(header[1])) is not None:  # Azure Functions' layout
        table = read_minutes(numbered, header[1], span, name, report, all_zero_ok=all_zero_ok)
        return Trace(table.models, 0.0, MINUTE_S, table.minutes, table.slot, table.model, table.requests,
                     table.notes)
    first = next(numbered, None)
    at_time, at_model, at_requests, others = columns(header[1] if header else None, name,
                                                     sampled(first, numbered))
    if first is not None:
        numbered = itertools.chain((first,), numbered)
    width = len(header[1]) if header else 0
    # Packed arrays, not lists of Python objects: 32 bytes a row rather than 250 (a 2 GB export fits in memory)
    times, counts, models, lines = array("d"), array("d"), array("q"), array("q")
    index: dict[str, int] = {}
    spaced: dict[str, tuple[str, int]] = {}  # a name written with spaces around it: as written, and its line
    lost = LostScrapes()
    naive: bool | None = None  # whether the date-times have no zone, judged by the first (seconds: None)
    for line, row in numbered:
        if len(row) != width:
            if _blank(row):
                continue
            raise TraceError(f"{name}: line {line}: expected {width} fields, as in the header, got {len(row)}")
        try:  # the usual row without a call per field (a third of the reading time); others go the long way
            t, r = float(row[at_time]), float(row[at_requests])
            if not (abs(t) < LATEST_S and 0.0 <= r < math.inf):
                raise ValueError
        except ValueError:
            if _blank(row):  # of the header's width: a spreadsheet's ",,"
                continue
            where = f"{name}: line {line}"
            t = timestamp_field(row[at_time], where)
            if naive is None:
                naive = zoneless(row[at_time])
            if lost.holds(row[at_requests]):
                lost.add(line, t, row[at_model])
                continue
            r = number_field(row[at_requests], "requests", where)
            if r < 0:
                raise TraceError(f"{where}: requests must be >= 0, got {row[at_requests]!r}") from None
        model = row[at_model].strip()
        if not model:
            raise TraceError(f"{name}: line {line}: model is empty")
        if len(model) != len(row[at_model]) and model not in spaced:
            spaced[model] = (row[at_model], line)
        times.append(t)
        models.append(index.setdefault(model, len(index)))
        counts.append(r)
        lines.append(line)
        if report is not None and not len(times) % PROGRESS_ROWS:
            report(len(times))
    if not times:
        raise TraceError(lost.refusal(name) or f"{name}: no rows after the header")
    if not np.frombuffer(counts).any():  # a report of nothing read as a result: 0 pod-hours, "0.00 x oracle"
        raise TraceError(f"{name}: every row's requests is 0 ({len(counts):,} row{'s' if len(counts) > 1 else ''}): "
                         "nothing to replay; requests is the count of requests in each interval")
    read = len(times)
    valued = (np.frombuffer(times), np.frombuffer(models, dtype=np.int64), np.frombuffer(counts),
              np.frombuffer(lines, dtype=np.int64))
    # The rows with requests decide the step (a row without a value off it was refused for its time), where their
    # timestamps are more than one; the lost rows refine it where they fill a finer grid (lost_grid.py)
    one_time = bool((valued[0] == valued[0][0]).all())
    if naive and (problem := repeated_hour_problem(valued[0], valued[1], valued[3].item)):
        raise TraceError(f"{name}: {problem}")
    stated = _stated_by_lost(valued, index, lost, name, spaced) if one_time else None
    try:
        trace, ordered_lines = stated or _in_order(valued[0], valued[1], tuple(index), valued[2], name, valued[3],
                                                   spaced)
    except TraceError:  # (with one timestamp, the lost rows' reading was tried above: None)
        stated = ((None if one_time else _stated_by_lost(valued, index, lost, name, spaced))
                  or _refined_by_lost(valued, index, lost, name, spaced))
        if stated is None:
            raise
        trace, ordered_lines = stated
    if stated is None and (refined := _refined_by_lost(valued, index, lost, name, spaced)):
        trace, ordered_lines = refined
    # Read: the file's arrays go (16 bytes a row, 32 where the rows were put in order), for the notes' own
    del valued, times, models, counts, lines
    notes = [f"ignoring {len(others)} column{'s' if len(others) > 1 else ''} of the trace not used: "
             f"{', '.join(others)}"] if others else []
    notes += lost.notes(read, trace)
    cells = lost.cells(trace)
    notes += gap_notes(trace, ordered_lines, cells, zoneless=bool(naive))
    notes += missing_notes(trace, ordered_lines, QUIET_GAP_S, cells)
    notes += silent_model_notes(trace, ordered_lines, cells)
    stretches = coarse_stretches(trace)
    notes += step_notes(trace, ordered_lines, stretches)
    notes += counter_notes(trace)
    trace = spread_coarse_rows(trace, stretches)
    return replace(trace, notes=trace.notes + tuple(notes)) if notes else trace


def _blank(row: list[str]) -> bool:
    """A row of nothing: a blank line, or a spreadsheet's ",," under the trace; skipped as no row. Asked only of a
    row that does not read (the usual row makes no call per field)."""
    return not any(field.strip() for field in row)


def _stated_by_lost(valued: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], index: dict[str, int],
                    lost: LostScrapes, name: str,
                    spaced: Mapping[str, tuple[str, int]]) -> tuple[Trace, np.ndarray] | None:
    """The trace where the timestamps of the rows without a value state the step that those with requests alone
    do not (a sparse export whose one row a step after the first was a lost scrape was refused as off a 7-minute
    step), read with them as rows of 0 then without them; None where it does not read that way either. A row
    without a value beside a value of its model and time is no repeat (`_in_order`'s `lost_rows`)."""
    if not lost.lines:
        return None
    times, models, counts, lines = valued
    index = dict(index)  # the lost rows' models join only a reading that takes them
    extra = np.fromiter((index.setdefault(model, len(index)) for model in lost.models), dtype=np.int64,
                        count=len(lost.models))
    lost_rows = np.concatenate([np.zeros(len(times), dtype=bool), np.ones(len(extra), dtype=bool)])
    try:
        trace, ordered_lines = _in_order(np.concatenate([times, np.asarray(lost.times)]),
                                         np.concatenate([models, extra]), tuple(index),
                                         np.concatenate([counts, np.zeros(len(extra))]), name,
                                         np.concatenate([lines, np.asarray(lost.lines, dtype=np.int64)]), spaced,
                                         lost_rows)
    except TraceError:
        return None
    return _without_lines(trace, ordered_lines, lost.lines)


def _refined_by_lost(valued: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], index: dict[str, int],
                     lost: LostScrapes, name: str,
                     spaced: Mapping[str, tuple[str, int]]) -> tuple[Trace, np.ndarray] | None:
    """The trace read on the finer grid the lost rows fill (`finer_grid`: a 60 s export with every other scrape
    lost, its values 120 s apart, read at 120 s spread each minute's requests over two; a 300 s export with two
    scrapes in three lost and one more lost row off its step, its values 900 s apart, was refused), with the lost
    rows on it; None where they fill none, or the trace does not read at that step with them."""
    grid = finer_grid(lost, valued[0], index)
    if grid is None:
        return None
    refined = _stated_by_lost(valued, index, grid.rows, name, spaced)
    if refined is None or abs(refined[0].interval_s - grid.step_s) > 1e-6 * grid.step_s:
        return None
    return refined


def _without_lines(trace: Trace, ordered_lines: np.ndarray, dropped: Sequence[int]) -> tuple[Trace, np.ndarray]:
    """The trace without the rows of these file lines (lost scrapes: read with the others for the step, replayed
    as no row), and the lines of the rows left. Models left without a row are dropped, and the trace runs from
    its first row left to its last, as every trace does."""
    if not dropped:
        return trace, ordered_lines
    keep = ~np.isin(ordered_lines, np.asarray(dropped, dtype=np.int64))
    model, slot = trace.model[keep], trace.slot[keep]
    present = np.unique(model)
    renumbered = np.full(len(trace.models), -1, dtype=np.int64)
    renumbered[present] = np.arange(len(present), dtype=np.int64)
    before = int(slot.min())
    return (replace(trace, models=tuple(trace.models[i] for i in present.tolist()),
                    start_s=trace.start_s + before * trace.interval_s, intervals=int(slot.max()) - before + 1,
                    slot=slot - before, model=renumbered[model], requests=trace.requests[keep]),
            ordered_lines[keep])


def from_rows(times: list[float], names: list[str], counts: list[float], name: str = "trace",
              lines: list[int] | None = None) -> Trace:
    """A Trace from parallel lists; infers and checks the interval. `lines`: the file line of each row, for
    errors (default: row i on line i + 2, under a header)."""
    index: dict[str, int] = {}
    model = np.fromiter((index.setdefault(n, len(index)) for n in names), dtype=np.int64, count=len(names))
    numbered = np.asarray(lines if lines is not None else range(2, len(names) + 2), dtype=np.int64)
    return _in_order(np.asarray(times, dtype=np.float64), model, tuple(index), np.asarray(counts, dtype=np.float64),
                     name, numbered)[0]


def _in_order(t: np.ndarray, model: np.ndarray, models: tuple[str, ...], counts: np.ndarray, name: str,
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
        problem = repeated_problem(t, slot, model, models, spaced, line_of)
    else:
        kept = np.flatnonzero(~lost_rows)
        problem = repeated_problem(t[kept], slot[kept], model[kept], models, spaced,
                                   lambda row: line_of(int(kept[row])))
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
    milliseconds. Read so only where it then reads (`_in_order`): a request log's sub-second times are still told
    to sum into 1 s, a scraper's jitter of milliseconds to round to its step. None where rounding moves nothing."""
    snapped: np.ndarray = t * 1000.0
    np.rint(snapped, out=snapped)
    snapped /= 1000.0
    return None if np.array_equal(snapped, t) else snapped
