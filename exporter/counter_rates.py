"""The counter window's points and what it serves of them: the running totals at one time (`Totals`), and the
rates over the window between its first and last points (`Rates`, `window_rates`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from exporter.modelmesh_text import CACHE_MISSES, QUEUE_COUNT, QUEUE_SUM_MS, REQUESTS

__all__ = ["Rates", "Totals", "window_rates"]


@dataclass(frozen=True, slots=True)
class Totals:
    """Reset-absorbing cumulative counters (field → total) at one monotonic time."""

    at: float
    values: Mapping[str, float]

    def __getitem__(self, field: str) -> float:
        return self.values.get(field, 0.0)


@dataclass(frozen=True, slots=True)
class Rates:
    """The windowed signals, over `elapsed_s` seconds ending at the latest reading."""

    requests_per_second: float
    queue_delay_s: float
    cache_misses_per_second: float
    elapsed_s: float


def window_rates(history: Sequence[Totals]) -> Rates | None:
    """Rates over the window (or the time since the first reading, if shorter); None before two readings.

    Mean queue delay is Δsum / Δcount of the queue histogram: the mean over the requests queued in the
    window, 0 when none was. A count rises by whole requests; one that rose by a fraction (a garbled read that
    passed as a count, 1e-105) counts as one request, as the ceiling check counts it
    (`counter_ceilings.implausible_step`): divided by the fraction, 1 ms of queue time was published as a
    delay of 1e101 s.
    """
    if len(history) < 2:
        return None
    first, last = history[0], history[-1]
    elapsed = last.at - first.at
    if elapsed <= 0:
        return None
    queued = last[QUEUE_COUNT] - first[QUEUE_COUNT]
    queue_delay_s = (last[QUEUE_SUM_MS] - first[QUEUE_SUM_MS]) / max(queued, 1.0) / 1000.0 if queued > 0 else 0.0
    return Rates(
        requests_per_second=(last[REQUESTS] - first[REQUESTS]) / elapsed,
        queue_delay_s=queue_delay_s,
        cache_misses_per_second=(last[CACHE_MISSES] - first[CACHE_MISSES]) / elapsed,
        elapsed_s=elapsed,
    )
