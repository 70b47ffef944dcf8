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
(a scrape waits up to the interval) counts in full too, and a longer gap is a stopped or starved adapter
whose excess counts nothing. It starts at the wall clock's reading, so that in a steady run both read alike.

A wall clock that moved more than `STEP_TOLERANCE_S` further than the monotonic one between two refreshes
has been stepped: logged once, as a WARNING naming the step, because the scrape source then also reports
every exporter's clock off by that much, and that is the adapter's clock, not the nodes'.
"""

from __future__ import annotations

import logging
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
    ) -> None:
        self._cap_s = CAP_INTERVALS * interval_s
        self._interval_s = interval_s
        self._wall = wall
        self._monotonic = monotonic
        self._last: tuple[float, float, float] | None = None  # (wall, monotonic, running) at the last reading

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
            if passed > self._cap_s:
                log.warning(
                    "no refresh for %.0f s (every %g s expected): the adapter was stopped or starved of CPU; values "
                    "fall only by what %.0f s of that allows, the rest is time without data", passed,
                    self._interval_s, self._cap_s)
            running = last_running + min(passed, self._cap_s)
        self._last = (wall, monotonic, running)
        return Reading(wall, running)

    def monotonic(self) -> float:
        """The monotonic clock, for scheduling the refreshes (a wall-clock step must not delay one)."""
        return self._monotonic()
