"""Reading a trace file: its columns and what one field may hold.

A trace is CSV with the header `timestamp_s,model,requests`, its columns found by name in any order (others
left out and named). Each error names the file, the line and what to fix (`TraceError`). Where its bytes come from
(gzip, a byte-order mark, UTF-16, code pages and archives refused) is trace_opening.py; rows without a requests
value, lost_scrapes.py. trace.py turns the rows into a `Trace`; request_log.py reads per-request logs with the same
opening rules.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Final

from autoscaler.simulation.header_advice import header_advice
from autoscaler.simulation.timestamps import SECONDS_PER_YEAR, parse_time
from autoscaler.simulation.trace_error import TraceError as TraceError  # its importers keep their import

if TYPE_CHECKING:
    import numpy as np


HEADER: Final = ("timestamp_s", "model", "requests")
MIN_INTERVAL_S: Final = 1.0
MAX_INTERVAL_S: Final = 600.0
PROGRESS_ROWS: Final = 1 << 16
"""Rows between two progress reports while reading a trace or a request log."""


def by_name(models: tuple[str, ...], model: np.ndarray) -> tuple[tuple[str, ...], np.ndarray]:
    """`models` sorted by name and each row's index into them (`model`) renumbered to match. Numbered as they
    first appeared in the file, models of equal load were routed and placed in file order: the same rows sorted
    by time or by series gave different reports (fixed-max's delays, the bound, 14% apart)."""
    import numpy as np  # here, not above: a file refused by its header is told before numpy is imported

    named = sorted(range(len(models)), key=models.__getitem__)
    renumbered = np.empty(len(models), dtype=np.int64)
    renumbered[named] = np.arange(len(models), dtype=np.int64)
    return tuple(models[i] for i in named), renumbered[model]


def number_field(text: str, what: str, where: str, unit: str = "") -> float:
    try:
        value = float(text)
    except ValueError:
        raise TraceError(f"{where}: {what} must be a number{unit}, got {text!r}{comma_hint(text)}") from None
    if not math.isfinite(value):
        raise TraceError(f"{where}: {what} must be finite, got {text!r}")
    return value


THOUSANDS: Final = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?")
DECIMAL_COMMA: Final = re.compile(r"[+-]?\d*,\d+")


def comma_hint(text: str) -> str:
    """Why a number with a comma in it is none, and how to save it, for a spreadsheet's locale: '2,743' (a
    thousands separator, or a decimal comma where 2.743 is meant) and '192,5' (a decimal comma) read "must be a
    number", which named no cause. Empty where the text is neither."""
    text = text.strip()
    if THOUSANDS.fullmatch(text):
        either = f", or a decimal comma ({text.replace(',', '.')})" if text.count(",") == 1 else ""
        cause = f"a thousands separator ({text.replace(',', '')}){either}"
    elif DECIMAL_COMMA.fullmatch(text):
        cause = f"a decimal comma ({text.replace(',', '.')})"
    else:
        return ""
    return (f": the comma is likely {cause}, as a spreadsheet writes numbers for its locale: save the numbers "
            "without thousands separators and with '.' for decimals (Excel: Format Cells, Number, without "
            "1000 Separator; the system's decimal separator '.'; pandas: read_csv(..., thousands=',') or "
            "decimal=',', then to_csv)")


LATEST_S: Final = 1e13
"""Seconds past the year 300,000: a timestamp_s this large is of a finer unit (epoch milliseconds, the one
finer unit read as seconds and named by the interval they make, are under it) or no time at all."""
FINER: Final = ((1e17, "nanoseconds", 1_000_000_000), (1e14, "microseconds", 1_000_000))


def timestamp_field(text: str, where: str) -> float:
    try:
        value = parse_time(text)
    except ValueError:
        raise TraceError(f"{where}: timestamp_s must be seconds since the epoch or an ISO 8601 date-time, "
                         f"got {text!r}{_date_hint(text) or comma_hint(text)}") from None
    if abs(value) < LATEST_S:
        return value
    # Epoch microseconds read "timestamps are 6e+07 s apart: export at a step of 10 min or less", and a stray
    # 1e300 overflowed the interval's arithmetic (numpy's RuntimeWarning, then a step of 5e+299 s to round to)
    for least, unit, per_second in FINER:
        if least <= abs(value) < least * 1000:
            raise TraceError(f"{where}: timestamp_s {text.strip()} is the year "
                             f"{1970 + int(value / SECONDS_PER_YEAR):,} as seconds since the epoch: these look like "
                             f"{unit}; divide timestamp_s by {per_second}")
    raise TraceError(f"{where}: timestamp_s {text.strip()} is past the year 300,000 as seconds since the epoch: "
                     "write seconds since the epoch or since the trace's start")


def _date_hint(text: str) -> str:
    """How to write a date as a spreadsheet shows it (12/1/2025 0:00, 01.12.2025): which of day and month comes
    first is the locale's, so an example of the form, not a reading of the value."""
    if "/" not in text and text.count(".") < 2:
        return ""
    return (": write the date-time as ISO 8601, such as 2025-12-01T00:00:00 for 1 December 2025 (Excel: Format "
            "Cells, Custom, yyyy-mm-ddThh:mm:ss, before saving), or as seconds since the epoch")


def columns(header: list[str] | None, name: str,
            rows: Iterable[Sequence[str]] = ()) -> tuple[int, int, int, tuple[str, ...]]:
    """Where timestamp_s, model and requests are in the header row, and the other columns, in words: exports
    keep columns a trace does not need (pandas its index, unnamed), which are left out. `rows`, those after the
    header, tell the advice of a refusal which columns hold numbers (`header_advice`); they are read only for a
    refusal."""
    if header is None:
        raise TraceError(f"{name}: empty file; expected the header {','.join(HEADER)}")
    found = [h.strip().lower() for h in header]
    for separator, words in ((";", "';'"), ("\t", "tabs")):
        if len(found) == 1 and separator in found[0]:
            raise TraceError(f"{name}: line 1: fields are separated by {words}, not commas: save the file as "
                             "comma-separated CSV")
    problems = [f"missing {column}" for column in HEADER if column not in found]
    problems += [f"{column} listed twice" for column in HEADER if found.count(column) > 1]
    if problems:
        advice = header_advice(header, name, rows) or ("or a per-minute table: a row per model, then columns named "
                                                      "1, 2, ... for its minutes")
        raise TraceError(f"{name}: line 1: expected the header {','.join(HEADER)} (in any order, other columns "
                         f"left out), got {','.join(header)!r}: {'; '.join(problems)}; {advice}")
    at_time, at_model, at_requests = (found.index(column) for column in HEADER)
    others = tuple(repr(header[i].strip()) if column else "an unnamed one (pandas' index)" if i == 0 else
                   "an unnamed one" for i, column in enumerate(found) if column not in HEADER)
    return at_time, at_model, at_requests, others


def minute_columns(header: Sequence[str]) -> tuple[int, int] | None:
    """Where the minute columns are, [start, end), if the header ends in columns named 1, 2, ... N (N >= 2) after
    at least one other column (the model's), empty names after them left out (a spreadsheet's trailing comma);
    None for any other header."""
    names = [h.strip() for h in header]
    end = len(names)
    while end > 0 and not names[end - 1]:
        end -= 1
    start = end
    while start > 0 and names[start - 1].isdigit():
        start -= 1
    minutes = names[start:end]
    if start == 0 or len(minutes) < 2 or minutes != [str(k) for k in range(1, len(minutes) + 1)]:
        return None
    return start, end


def numbered_rows(reader: Iterator[list[str]]) -> Iterator[tuple[int, list[str]]]:
    """Each row with the file line it starts on: blank lines and quoted fields spanning lines (a model name
    with a newline) make that differ from the row's index, and a user opens the file at the line we name."""
    line = 1
    for row in reader:
        yield line, row
        line = getattr(reader, "line_num", line) + 1
