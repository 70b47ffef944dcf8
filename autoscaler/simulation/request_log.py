"""Turns request logs (one row per request) into the trace `simulate` reads (requests per model per interval).

Users rarely have per-model counts at hand; they have access logs, gateway exports or a public trace with a
timestamp per request. This converter bins such rows by time, per model, into `timestamp_s,model,requests`
with `timestamp_s` counted from the first request. A model comes either from a column of each row
(`--model-column`) or from the file (`MODEL=FILE`, one file per model, as the Azure LLM inference traces
come). Timestamps are Unix seconds or ISO 8601 date-times (any number of fractional digits; without a zone
they are read as UTC, only differences matter). Reading shows `simulate`'s progress bar (progress_bar.ProgressBar) by
bytes of the inputs: 3 million requests take half a minute, which without a word looked like a hang.

    python -m autoscaler.simulation.request_log --out trace.csv [--interval 1] [--timestamp-column NAME] [--quiet]
        (MODEL=FILE ... | --model-column NAME FILE ...)
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Final, TextIO

from autoscaler.simulation.converter_paths import read_once, refuse, unreadable, unwritable, why, written_over
from autoscaler.simulation.header_advice import REQUEST_LOG_TIME_NAMES
from autoscaler.simulation.progress_bar import ProgressBar
from autoscaler.simulation.standard_input import STDIN, argument_path, input_name, opened
from autoscaler.simulation.timestamps import SECONDS_PER_YEAR, epoch_unit, parse_time, seconds_text
from autoscaler.simulation.trace_file import HEADER, MAX_INTERVAL_S, MIN_INTERVAL_S, PROGRESS_ROWS, TraceError
from autoscaler.simulation.trace_opening import gzipped, known_size, not_utf8, text_of, unpacking, with_head

DEFAULT_TIMESTAMP_COLUMNS: Final = REQUEST_LOG_TIME_NAMES  # the advice that names this converter knows them
"""Column names taken as the request's time when `--timestamp-column` is not given (case-insensitive)."""


def _column(header: Sequence[str], wanted: str | None, defaults: Sequence[str], what: str, name: str) -> int:
    lowered = [h.strip().lower() for h in header]
    candidates = [wanted] if wanted else list(defaults)
    for candidate in candidates:
        if candidate.lower() in lowered:
            return lowered.index(candidate.lower())
    flag = "--timestamp-column" if what == "timestamp" else "--model-column"
    raise TraceError(f"{name}: no {what} column ({', '.join(candidates)}) in the header {', '.join(header)}; "
                     f"name it with {flag}")


UNITS: Final = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
"""--timestamp-unit: seconds of one unit of a numeric timestamp."""


def _seconds(text: str, unit: str, where: str) -> float:
    """A request's time in seconds. Epoch milliseconds (and finer) read as seconds would stretch the trace a
    thousandfold without a word, so a number past the year 5138 as seconds is refused, naming the unit."""
    try:
        value = float(text)
    except ValueError:
        try:
            return parse_time(text)
        except ValueError:
            raise TraceError(f"{where}: timestamp must be Unix seconds (see --timestamp-unit) or an ISO 8601 "
                             f"date-time, got {text.strip()!r}") from None
    if not math.isfinite(value):
        raise TraceError(f"{where}: timestamp must be a finite number, got {text.strip()!r}")
    if unit == "s" and (likely := epoch_unit(value)) != "s":
        names = {"ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}
        raise TraceError(f"{where}: timestamp {text.strip()} is the year {1970 + int(value / SECONDS_PER_YEAR)} as "
                         f"seconds: these look like {names[likely]} since the epoch; add --timestamp-unit {likely}")
    return value * UNITS[unit]


def read_requests(path: Path, model: str | None, timestamp_column: str | None,
                  model_column: str | None, unit: str = "s",
                  progress: Callable[[int], None] | None = None) -> Iterator[tuple[float, str]]:
    """(time in seconds, model) of each request row of one file; TraceError names the file and line. `unit`:
    of numeric timestamps, a key of UNITS. `progress(done)`: bytes of the file read so far (compressed ones
    for `.gz`), every `PROGRESS_ROWS` rows. A file that is not UTF-8 (Excel's code page), or a gzip cut
    short, was a traceback."""
    piped = str(path) == STDIN
    shown = input_name(path)
    try:
        with unpacking(shown):
            yield from _requests(path, shown, model, timestamp_column, model_column, unit, progress)
    except UnicodeDecodeError as exc:
        raise TraceError(f"{shown}: not UTF-8 text: save it as CSV UTF-8" if piped else not_utf8(shown)) from exc


def _requests(path: Path, shown: str, model: str | None, timestamp_column: str | None, model_column: str | None,
              unit: str, progress: Callable[[int], None] | None) -> Iterator[tuple[float, str]]:
    # As `open_csv` opens it, its byte position at hand for `progress`; `-` standard input (`zcat log.csv.gz |
    # request_log --model-column model -`)
    with opened(path) as raw:
        # a pipe named by its path (`m=/dev/stdin`, `<(zcat log.gz)`) cannot seek back (`with_head`), nor say where
        # it is (its bar stays at its start)
        regular = known_size(raw) is not None
        head, stream_of = with_head(raw)
        with text_of(stream_of, gzipped(str(path), head)) as stream:
            yield from _rows(csv.reader(stream), shown, model, timestamp_column, model_column, unit,
                             None if progress is None or not regular else lambda: progress(raw.tell()))


def _rows(rows: Iterator[list[str]], path: str, model: str | None, timestamp_column: str | None,
          model_column: str | None, unit: str, report: Callable[[], None] | None) -> Iterator[tuple[float, str]]:
    header = next(rows, None)
    if header is None:
        raise TraceError(f"{path}: empty file; expected a header row")
    at = _column(header, timestamp_column, DEFAULT_TIMESTAMP_COLUMNS, "timestamp", path)
    # Several columns name a model together (Azure Functions' 2021 trace: a func id is unique within its app)
    which = None if model_column is None else [_column(header, column.strip(), (), "model", path)
                                               for column in model_column.split(",")]
    for line, row in enumerate(rows, start=2):
        if not row:
            continue
        try:
            stamp = row[at]
            parts = [model or ""] if which is None else [row[i].strip() for i in which]
        except IndexError:
            raise TraceError(f"{path}, line {line}: expected {len(header)} fields, as in the header, got "
                             f"{len(row)}") from None
        seconds = _seconds(stamp, unit, f"{path}, line {line}")
        if not any(parts):
            raise TraceError(f"{path}, line {line}: empty model name")
        name = "/".join(parts)
        yield seconds, name
        if report is not None and not line % PROGRESS_ROWS:
            report()


def bin_requests(requests: Iterable[tuple[float, str]], interval_s: float) -> list[tuple[float, str, int]]:
    """(interval start from the first request, model, requests) rows in time then model order. The requests are
    kept packed, 16 bytes each (as Python pairs, a 2 GB log of 30 million requests took 4.5 GB)."""
    times, models = array("d"), array("q")
    index: dict[str, int] = {}
    for seconds, model in requests:
        times.append(seconds)
        models.append(index.setdefault(model, len(index)))
    if not times:
        return []
    import numpy as np  # once the lines are read: a log refused by its flags, header or lines is told without it

    t = np.frombuffer(times)
    names = sorted(index)
    rank = np.empty(len(index), dtype=np.int64)
    rank[[index[name] for name in names]] = np.arange(len(names))
    slot = ((t - t.min()) // interval_s).astype(np.int64)
    keys, counts = np.unique(slot * len(names) + rank[np.frombuffer(models, dtype=np.int64)], return_counts=True)
    rows = [(key // len(names) * interval_s, names[key % len(names)], n)
            for key, n in zip(keys.tolist(), counts.tolist(), strict=True)]
    if not (keys // len(names) == 1).any():
        # `simulate` infers the interval as the smallest gap between timestamps: a row of 0 in the second
        # interval pins it, where a sparse log would otherwise leave gaps of several intervals only.
        rows.append((interval_s, rows[0][1], 0))
        rows.sort(key=lambda row: (row[0], row[1]))
    return rows


def write_trace(rows: Iterable[tuple[float, str, int]], out: TextIO) -> int:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(HEADER)
    written = 0
    for start, model, n in rows:
        writer.writerow((seconds_text(start), model, n))
        written += 1
    return written


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m autoscaler.simulation.request_log",
        description="Turn request logs (a row per request) into the per-model trace that "
                    "`modelmesh-autoscaler simulate --trace` replays.")
    parser.add_argument("inputs", nargs="+", metavar="MODEL=FILE | FILE",
                        help="CSV files (.csv or .csv.gz) with a header; MODEL=FILE names the model of every row "
                             "of FILE, or give plain FILEs with --model-column; - reads standard input")
    parser.add_argument("--out", type=argument_path, required=True, help="trace CSV to write ('-' for standard output)")
    parser.add_argument("--interval", type=float, default=1.0,
                        help=f"interval in seconds, {MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g} (default 1)")
    parser.add_argument("--timestamp-column", default=None,
                        help="column holding each request's time, Unix seconds or ISO 8601 (default: the first "
                             f"of {', '.join(DEFAULT_TIMESTAMP_COLUMNS)}, any case)")
    parser.add_argument("--model-column", default=None,
                        help="column holding each request's model; several, comma-separated, name it together, "
                             "joined with '/' (app,func for Azure Functions' 2021 trace, whose func ids repeat "
                             "across apps)")
    parser.add_argument("--timestamp-unit", choices=tuple(UNITS), default="s",
                        help="unit of numeric timestamps (default s; ms for epoch milliseconds)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def reading_progress(paths: Sequence[Path]) -> Callable[[int], Callable[[int], None]]:
    """Per input (by its place in `paths`), the `progress` of `read_requests` that draws `simulate`'s reading
    bar over the bytes of all inputs; a file that cannot be read counts 0 (reading it says why). Past the
    last input (`len(paths)`), it finishes the bar, which a log file gets alone."""
    sizes = [_size(path) for path in paths]
    starts = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    total = sum(sizes)
    bar = ProgressBar("reading")

    def of(at: int) -> Callable[[int], None]:
        if at == len(paths):
            return lambda _: bar(total, total)

        def progress(done: int) -> None:
            # Short of the end until every input is read: the file is read ahead of the rows parsed, so its
            # last bytes can be read at a report before the last rows (the finished bar then came twice)
            bar(min(total - 1, starts[at] + done), total)
        return progress

    return of


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not MIN_INTERVAL_S <= args.interval <= MAX_INTERVAL_S:
        parser.error(f"--interval must be {MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g} seconds, got {args.interval:g}")
    sources: list[tuple[str | None, Path]] = []
    for item in args.inputs:
        model, equals, path = item.partition("=")
        if equals and args.model_column is None:
            sources.append((model, argument_path(path)))
        elif not equals and args.model_column is not None:
            sources.append((None, argument_path(item)))
        else:
            parser.error(f"{item!r}: give MODEL=FILE without --model-column, or FILE with it")
    # A path that cannot be read or written is said before the inputs are read, which takes half a minute for
    # a 105 MB log (converter_paths)
    for problem in (*(unreadable(path) for _, path in sources), read_once([path for _, path in sources]),
                    unwritable(args.out), written_over(args.out, [path for _, path in sources])):
        if problem is not None:
            return refuse(parser.prog, problem)
    reading = None if args.quiet else reading_progress([path for _, path in sources])
    try:
        rows = bin_requests((r for at, (model, path) in enumerate(sources)
                             for r in read_requests(path, model, args.timestamp_column, args.model_column,
                                                    args.timestamp_unit, reading and reading(at))),
                            args.interval)
        if reading is not None:
            reading(len(sources))(0)
    except (OSError, TraceError) as exc:
        ProgressBar.end_line()  # a bar left short of its end: the error on a line of its own
        if isinstance(exc, TraceError):
            return refuse(parser.prog, str(exc))
        return refuse(parser.prog, f"{exc.filename or 'an input'}: cannot read: {why(exc)}")  # gone since the check
    if not rows:
        return refuse(parser.prog, "no requests in the inputs")
    if str(args.out) == STDIN:
        written = write_trace(rows, sys.stdout)
    else:
        try:
            with args.out.open("w", newline="") as out:
                written = write_trace(rows, out)
        except OSError as exc:
            return refuse(parser.prog, f"--out {args.out}: cannot write: {why(exc)}")
    models = len({model for _, model, _ in rows})
    span = rows[-1][0] + args.interval
    print(f"{sum(n for _, _, n in rows)} requests of {models} models over {seconds_text(span)} s -> {written} rows "
          f"({args.interval:g} s intervals) in {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
