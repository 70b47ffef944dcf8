"""What to change in a header that an export writes, where it is not a trace's `timestamp_s,model,requests`.

Grafana's table export of the query docs/simulation.md gives is `Time,model,Value`; its default export (series
joined by time) is `Time` and a column per model; a request log has `timestamp` and no count. Each was refused
"missing timestamp_s; missing requests", which named what was wanted but not what to change. Nothing is renamed
here without a word: a column whose name says what it holds (`Time`, `Value`) is named with the change, and a
header where that is not plain (two candidates) gets the general refusal. ModelMesh's per-model metrics carry the
label `modelId` (and `vModelId`, the InferenceService over it), so a Prometheus export of them has that column
where a trace has `model`: it is told the rename, and where both are there, either (neither is picked for the
user: they count different things where one InferenceService's model changed).
"""

from __future__ import annotations

import contextlib
import itertools
import shlex
from collections.abc import Iterable, Sequence
from typing import Final

from autoscaler.simulation.standard_input import STDIN, STDIN_NAME
from autoscaler.simulation.timestamps import epoch_unit

TIME_NAMES: Final = ("time", "timestamp", "ts", "date", "datetime")
"""Names (any case) of a time column in exports and logs: Grafana's `Time`, request_log's defaults."""

COUNT_NAMES: Final = ("value", "count", "counts")
"""Names (any case) of a count column: Grafana's `Value` (`Value #A` where a panel has several queries)."""

MODEL_NAMES: Final = ("modelid", "vmodelid", "model_id", "model_name", "modelname")
"""Names (any case) of a model column: ModelMesh's labels `modelId` and `vModelId`, and their spellings in other
exports. Not `name`: a pod's, a route's or a metric's name as well, whose rows replayed as models mislead."""

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


ADVICE_ROWS: Final = 50
"""Rows after the header the advice reads to judge which columns hold numbers: a first cell can be empty
(Grafana's step without a value) where the rest are counts."""


def _numeric(rows: Sequence[Sequence[str]], at: int) -> bool:
    """Whether column `at` may hold numbers: no cell of `rows` in it is other than a number or empty (a column
    of empty cells, or no rows at all, may be a count whose values are all missing)."""
    return all(_number(cell) for row in rows if at < len(row) and (cell := row[at].strip()))


def _unit(rows: Sequence[Sequence[str]], at: int) -> str:
    """The `--timestamp-unit` of the time column `at`, from its first number (`s` for date-times)."""
    for row in rows:
        with contextlib.suppress(IndexError, ValueError):
            return epoch_unit(float(row[at]))
    return "s"


def _request_log(name: str, names: Sequence[str], model: str, time: str, unit: str, *, alone: bool,
                 others: Sequence[str] = ()) -> str:
    """The `request_log` line that bins the request log `name` (STDIN_NAME: piped in) into a trace, each word
    quoted for the shell (`my log.csv`), a name that starts with `-` kept from being read as an option
    (`./-x.csv`), the time column named where `request_log` would not find it (`date`) and the unit of epoch
    milliseconds given, so that the line, pasted, runs as it is. `alone`: no column may be the count. `others`:
    the model columns besides `model`, which the line leaves out: said, with the flag that takes one, since the
    line needs one and `modelId` and `vModelId` count different things (a model, the InferenceService over it)."""
    words = ["python", "-m", "autoscaler.simulation.request_log", "--model-column", model]
    lowered = {n.lower() for n in names}
    if next((n for n in REQUEST_LOG_TIME_NAMES if n in lowered), None) != time.lower():
        words += ["--timestamp-column", time]
    if unit != "s":
        words += ["--timestamp-unit", unit]
    path = STDIN if name == STDIN_NAME else f"./{name}" if name.startswith("-") else name
    line = shlex.join([*words, path, "--out", "trace.csv"])
    lead = "a row per request, with no count? bin" if alone else "if each row is one request, bin"
    lead += " it into a trace"
    if others:  # before the line, which a user pastes to the end
        choice = " or ".join(f"--model-column {other}" for other in others)
        lead += (f" by {model}, the first of {', '.join([model, *others])} ({choice} bins by "
                 f"{'that one' if len(others) == 1 else 'another'} instead),")
    if name == STDIN_NAME:  # standard input is read once: piped into the converter instead
        return f"{lead.rstrip(',')}: pipe it into {line}"
    return f"{lead} with {line}"


def _counted(names: list[str], rows: Sequence[Sequence[str]], time: str, model: str, first: str) -> str | None:
    """What to rename where the columns besides the time and the model may hold the count (`rps`): those whose
    cells in `rows` are numbers or empty, or None for none. Such a column may as well be a request log's
    (`status`, `latency_ms`), so the request_log line is told beside it: either alone, followed where it is the
    other, drops the counts or counts latencies, without a word. `first`: the model's rename, told before."""
    others = [(at, n) for at, n in enumerate(names) if n and n not in (time, model) and n.lower() not in MODEL_NAMES]
    numbers = [n for at, n in others if _numeric(rows, at)]
    if not numbers:
        return None
    time_too = first + ("" if time.lower() == "timestamp_s" else f"{time} to timestamp_s and ")
    if len(numbers) == 1:
        return (f"if {numbers[0]} is the number of requests in each interval, rename {time_too}{numbers[0]} to "
                f"requests; {RATE}")
    return (f"if one of {', '.join(numbers)} is the number of requests in each interval, rename {time_too}that "
            f"one to requests; {RATE}")


def header_advice(header: Sequence[str], name: str, rows: Iterable[Sequence[str]] = ()) -> str | None:
    """What to change so that `header` (of file `name`, STDIN_NAME where piped in; `rows` the rows after it,
    of which the first ADVICE_ROWS are read) reads as a trace, or None where no change is plain."""
    names = [h.strip() for h in header]
    lowered = {n.lower() for n in names}
    time = None if "timestamp_s" in lowered else _one(names, TIME_NAMES)
    count = None if "requests" in lowered else _one(names, COUNT_NAMES)
    aliases = [] if "model" in lowered else [n for n in names if n.lower() in MODEL_NAMES]
    if "model" not in lowered and not aliases:
        series = [n for n in names if n and n != time]
        if time is not None and count is None and "requests" not in lowered and len(series) >= 2:
            return (f"this is {time} and then a column per model (Grafana's default CSV, series joined by time), "
                    f"where a trace is a row per model and interval: {TABLE_FORMAT}")
        return None
    model = aliases[0] if aliases else next(n for n in names if n.lower() == "model")
    renamed = "" if not aliases else f"{model} to model" if len(aliases) == 1 else (
        f"one of {', '.join(aliases)} to model,")
    if "requests" not in lowered and count is None and (time is not None or "timestamp_s" in lowered):
        stamp = time if time is not None else next(n for n in names if n.lower() == "timestamp_s")
        sample = list(itertools.islice(rows, ADVICE_ROWS))
        counted = _counted(names, sample, stamp, model, f"{renamed} and " if len(aliases) == 1 else
                           f"{renamed} " if aliases else "")
        binned = _request_log(name, names, model, stamp, _unit(sample, names.index(stamp)), alone=counted is None,
                              others=aliases[1:])
        return binned if counted is None else f"{counted}; {binned}"
    renames = [f"{old} to {new}" for old, new in ((time, "timestamp_s"), (count, "requests")) if old is not None]
    if ("timestamp_s" not in lowered and time is None) or ("requests" not in lowered and count is None):
        return None
    if len(aliases) > 1:
        return f"rename {renamed.rstrip(',')}" + "".join(f", and {r}" for r in renames)
    renames = [r for r in (renamed, *renames) if r]
    return f"rename {' and '.join(renames)}" if renames else None
