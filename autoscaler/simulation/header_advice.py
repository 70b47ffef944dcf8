"""What to change in a header that an export writes, where it is not a trace's `timestamp_s,model,requests`.

Grafana's table export of the query docs/simulation.md gives is `Time,model,Value`; its default export (series
joined by time) is `Time` and a column per model; a request log has `timestamp` and no count. Each was refused
"missing timestamp_s; missing requests", which named what was wanted but not what to change. Nothing is renamed
here without a word: a column whose name says what it holds (`Time`, `Value`) is named with the change, and a
header where that is not plain (two candidates) gets the general refusal.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Final

from autoscaler.simulation.standard_input import STDIN, STDIN_NAME

TIME_NAMES: Final = ("time", "timestamp", "ts", "date", "datetime")
"""Names (any case) of a time column in exports and logs: Grafana's `Time`, request_log's defaults."""

COUNT_NAMES: Final = ("value", "count", "counts")
"""Names (any case) of a count column: Grafana's `Value` (`Value #A` where a panel has several queries)."""

REQUEST_LOG_TIME_NAMES: Final = ("timestamp", "time", "ts", "timestamp_s")
"""The time columns `request_log` finds without `--timestamp-column` (any case), the first there."""

RATE: Final = ("if it is a rate per second instead, multiply it by the interval's length in seconds and name that "
               "column requests")
"""A count column's other reading: a trace's requests are a count per interval, which a rate is not."""

TABLE_FORMAT: Final = ("in Grafana set the query's Format to Table (under the query's Options) and export again, "
                       "then rename Time to timestamp_s and Value to requests")
"""How Grafana writes a row per model and step: one frame of Time, the query's labels, and Value."""


def _one(names: Sequence[str], fits: tuple[str, ...]) -> str | None:
    """The one name that `fits` (any case, `Value #A` as `value`), or None for none or several."""
    found = [name for name in names if name.lower().split(" #")[0] in fits]
    return found[0] if len(found) == 1 else None


def _number(text: str) -> bool:
    """Whether a cell reads as a number, as a count or a rate does (a status code too: the advice is an if)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def _request_log(name: str, names: Sequence[str], model: str, time: str) -> str:
    """The `request_log` line that bins the request log `name` (STDIN_NAME: piped in) into a trace, each word
    quoted for the shell (`my log.csv`) and the time column named where `request_log` would not find it (`date`),
    so that the line, pasted, runs as it is."""
    words = ["python", "-m", "autoscaler.simulation.request_log", "--model-column", model]
    lowered = {n.lower() for n in names}
    if next((n for n in REQUEST_LOG_TIME_NAMES if n in lowered), None) != time.lower():
        words += ["--timestamp-column", time]
    line = shlex.join([*words, STDIN if name == STDIN_NAME else name, "--out", "trace.csv"])
    if name == STDIN_NAME:  # standard input is read once: piped into the converter instead
        return f"a row per request, with no count? bin it into a trace: pipe it into {line}"
    return f"a row per request, with no count? bin it into a trace with {line}"


def _counted(names: list[str], row: Sequence[str] | None, time: str, model: str) -> str | None:
    """What to rename where the only columns besides the time and the model may hold the count (`rps`): the
    columns whose first value is a number (every other column where there is no row), or None for none. A
    request log's line would count rows, dropping them without a word."""
    others = [(at, n) for at, n in enumerate(names) if n and n not in (time, model)]
    numbers = [n for at, n in others if row is None or (at < len(row) and _number(row[at].strip()))]
    if not numbers:
        return None
    time_too = "" if time.lower() == "timestamp_s" else f"{time} to timestamp_s and "
    if len(numbers) == 1:
        return (f"if {numbers[0]} is the number of requests in each interval, rename {time_too}{numbers[0]} to "
                f"requests; {RATE}")
    return (f"if one of {', '.join(numbers)} is the number of requests in each interval, rename {time_too}that "
            f"one to requests; {RATE}")


def header_advice(header: Sequence[str], name: str, row: Sequence[str] | None = None) -> str | None:
    """What to change so that `header` (of file `name`, STDIN_NAME where piped in; `row` its first row after
    the header, None where it has none) reads as a trace, or None where no change is plain."""
    names = [h.strip() for h in header]
    lowered = {n.lower() for n in names}
    time = None if "timestamp_s" in lowered else _one(names, TIME_NAMES)
    count = None if "requests" in lowered else _one(names, COUNT_NAMES)
    if "model" not in lowered:
        series = [n for n in names if n and n != time]
        if time is not None and count is None and "requests" not in lowered and len(series) >= 2:
            return (f"this is {time} and then a column per model (Grafana's default CSV, series joined by time), "
                    f"where a trace is a row per model and interval: {TABLE_FORMAT}")
        return None
    if "requests" not in lowered and count is None and (time is not None or "timestamp_s" in lowered):
        model = next(n for n in names if n.lower() == "model")
        stamp = time if time is not None else next(n for n in names if n.lower() == "timestamp_s")
        return _counted(names, row, stamp, model) or _request_log(name, names, model, stamp)
    renames = [f"{old} to {new}" for old, new in ((time, "timestamp_s"), (count, "requests")) if old is not None]
    if not renames or ("timestamp_s" not in lowered and time is None) or ("requests" not in lowered and count is None):
        return None
    return f"rename {' and '.join(renames)}"
