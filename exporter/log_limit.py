"""At most one log line per cause per interval, saying how many were left out since the last one.

Shared by the adapter (its review failures, malformed requests, refused handshakes) and the exporter (its
refused clients, `exporter.refusal_log`).

A failure that every request meets (a malformed request flood; the Kubernetes API down, so no TokenReview or
SubjectAccessReview can be made) would otherwise write one line per request: an outage of a minute at a few
requests a second is hundreds of identical lines that bury the first one and fill the disk. One line a
minute per cause says it is still going on; the count of the lines left out says how much.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable

INTERVAL_S = 60.0
"""One line a minute per cause is enough to see that it goes on; more only costs disk."""
MAX_CAUSES = 64
"""Causes remembered at once; past it, those whose interval is over are forgotten (their next line is logged
at once, as it would be anyway), so a cause named by its caller cannot grow the table without bound."""


class LogLimiter:
    """Decides whether a line about `cause` is logged now (`admit`)."""

    def __init__(self, interval_s: float = INTERVAL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._next_at: dict[Hashable, float] = {}
        self._suppressed: dict[Hashable, int] = {}

    def admit(self, cause: Hashable = None) -> int | None:
        """None: a line about `cause` was logged less than an interval ago, leave this one out (it is counted).
        Else log it: how many lines about `cause` were left out since the last one logged."""
        now = self._clock()
        next_at = self._next_at.get(cause)
        if next_at is not None and now < next_at:
            self._suppressed[cause] = self._suppressed.get(cause, 0) + 1
            return None
        if next_at is None and len(self._next_at) >= MAX_CAUSES:
            self._forget_past(now)
        self._next_at[cause] = now + self.interval_s
        return self._suppressed.pop(cause, 0)

    def note(self, suppressed: int) -> str:
        """What a logged line adds about the lines left out before it (empty when none were)."""
        return f" ({suppressed} more in the last {self.interval_s:.0f} s not logged)" if suppressed else ""

    def _forget_past(self, now: float) -> None:
        for cause in [c for c, at in self._next_at.items() if at <= now]:
            del self._next_at[cause]
            self._suppressed.pop(cause, None)
