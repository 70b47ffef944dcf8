"""The API server's times (`metav1.Time`: RFC 3339 in UTC, `2026-12-02T15:00:00Z`) as POSIX seconds.

One reading for every place that compares or ages them (a pod's start, a RuntimeScale's creation, an exec
plugin's `expirationTimestamp`), so that a time written without a zone (never by the API server, but by a hand
or a tool) counts as UTC everywhere rather than as the local time in one place.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def posix_seconds(value: Any) -> float | None:
    """`value` as POSIX seconds; None when it is not a time (absent, empty, malformed)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return (when if when.tzinfo is not None else when.replace(tzinfo=UTC)).timestamp()
