"""How the simulator replays a trace: in *buckets*, the trace's own intervals when they are at least one tick long
(requests spread evenly within each), else ticks that add several intervals up."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np

from autoscaler.simulation.rate_check import RATE_CHECK_S
from autoscaler.simulation.trace import Trace
from autoscaler.simulation.trace_file import TraceError


@dataclass(frozen=True, slots=True)
class Bucket:
    """What arrives in one bucket: per model with requests, the rate in requests per second."""

    models: list[int]
    rates: list[float]


def fitting_tick(interval_s: float, tick_s: float) -> float:
    """The tick nearest `tick_s` (the larger on a tie) that divides `interval_s` or that it divides, at most
    ModelMesh's rate check (longer ticks are warned about), for the message that asks for one."""
    candidates = {round(interval_s * k, 6) for k in range(1, 601)} | {round(interval_s / k, 6) for k in range(1, 601)}
    fitting = [t for t in candidates if 0.001 <= t <= RATE_CHECK_S]
    whole = [t for t in fitting if t == int(t)] or fitting  # a whole number of seconds where one fits
    return min(whole or [interval_s], key=lambda t: (abs(t - tick_s), -t))


def buckets(trace: Trace, tick_s: float) -> tuple[float, Buckets]:
    """(bucket length in seconds, buckets in time order) for replay with ticks of `tick_s`. Where a tick adds
    several intervals up and the trace is no whole number of ticks long, the last bucket holds the intervals
    left, its requests spread over the whole tick: the replay counts pods only up to the trace's end
    (`engine.simulate`'s `duration_s`)."""
    ratio = trace.interval_s / tick_s
    if ratio >= 1.0:
        if abs(ratio - round(ratio)) > 1e-9:
            raise TraceError(f"the trace interval ({trace.interval_s:g} s) is not a multiple of --tick "
                             f"({tick_s:g} s); choose a --tick that divides it, e.g. --tick "
                             f"{fitting_tick(trace.interval_s, tick_s):g}")
        length, group = trace.interval_s, 1
    else:
        inverse = tick_s / trace.interval_s
        if abs(inverse - round(inverse)) > 1e-9:
            raise TraceError(f"--tick ({tick_s:g} s) is not a multiple of the trace interval "
                             f"({trace.interval_s:g} s); choose a --tick that it divides, e.g. --tick "
                             f"{fitting_tick(trace.interval_s, tick_s):g}")
        length, group = tick_s, round(inverse)
    count = math.ceil(trace.intervals / group)
    key = trace.slot // group
    key *= len(trace.models)
    key += trace.model
    order = np.argsort(key, kind="stable")
    key = key[order]  # sorted: each (bucket, model) starts where the key changes
    first = np.flatnonzero(np.diff(key, prepend=-1))
    sums = np.add.reduceat(trace.requests[order], first) if len(first) else np.zeros(0)
    busy = sums > 0.0
    uniq, sums = key[first[busy]], sums[busy]
    bounds = np.searchsorted(uniq // len(trace.models), np.arange(count + 1))
    return length, Buckets(bounds, uniq % len(trace.models), sums / length)


class Buckets(Sequence[Bucket]):
    """The replay's buckets as packed arrays, each Bucket made when the replay reaches it: made all at once and
    kept for every policy, a week of 2,000 models at 60 s took 1.6 GB of Python numbers."""

    def __init__(self, bounds: np.ndarray, models: np.ndarray, rates: np.ndarray) -> None:
        self._bounds, self._models, self._rates = bounds.tolist(), models, rates

    def __len__(self) -> int:
        return len(self._bounds) - 1

    @overload
    def __getitem__(self, index: int) -> Bucket: ...

    @overload
    def __getitem__(self, index: slice) -> list[Bucket]: ...

    def __getitem__(self, index: int | slice) -> Bucket | list[Bucket]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        index %= len(self)
        a, b = self._bounds[index], self._bounds[index + 1]
        return Bucket(self._models[a:b].tolist(), self._rates[a:b].tolist())

    def __iter__(self) -> Iterator[Bucket]:
        return (self[i] for i in range(len(self)))
