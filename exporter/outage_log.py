"""When an outage of something read over and over (ModelMesh, NVML, Prometheus) gets a log line, and what it says
of the outages that got none.

A reader failing every other read logged two lines a flap ("failed", then "recovered"): some 17,000 a day at a
5 s interval. So an outage that starts again for the same reason within `quiet_s` of the last line is only
counted, and its recovery is not logged either; one that lasts past `quiet_s` gets its line then, and a line
says how many outages since the one before it failed and recovered without a line of their own. Those are
counted when they recover: an outage quiet at its start that lasts is the next line's own, not one of the flaps
before it.

The exporter's collectors (`exporter.collectors.health`) and the adapter's Prometheus source share it, so that
both count flaps alike; each writes its own lines, and decides what else in an outage is worth one.
"""

from __future__ import annotations

import math


class OutageLog:
    """One reader's outages: whether one is going on, whether it has had its line, and the flaps since the last."""

    def __init__(self, quiet_s: float) -> None:
        self.quiet_s = quiet_s
        self.since: float | None = None
        """When the current outage began; None while the reader works."""
        self.logged = False
        """Whether the current outage has had its line (and so its recovery gets one)."""
        self.logged_at = -math.inf
        """When the last outage line was written, and for what reason."""
        self.logged_reason: str | None = None
        self._unlogged = 0  # outages since that line that failed and recovered without one (flaps)

    def failed(self, reason: str, now: float) -> bool:
        """Note a failure (starting an outage if none is going on); True when the outage has had no line and this
        failure is no flap, so its line is due: its reason is not the last line's, or that line is `quiet_s` old."""
        if self.since is None:
            self.since, self.logged = now, False
        return not self.logged and not (reason == self.logged_reason and self.recent(now))

    def recent(self, now: float) -> bool:
        """Whether the last outage line was written less than `quiet_s` ago."""
        return now - self.logged_at < self.quiet_s

    def line_written(self, reason: str, now: float) -> str:
        """Note that a line about the outage is written now, for `reason`; returns what it ends with: how many
        outages since the last line failed and recovered without one (empty when none did)."""
        more = ""
        if self._unlogged:
            more = (f" (it failed {self._unlogged} more times since the last line {now - self.logged_at:.0f} s ago, "
                    "recovering in between)")
        self.logged_at, self.logged_reason, self.logged, self._unlogged = now, reason, True, 0
        return more

    def recovered(self) -> bool:
        """End the outage, if one is going on; True when it had a line, so its recovery gets one too. One that had
        none is counted for the next line."""
        had_line = self.since is not None and self.logged
        if self.since is not None and not self.logged:
            self._unlogged += 1
        self.since, self.logged = None, False
        return had_line
