"""Exponential backoff, the one formula every retrying part of the adapter uses.

Each caller adds its own jitter (discovery spreads ±20%, the deletion-cost writer uses "equal jitter"), since
what must not synchronise differs: watches across replicas, patches across pods.
"""

from __future__ import annotations


def exponential_delay(failures: int, initial_s: float, cap_s: float) -> float:
    """`initial_s · 2^(failures-1)`, at most `cap_s`; `failures` counts the failures in a row, from 1."""
    return min(cap_s, initial_s * 2.0 ** min(max(failures, 1) - 1, 30))
