"""The API server's times (`metav1.Time`: RFC 3339 in UTC, `2026-12-02T15:00:00Z`), read and written.

One reading for every place that compares or ages them (a pod's start, a RuntimeScale's creation, an exec
plugin's `expirationTimestamp`), so that a time written without a zone (never by the API server, but by a hand
or a tool) counts as UTC everywhere rather than as the local time in one place. One writing for every place that
sends them (the metrics API's timestamps, a RuntimeScale's condition, a Lease's renewal), so that each is in the
exact form the API server's own decoder takes.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Any, Final


def posix_seconds(value: Any) -> float | None:
    """`value` as POSIX seconds; None when it is not a time (absent, empty, malformed)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return (when if when.tzinfo is not None else when.replace(tzinfo=UTC)).timestamp()


def rfc3339(moment: float) -> str:
    """`metav1.Time` as the API server writes it: UTC, whole seconds, `Z`."""
    return _rfc3339_seconds(int(moment))


STAMPS_CACHED: Final = 256
"""Distinct seconds whose text is kept: every runtime's values of a refresh share the seconds of its last few
minutes (their samples' times, at most `max_staleness` old), and an older second is never asked again. The
cache kept 4,096 (about 960 kB), and the refresh process's memory grew for as many distinct seconds: an hour at a
1 s refresh, most of a day at 15 s (tests/kube/test_timestamps_memory.py)."""


@functools.lru_cache(maxsize=STAMPS_CACHED)
def _rfc3339_seconds(seconds: int) -> str:
    """Cached because every runtime's metric values share a few stamps (`STAMPS_CACHED`)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(moment: float) -> str:
    """`metav1.MicroTime` (a Lease's times): RFC 3339 in UTC with exactly six fractional digits, which the API
    server's decoder requires."""
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
