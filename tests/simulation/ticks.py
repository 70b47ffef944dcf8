"""Serving a simulated runtime tick by tick, as the engine does between routings."""

from __future__ import annotations

from autoscaler.simulation.cluster import Cluster


def delayed_over(cluster: Cluster, start: float, ticks: int) -> float:
    """The requests delayed in `ticks` ticks served from `start` (those counted waiting for a load included)."""
    return sum(cluster.step(start + cluster.tick_s * k).delayed for k in range(ticks))
