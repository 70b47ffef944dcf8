"""Joins per-minute tables, a file a day, into one trace, and keeps the busiest models.

Azure Functions' public trace is 14 files of a day each, a row per function and a column per minute, some
46,000 functions a day. `simulate --trace` reads one such file as it is (trace_minutes.py); a replay of several
days, or of the functions that carry the load rather than all of them (a day of 46,000 takes ten minutes),
needs them joined and cut first, which every user otherwise wrote in pandas:

    python -m autoscaler.simulation.minute_table d01.csv [d02.csv ...] --out trace.csv [--top 500] [--quiet]

Files are days in the order given (the second file's minute 1 follows the first file's last minute); a model
is the same model in every file; `--top N` keeps the N models with the most requests over all of them.
"""

from __future__ import annotations

import argparse
import csv
import stat
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from autoscaler.simulation.converter_paths import read_once, refuse, unreadable, unwritable, why, written_over
from autoscaler.simulation.progress_bar import ProgressBar
from autoscaler.simulation.request_log import reading_progress
from autoscaler.simulation.standard_input import STDIN, argument_path, input_name
from autoscaler.simulation.trace import Trace, read_csv
from autoscaler.simulation.trace_file import TraceError, minute_columns
from autoscaler.simulation.trace_minutes import MANY, MINUTE_S, READ_AS
from autoscaler.simulation.trace_opening import open_csv, unpacking
from autoscaler.simulation.trace_write import write_csv


def piped_in(path: Path) -> bool:
    """Whether `path` can be read only once: standard input, or a path that is no regular file (a pipe:
    `<(zcat d01.csv.gz)`, `/dev/stdin`), whose header a first look would take from the read after it."""
    if str(path) == STDIN:
        return True
    try:
        return not stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False  # reading it says what is wrong


def _check_table(path: Path) -> None:
    """Refuse a file that is not a per-minute table before reading it all: a trace replays as it is. A pipe
    cannot be looked at twice: a day piped in is checked once read (`_check_read`)."""
    if piped_in(path):
        return
    try:
        with unpacking(path), open_csv(path) as fh:  # a damaged gzip: said here, as read_csv says it
            header = next(csv.reader(fh), None)
    except (OSError, UnicodeDecodeError):
        return  # read_csv says what is wrong with it
    if header is None or minute_columns(header) is None:
        raise TraceError(_not_a_table(str(path)))


def _not_a_table(name: str) -> str:
    return (f"{name}: not a per-minute table (a row per model, then columns named 1, 2, ... for its minutes): it "
            "replays as it is with simulate --trace")


def _check_read(path: Path, day: Trace) -> Trace:
    """`day` as read from `path`, refused where it was not read as a per-minute table: a day piped in
    (`zcat d01.csv.gz | minute_table -`), which `_check_table` could not look at first."""
    if piped_in(path) and not any(note.startswith(READ_AS) for note in day.notes):
        raise TraceError(_not_a_table(input_name(path)))
    return day


def join(days: Sequence[tuple[Path, Trace]]) -> Trace:
    """The days one after another, a model the same model in each."""
    (first_path, first), *_ = days
    index: dict[str, int] = {}
    slots, models, counts = [], [], []
    for at, (path, day) in enumerate(days):
        if day.intervals != first.intervals:
            raise TraceError(f"{input_name(path)}: {day.intervals} minute columns, but {input_name(first_path)} has "
                             f"{first.intervals}: each file must be one day of the same length, given in order")
        renumber = np.array([index.setdefault(name, len(index)) for name in day.models], dtype=np.int64)
        slots.append(day.slot + at * first.intervals)
        models.append(renumber[day.model])
        counts.append(day.requests)
    slot, model = np.concatenate(slots), np.concatenate(models)
    order = np.lexsort((model, slot))
    return Trace(tuple(index), 0.0, MINUTE_S, first.intervals * len(days), slot[order], model[order],
                 np.concatenate(counts)[order])


def busiest(totals: dict[str, float], top: int) -> set[str]:
    """The `top` models with the most requests (the first listed among equals); none without requests."""
    ranked = sorted(totals.items(), key=lambda item: -item[1])  # sorted() is stable: first listed first
    return {name for name, total in ranked[:top] if total > 0}


def only(day: Trace, kept: set[str]) -> Trace:
    """The day's rows of the `kept` models."""
    names = [name for name in day.models if name in kept]
    at = {name: i for i, name in enumerate(names)}
    renumber = np.array([at.get(name, -1) for name in day.models], dtype=np.int64)
    rows = renumber[day.model] >= 0
    return Trace(tuple(names), day.start_s, day.interval_s, day.intervals, day.slot[rows],
                 renumber[day.model[rows]], day.requests[rows])


def _span(minutes: int) -> str:
    days, rest = divmod(minutes, 1440)
    if not rest:
        return f"{days} day{'s' if days > 1 else ''}"
    return f"{minutes / 60:g} h"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m autoscaler.simulation.minute_table",
        description="Join per-minute tables (a row per model, then columns 1, 2, ... N for its minutes, as Azure "
                    "Functions' invocations_per_function_md.anon.dNN.csv come), a file a day in the order given, "
                    "into the trace `modelmesh-autoscaler simulate --trace` replays, and keep the busiest models.")
    parser.add_argument("days", nargs="+", type=argument_path, metavar="DAY.csv",
                        help="per-minute tables (.csv or .csv.gz), one day each, in time order; - reads one from "
                             "standard input")
    parser.add_argument("--out", type=argument_path, required=True, help="trace CSV to write ('-' for standard output)")
    parser.add_argument("--top", type=int, default=None, metavar="N",
                        help="keep the N models with the most requests over all days (default: every model)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.top is not None and args.top < 1:
        parser.error(f"--top must be 1 or more, got {args.top}")
    # A path that cannot be read or written is said before the days are read (converter_paths)
    for problem in (*(unreadable(path) for path in args.days), read_once(args.days), unwritable(args.out)):
        if problem is not None:
            return refuse(parser.prog, problem)
    if (overwritten := written_over(args.out, args.days)) is not None:
        return refuse(parser.prog, overwritten)
    # With --top, every day is read twice, a day at a time: once to add up each model's requests, once to keep
    # the busiest's rows (14 days of 46,000 functions held whole until the busiest are known is 5 GB)
    passes = 1 if args.top is None else 2
    reading = None if args.quiet else reading_progress(list(args.days) * passes)
    seen = 0
    piped: dict[Path, Trace] = {}  # the days piped in, read once: the second pass of --top takes them from here

    def day_of(path: Path) -> Trace:
        nonlocal seen
        progress = None if reading is None else reading(seen)
        seen += 1
        if path in piped:
            return piped[path]
        day = _check_read(path, read_csv(path, None if progress is None else lambda done, _: progress(done),
                                         all_zero_ok=True))
        if piped_in(path):
            piped[path] = day
        return day

    try:
        for path in args.days:
            _check_table(path)
        totals: dict[str, float] = {}
        notes: list[str] = []
        kept: set[str] | None = None
        if args.top is not None:
            for path in args.days:
                day = day_of(path)
                notes += [f"{input_name(path)}: {note}" for note in day.notes
                          if not note.startswith(READ_AS) and MANY not in note]
                for name, total in zip(day.models, np.bincount(day.model, weights=day.requests,
                                                               minlength=len(day.models)).tolist(), strict=True):
                    totals[name] = totals.get(name, 0.0) + total
            kept = busiest(totals, args.top)
        days = []
        for path in args.days:
            day = day_of(path)
            if kept is None:
                notes += [f"{input_name(path)}: {note}" for note in day.notes if not note.startswith(READ_AS)]
            days.append((path, day if kept is None else only(day, kept)))
        if reading is not None:
            reading(seen)(0)
        trace = join(days)
        total = sum(totals.values()) if kept is not None else trace.total_requests
        if not total:
            raise TraceError("every cell of every file is 0: nothing to replay")
    except (OSError, TraceError) as exc:
        ProgressBar.end_line()  # a bar left short of its end: the error on a line of its own
        if isinstance(exc, TraceError):
            return refuse(parser.prog, str(exc))
        return refuse(parser.prog, f"{exc.filename or 'a day'}: cannot read: {why(exc)}")  # gone since the check
    for note in notes:  # a function under two triggers, say
        print(note, file=sys.stderr)
    models = len(totals) if kept is not None else len(trace.models)
    print(f"{total:,.0f} requests of {models:,} models over {_span(trace.intervals)}", file=sys.stderr)
    if kept is not None and args.top < models:
        print(f"kept the {args.top:,} busiest of {models:,} models: {trace.total_requests:,.0f} of {total:,.0f} "
              f"requests ({100 * trace.total_requests / total:.1f}%)", file=sys.stderr)
    to_stdout = str(args.out) == STDIN  # as request_log's --out -: a file named `-` was written
    try:
        write_csv(trace, sys.stdout if to_stdout else args.out)
    except OSError as exc:
        return refuse(parser.prog, f"--out {args.out}: cannot write: {why(exc)}")
    print(f"{len(trace.models):,} models -> {'standard output' if to_stdout else args.out} (60 s intervals)",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
