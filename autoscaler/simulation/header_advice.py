"""What to change in a header that an export writes, where it is not a trace's `timestamp_s,model,requests`.

Grafana's table export of the query docs/simulation.md gives is `Time,model,Value`; its default export (series
joined by time) is `Time` and a column per model; a request log has `timestamp` and no count. Each was refused
"missing timestamp_s; missing requests", which named what was wanted but not what to change. Nothing is renamed
here without a word: a column whose name says what it holds (`Time`, `Value`) is named with the change, and a
header where that is not plain (two candidates) gets the general refusal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

TIME_NAMES: Final = ("time", "timestamp", "ts", "date", "datetime")
"""Names (any case) of a time column in exports and logs: Grafana's `Time`, request_log's defaults."""

COUNT_NAMES: Final = ("value", "count", "counts")
"""Names (any case) of a count column: Grafana's `Value` (`Value #A` where a panel has several queries)."""

TABLE_FORMAT: Final = ("in Grafana set the query's Format to Table (under the query's Options) and export again, "
                       "then rename Time to timestamp_s and Value to requests")
"""How Grafana writes a row per model and step: one frame of Time, the query's labels, and Value."""


def _one(names: Sequence[str], fits: tuple[str, ...]) -> str | None:
    """The one name that `fits` (any case, `Value #A` as `value`), or None for none or several."""
    found = [name for name in names if name.lower().split(" #")[0] in fits]
    return found[0] if len(found) == 1 else None


def header_advice(header: Sequence[str], name: str) -> str | None:
    """What to change so that `header` (of file `name`) reads as a trace, or None where no change is plain."""
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
        return (f"a row per request, with no count? bin it into a trace with python -m "
                f"autoscaler.simulation.request_log --model-column {model} {name} --out trace.csv")
    renames = [f"{old} to {new}" for old, new in ((time, "timestamp_s"), (count, "requests")) if old is not None]
    if not renames or ("timestamp_s" not in lowered and time is None) or ("requests" not in lowered and count is None):
        return None
    return f"rename {' and '.join(renames)}"
