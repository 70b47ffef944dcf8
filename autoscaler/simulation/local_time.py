"""Date-times without a zone across a change of summer time: what a spreadsheet writes from local times.

A timestamp without a zone is read as UTC (only differences between times matter, and UTC has no summer time).
Local times exported so (Excel, a dashboard set to the browser's zone) repeat an hour where clocks go back
(02:00 to 02:59 twice, Europe/Berlin's last Sunday of October) and skip one where they go forward. The repeated
hour was refused as rows listed twice with the advice to sum them, which, followed, replayed that hour's requests
twice as fast in a trace an hour short with no word; the skipped hour was warned about as data missing, to cut
the trace at. Both are named here as what they likely are, with the fix: times in UTC or with their offset.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Final

import numpy as np

HOUR_S: Final = 3600.0
"""What a change of summer time repeats or skips (the zones that shift by half an hour are few)."""
FILLED: Final = 0.9
"""The share of an hour's timestamps that must repeat (or of its span, covered) for the repeats to be read as
that hour written twice: a quiet minute in one of the two hours leaves its time once."""
ZONE_FIX: Final = ("export the times in UTC or with their offset (2025-10-26T02:00:00+02:00), or convert them: "
                   "pandas: pd.to_datetime(df.timestamp_s).dt.tz_localize('Europe/Berlin', ambiguous='infer', "
                   "nonexistent='shift_forward').dt.tz_convert('UTC'), with your zone")
"""How to write the times so that the change reads as it was."""


def wall_clock(seconds: float) -> str:
    """A zone-less time as the file wrote it (read as UTC, so UTC's date-time is its wall clock)."""
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC).replace(tzinfo=None)
    return moment.isoformat(sep=" ", timespec="seconds")


def repeated_hour_problem(t: np.ndarray, model: np.ndarray, line_of: Callable[[int], int]) -> str | None:
    """The refusal for zone-less rows that repeat a model and time over a whole hour (a fall back of the clocks),
    or None: rows repeating a few times (a function under two triggers) are for `repeated_problem`, whose advice
    to sum them is right there. `t`, `model`: the rows with requests, in file order."""
    if len(t) < 2:
        return None
    distinct = np.unique(t)
    if len(distinct) < 2:
        return None
    step = float(np.diff(distinct).min())
    if step <= 0 or step > HOUR_S / 4:
        return None
    order = np.lexsort((model, t))
    same = (np.diff(t[order]) == 0) & (np.diff(model[order]) == 0)
    if not same.any():
        return None
    twice = np.unique(t[order][1:][same])
    first, last = float(twice[0]), float(twice[-1])
    covered = last + step - first
    within = distinct[(distinct >= first) & (distinct < first + HOUR_S)]
    if not (FILLED * HOUR_S <= covered <= HOUR_S + 1e-6 and len(twice) >= FILLED * len(within)):
        return None
    row = int(order[1:][same][0])
    repeats = int(same.sum())
    return (f"line {line_of(row)}: the rows from {wall_clock(first)} to {wall_clock(last)} come twice ({repeats:,} "
            f"rows repeat a model and time): the timestamps have no zone (read as UTC), and a whole hour written "
            f"twice is likely local time across the clocks going back an hour (summer time ending): {ZONE_FIX}; "
            f"summed, that hour's requests would be replayed within one hour, twice the load, in a trace an hour "
            f"short")


def skipped_hour_advice(missing_s: float) -> str | None:
    """What to say, in place of cutting the trace, of a zone-less trace's stretch of `missing_s` seconds without
    rows where it is an hour: local times skip one as clocks go forward (summer time starting), and replayed as
    UTC that is an hour of no requests that never was. None for any other stretch."""
    if abs(missing_s - HOUR_S) > 1e-6:
        return None
    return ("the timestamps have no zone (read as UTC), and an hour without rows is likely local time across the "
            f"clocks going forward an hour (summer time starting): {ZONE_FIX}; if data is missing there rather "
            "than traffic, cut the trace at the gap")

