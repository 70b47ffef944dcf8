"""The `Trace`: a request trace's rows as arrays, what the replay, the report and every check read. Made by
`trace.read_csv` (a file) or `trace_grid.from_rows` (lists), by the synthetic generator, and by `replace` where a
reading changes it (rows split or left out); imported through `autoscaler.simulation.trace`, as before it had a
module of its own, which it has so that the modules that read rows into one need not import the file's reading.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Trace:
    """Rows as arrays: interval index from `start_s`, model index into `models`, and requests."""

    models: tuple[str, ...]
    start_s: float
    interval_s: float
    intervals: int
    slot: np.ndarray  # int64 interval index of each row
    model: np.ndarray  # int64 model index of each row
    requests: np.ndarray  # float64 requests of each row
    notes: tuple[str, ...] = ()  # what a user should know of how the file was read (columns left out)

    @property
    def duration_s(self) -> float:
        return self.intervals * self.interval_s

    @property
    def total_requests(self) -> float:
        return float(self.requests.sum())

    def rate_per_interval(self) -> np.ndarray:
        """Total requests per second in each interval."""
        return np.bincount(self.slot, weights=self.requests, minlength=self.intervals) / self.interval_s
