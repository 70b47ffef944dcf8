"""The clock the slow fall and the warm-up grace run on: time that really passed with the adapter refreshing.

A refresh reads two clocks, for two different questions:

- **Freshness** is a question of the wall clock. An exporter stamps its samples with its node's Unix time, the
  scrape source moves them onto the adapter's clock by the offset it measures (`sources.exposition`), and the
  decision compares them with the refresh's `now` against `max_staleness_s`. That comparison stays right
  through any step of the adapter's clock, because the offset is measured again on every scrape.
- **Decay** (`policies.smoothing`: how far a value may fall) and the warm-up grace (`policies.warmup`) ask how
  long the adapter has watched the runtime. The wall clock cannot answer that: an NTP step, a resumed VM or a
  host clock fix moves it by minutes or hours in one go, and a step an hour forward ended every slow fall in
  one refresh (desired replicas 6 -> 3 for every runtime at once). Nor can the monotonic clock alone: it goes
  on while the adapter is stopped (SIGSTOP, a frozen cgroup, a paused VM), and the first refresh after a
  40 s stop dropped 6 -> 4 on data it had not seen. Time without data earns no decay (docs/design.md, Missing
  data), and a refresh that did not run saw no data.

So this clock advances, from one refresh to the next, by the monotonic time between them, and by at most
`CAP_INTERVALS` refresh intervals: a refresh on time counts in full, one late because a refresh ran long
(a scrape waits up to the interval) counts in full too, and the excess of a longer gap counts nothing. It
starts at the wall clock's reading, so that in a steady run both read alike.

A gap that long is said, and what it is said to be is measured, not guessed from its length: the refresher
tells the clock how long each refresh waited on its metrics source (`waited_on_source`). Prometheus may take up
to two `--prometheus-timeout`s and a second a refresh (`SourceWait.deadline_s`), far more than three intervals
where the timeout is long: a Prometheus that accepts connections and never answers made every refresh 50 s
late at a 50 s timeout, each logged as an adapter stopped or starved of CPU, and the docs then sent the reader
to its CPU limit. The part of a gap spent waiting on the source (up to its deadline: past it, the wait was not
the source's) is the source's; only what is left beyond the cap is a stopped or starved adapter. A run of
refreshes late on the source is said once, naming the source and its timeout, until a refresh is on time.

A wall clock that moved more than `STEP_TOLERANCE_S` further than the monotonic one between two refreshes
has been stepped: logged once, as a WARNING naming the step, because the scrape source then also reports
every exporter's clock off by that much, and that is the adapter's clock, not the nodes'.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

log = logging.getLogger(__name__)

CAP_INTERVALS: Final = 3.0
"""A gap between two refreshes counts for at most this many refresh intervals of running time."""

STEP_TOLERANCE_S: Final = 5.0
"""How far the wall clock may move apart from the monotonic one between two refreshes before it is called a
step: NTP's slewing moves it by at most half a millisecond a second, far below this."""


@dataclass(frozen=True, slots=True)
class SourceWait:
    """The metrics source a refresh waits on, as a late refresh's line names it. `source`: which
    (`Prometheus at URL`); `timeout`: the setting that bounds one wait, as given (`--prometheus-timeout 50 s`);
    `deadline_s`: the longest one read of the source may take (Prometheus's round deadline, two timeouts and a
    second), past which a wait is not the source's."""

    source: str
    timeout: str | None = None
    deadline_s: float = math.inf

    def named(self) -> str:
        """The source and what bounds its wait, as a line says them."""
        if self.timeout is None:
            return self.source
        return f"{self.source} ({self.timeout}; a read is given up after {self.deadline_s:g} s at most)"


@dataclass(frozen=True, slots=True)
class Reading:
    """One refresh's time: `wall` for freshness and what the views say, `running` for decay and grace."""

    wall: float
    running: float


class RunningClock:
    """Reads the wall and monotonic clocks at each refresh and keeps the running clock (module docstring)."""

    def __init__(
        self,
        interval_s: float,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        source: SourceWait = SourceWait("unnamed"),
    ) -> None:
        """`source`: what the refreshes wait on (`waited_on_source`), as a late refresh's line names it."""
        self._source = source
        self._cap_s = CAP_INTERVALS * interval_s
        self._interval_s = interval_s
        self._wall = wall
        self._monotonic = monotonic
        self._last: tuple[float, float, float] | None = None  # (wall, monotonic, running) at the last reading
        self._waited_s = 0.0  # how long the refreshes since the last reading waited on the source
        self._late_on_source = False  # the run of refreshes late on the source is said

    def read(self) -> Reading:
        """The time of a refresh starting now; call it once a refresh."""
        wall, monotonic = self._wall(), self._monotonic()
        if self._last is None:
            running = wall
        else:
            last_wall, last_monotonic, last_running = self._last
            passed = max(0.0, monotonic - last_monotonic)
            step = (wall - last_wall) - passed
            if abs(step) > STEP_TOLERANCE_S:
                log.warning(
                    "the adapter's wall clock stepped %+.0f s between two refreshes %.0f s apart (an NTP step, a "
                    "resumed VM, a clock set by hand): the slow scale-down and the warm-up grace count only the "
                    "time that passed, not the step; exporters' clocks are judged against this one, so lines "
                    "saying they are about %.0f s off may follow. Check this node's time sync", step, passed,
                    abs(step))
            self._say_gap(passed, min(self._waited_s, self._source.deadline_s))
            running = last_running + min(passed, self._cap_s)
        self._last = (wall, monotonic, running)
        self._waited_s = 0.0
        return Reading(wall, running)

    def waited_on_source(self, since: float) -> None:
        """The refresh has its source's answer, asked for at `since` (on `monotonic`): the time between is the
        source's, where a gap before the next reading is judged."""
        self._waited_s += max(0.0, self._monotonic() - since)

    def _say_gap(self, passed: float, on_source: float) -> None:
        """Say a gap past the cap: the adapter's own (stopped, starved) whenever the source does not account for
        it, else the source's, once for a run of late refreshes."""
        if passed - on_source > self._cap_s:
            waited = f" (of it, {on_source:.0f} s at most was a wait on the metrics source)" if on_source >= 1 else ""
            log.warning(
                "no refresh for %.0f s (every %g s expected): the adapter was stopped or starved of CPU%s; values "
                "fall only by what %.0f s of that allows, the rest is time without data", passed, self._interval_s,
                waited, self._cap_s)
        elif passed > self._cap_s:
            if not self._late_on_source:
                log.warning(
                    "no refresh for %.0f s (every %g s expected): the refresh waited %.0f s on the metrics source, "
                    "%s; the adapter itself kept up. The source's own lines say what failed, if anything did; "
                    "refreshes stay this far apart, and the values served this old, while it answers this slowly "
                    "(said once, until a refresh is on time)", passed, self._interval_s, on_source,
                    self._source.named())
            self._late_on_source = True
        else:
            self._late_on_source = False

    def monotonic(self) -> float:
        """The monotonic clock, for scheduling the refreshes (a wall-clock step must not delay one)."""
        return self._monotonic()
