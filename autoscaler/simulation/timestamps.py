"""Times as traces and request logs write them: Unix seconds or ISO 8601 date-times, and back into words.

Spreadsheets, pandas and database exports write dates, logs write epoch seconds; both readers (the trace's and
the request-log converter's) take either. Without a zone a date-time is read as UTC: only differences matter.
"""

from __future__ import annotations

import datetime
import math
from typing import Final

SECONDS_PER_YEAR: Final = 31_556_952.0
"""The Gregorian calendar's mean year: timestamps read as a year, stretches of years said in years."""


def parse_time(text: str) -> float:
    """Seconds of a Unix timestamp or an ISO 8601 date-time; ValueError when it is neither."""
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        moment = _iso(text)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=datetime.UTC)
        return moment.timestamp()
    if not math.isfinite(seconds):
        raise ValueError(f"{text!r} is not a finite number of seconds")
    return seconds


EPOCH_UNITS: Final = (("ns", 1e17), ("us", 1e14), ("ms", 1e11))
"""The unit of an epoch timestamp from its size, largest first: 1e11 s is the year 5138, a millisecond's
count since 1973."""


def epoch_unit(value: float) -> str:
    """The unit (`s`, `ms`, `us`, `ns`) an epoch timestamp of this size is written in: read as seconds, a count
    of milliseconds stretches the trace a thousandfold, past the year 5138."""
    return next((unit for unit, least in EPOCH_UNITS if abs(value) >= least), "s")


def zoneless(text: str) -> bool | None:
    """Whether `text` is an ISO 8601 date-time without a zone, read as UTC (`local_time` names what that does to
    local times across a change of summer time); None for seconds (they say nothing of zones), False for what is
    no date-time."""
    text = text.strip()
    try:
        float(text)
    except ValueError:
        try:
            return _iso(text).tzinfo is None
        except ValueError:
            return False
    return None


def _iso(text: str) -> datetime.datetime:
    """`fromisoformat`, with fractions of a second past microseconds cut (logs write up to nanoseconds) and
    BigQuery's zone suffix (`2024-12-01 00:00:00 UTC`, its CSV export of a TIMESTAMP) read as +00:00."""
    if text.endswith(" UTC"):
        text = text[:-4] + "+00:00"
    head, dot, tail = text.partition(".")
    if dot:
        digits = len(tail) - len(tail.lstrip("0123456789"))
        if digits > 6:
            tail = tail[:6] + tail[digits:]
        text = head + dot + tail
    return datetime.datetime.fromisoformat(text)


def seconds_text(seconds: float) -> str:
    """Seconds as a user wrote them: every digit of an epoch timestamp (`:g` wrote 1733011200 as 1.73301e+09)."""
    return f"{seconds:.15g}"


def moment_text(seconds: float) -> str:
    """A timestamp in an error message: the seconds, and the UTC date-time too when they look like the epoch."""
    if not 1e8 <= seconds < 1e11:  # 1973 to 5138: relative times (from 0) stay plain seconds
        return seconds_text(seconds)
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC).replace(tzinfo=None)
    return f"{seconds_text(seconds)} ({moment.isoformat(timespec='seconds')}Z)"


def span_text(seconds: float) -> str:
    """A stretch of the replay or a total in the unit a user reads it in: hours from an hour ("50.3 h", where
    minutes read "3.02e+03 min", a number), minutes from a minute, else seconds."""
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} h"
    return f"{seconds / 60:.3g} min" if seconds >= 60 else f"{seconds:g} s"


def long_span_text(seconds: float) -> str:
    """A stretch that may run to years (a trace's rows with two time origins: 54 years between them) in the
    unit a user thinks of it in: hours under two days, days under two years, else years. `span_text` says the
    replay's own stretches, seconds to hours."""
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.3g} h"
    if seconds < 730 * 86400:
        return f"{seconds / 86400:.3g} days"
    return f"{seconds / SECONDS_PER_YEAR:.3g} years"
