"""The row of 0 requests that states a sparse trace's step, and where a refusal may offer one.

A trace's interval is the smallest gap between its timestamps, so a trace with rows only where requests came
reads at a coarser step than its export's, or is refused; a row of 0 requests one step after the first
timestamp states the step (docs/simulation.md). Offered for a step that is none of the trace's, that row made it
absurd: 4 h of epoch milliseconds at each target's own offset were told to state a 1 s step, and read as 14.4
million 1 s intervals (166 days) to replay. A refusal offers a row of 0 only where the trace at that step reads
at a sane length (`sane_at`), and a rounding only where the trace so rounded states its step (`rounding_states`).
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np

INTERVALS_PER_TIMESTAMP: Final = 1000
"""The most intervals a trace may read as, for each of its distinct timestamps, at a step a row of 0 states: a
day of cron jobs every 30 min in a 60 s export is 30; milliseconds read as seconds at 1 s, thousands."""
SPARSE_LOG_INTERVALS: Final = 7 * 86400
"""However few its timestamps, a trace may read as this many intervals at a step a row of 0 states: a week of a
request log at 1 s. A sparse log's rows are thousands of seconds apart (50 requests over 2 days, 3,456 1 s
intervals each, were told only to round to their 2377 s typical gap, which no trace replays); it replays its
172,800 intervals in seconds. Milliseconds read as seconds are months to years of them (4 h: 166 days)."""
EXPORT_STEPS: Final = (60.0, 30.0, 15.0, 10.0, 5.0, 1.0)
"""The steps a row of 0 is offered for where rows are further apart than any interval replayed, in the order
tried: a minute first (Azure Functions' trace, most dashboards), then the finer steps exporters use."""


def sane_at(distinct: np.ndarray, step: float) -> bool:
    """Whether the trace whose distinct timestamps are `distinct` reads at `step` as at most
    `INTERVALS_PER_TIMESTAMP` intervals for each of them, or a week of 1 s intervals (`SPARSE_LOG_INTERVALS`): a
    row of 0 that states `step` is then worth offering."""
    intervals = math.floor(float(distinct[-1] - distinct[0]) / step) + 1
    return intervals <= max(INTERVALS_PER_TIMESTAMP * len(distinct), SPARSE_LOG_INTERVALS)


def rounding_states(distinct: np.ndarray, step: float, *, down: bool = False) -> bool:
    """Whether the timestamps `distinct`, rounded (or floored, `down`) to `step`, have their first two one step
    apart: the trace so rounded then states that step as a sparse trace is told to, and reads at it, as an export
    whose times stray does. Three requests of a sparse log told to round to their 525 s typical gap were 1050 s
    apart once rounded, and refused again; six, rounded to 482 s, had one off the 964 s step of the others."""
    moved = np.unique((np.floor if down else np.rint)(distinct / step))
    return len(moved) >= 2 and bool(moved[1] - moved[0] == 1)


def whole_seconds_divisor(gaps: np.ndarray) -> int | None:
    """The greatest common divisor of `gaps` in whole seconds, or None where there is none or a gap is not a
    whole number of seconds: the finest grid a trace's timestamps all sit on."""
    whole = np.rint(gaps)
    if not len(gaps) or np.abs(gaps - whole).max() > 1e-6:
        return None
    return int(np.gcd.reduce(whole.astype(np.int64)))


def export_step(distinct: np.ndarray) -> float | None:
    """The first of `EXPORT_STEPS` every timestamp is a whole number of from the first, at which the trace reads
    at a sane length (`sane_at`), or None: rows 1800 s apart in whole minutes are a 60 s export's rows where
    requests came (jobs at :00 and :30) as much as an export at 1800 s, and the user knows which."""
    common = whole_seconds_divisor(np.diff(distinct))
    if common is None:
        return None
    return next((step for step in EXPORT_STEPS if common % int(step) == 0 and sane_at(distinct, step)), None)
