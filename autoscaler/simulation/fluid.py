"""Fluid arithmetic of the simulated runtime: spreading a rate over copies, and queues within a tick."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Protocol, TypeVar


class Loaded(Protocol):
    rate: float


L = TypeVar("L", bound=Loaded)

_RATE = attrgetter("rate")
"""The sort key of `water_fill`: a routing calls it for every model held twice or more, each bucket (a day of
200 models: 676,000 calls), where a lambda's call cost more than the sort."""


def water_fill(holders: Sequence[L], rate: float) -> list[L]:
    """Water-fill `rate` over the holders, the least busy first until they are level; the pods that took some."""
    pods = sorted(holders, key=_RATE)
    total = 0.0
    level = 0.0
    k = 0
    n = len(pods)
    for k, pod in enumerate(pods, start=1):
        total += pod.rate
        level = (total + rate) / k
        if k == n or level <= pods[k].rate:
            break
    took = pods[:k]
    for pod in took:
        pod.rate = level if level > pod.rate else pod.rate
    return took


def share_over_threshold(b0: float, slope: float, t: float, threshold: float) -> float:
    """Share of a tick in which a queue starting at `b0` and changing at `slope` per second exceeds
    `threshold` (the queue is floored at 0, which only matters below the threshold)."""
    if slope > 0.0:
        if b0 >= threshold:
            return 1.0
        cross = (threshold - b0) / slope
        return 0.0 if cross >= t else 1.0 - cross / t
    if b0 <= threshold:
        return 0.0
    if slope == 0.0:
        return 1.0
    cross = (b0 - threshold) / -slope
    return 1.0 if cross >= t else cross / t
