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

Opening the file and what one field may hold: trace_file.py; the rows put in order on the inferred grid, and
refused where they are off it: trace_grid.py; the readings the rows without a value make possible:
lost_readings.py; what the rows as a whole are warned about or refused for (gaps, a changed step, a counter's
running total, two time origins): trace_checks.py; a table of a row per model and a column per minute (Azure
Functions' trace as it comes): trace_minutes.py. The `Trace` itself: trace_arrays.py. The replay's buckets:
trace_buckets.py; a trace written back: trace_write.py; the synthetic generator: synthetic_trace.py.
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
from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np

from autoscaler.simulation.coarse_steps import coarse_stretches, spread_coarse_rows, step_notes
from autoscaler.simulation.local_time import repeated_hour_problem
from autoscaler.simulation.lost_readings import refined_by_lost, stated_by_lost
from autoscaler.simulation.lost_scrapes import LostScrapes
from autoscaler.simulation.memory_room import MemoryWatch
from autoscaler.simulation.missing_intervals import missing_notes
from autoscaler.simulation.silent_models import silent_model_notes
from autoscaler.simulation.standard_input import STDIN as STDIN  # its importers keep their import
from autoscaler.simulation.standard_input import STDIN_NAME as STDIN_NAME
from autoscaler.simulation.standard_input import input_name, opened
from autoscaler.simulation.timestamps import zoneless
from autoscaler.simulation.trace_arrays import Trace
from autoscaler.simulation.trace_checks import QUIET_GAP_S, counter_notes, gap_notes
from autoscaler.simulation.trace_file import (
    HEADER,
    LATEST_S,
    MAX_INTERVAL_S,
    MIN_INTERVAL_S,
    PROGRESS_ROWS,
    TraceError,
    columns,
    minute_columns,
    number_field,
    numbered_rows,
    timestamp_field,
)
from autoscaler.simulation.trace_grid import from_rows, in_order
from autoscaler.simulation.trace_head import sampled
from autoscaler.simulation.trace_minutes import MINUTE_S, read_minutes
from autoscaler.simulation.trace_opening import gzipped, known_size, not_utf8, text_of, unpacking, with_head

__all__ = ["HEADER", "MAX_INTERVAL_S", "MIN_INTERVAL_S", "Trace", "TraceError", "from_rows", "read_csv"]


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
    stated = stated_by_lost(valued, index, lost, name, spaced) if one_time else None
    try:
        trace, ordered_lines = stated or in_order(valued[0], valued[1], tuple(index), valued[2], name, valued[3],
                                                  spaced)
    except TraceError:  # (with one timestamp, the lost rows' reading was tried above: None)
        stated = ((None if one_time else stated_by_lost(valued, index, lost, name, spaced))
                  or refined_by_lost(valued, index, lost, name, spaced))
        if stated is None:
            raise
        trace, ordered_lines = stated
    if stated is None and (refined := refined_by_lost(valued, index, lost, name, spaced)):
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
