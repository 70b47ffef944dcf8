"""Exponential backoff, the one formula every retrying part of the adapter uses.

Jitter depends on what must not synchronise: list + watch loops across replicas spread their delay ±20%
(`spread_delay`); the writers (deletion costs, the replica bridge), whose retries must not line up across pods
and objects, use "equal jitter" and honour the server's Retry-After (`retry_delay`).
"""

from __future__ import annotations

import random


def exponential_delay(failures: int, initial_s: float, cap_s: float) -> float:
    """`initial_s · 2^(failures-1)`, at most `cap_s`; `failures` counts the failures in a row, from 1."""
    return min(cap_s, initial_s * 2.0 ** min(max(failures, 1) - 1, 30))


def retry_delay(failures: int, initial_s: float, cap_s: float, draw: float, retry_after_s: float | None) -> float:
    """"Equal jitter": half of `exponential_delay` fixed, half spread by `draw` (uniform in [0, 1), from the
    caller's injectable random source); never sooner than the server's `Retry-After`."""
    delay = exponential_delay(failures, initial_s, cap_s)
    return max(delay / 2 + delay / 2 * draw, retry_after_s or 0.0)


def spread_delay(failures: int, initial_s: float, cap_s: float) -> float:
    """`exponential_delay` spread uniformly over ±20%, so replicas that lost the API server together do not
    come back to it in step."""
    return exponential_delay(failures, initial_s, cap_s) * (0.8 + 0.4 * random.random())
