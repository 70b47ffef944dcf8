"""Over days, runtimes come and go (teams add and remove ServingRuntimes, namespaces are deleted); what the refresh
keeps must follow the fleet that exists, not every runtime it has ever seen.

Was: the refresh process grew by about 0.7 KB for every runtime that had ever existed (its policy stayed in a
cache of 100,000 entries, keyed by runtime), seen as a refresh process whose RSS rose with every churn cycle of a
cluster-mode adapter. Measured here with tracemalloc over the refresh loop as `serve` runs it, with a source
whose runtimes are replaced whole at each cycle.
"""

from __future__ import annotations

import gc
import tracemalloc

from autoscaler.api.render import SnapshotPublisher
from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot, RuntimeView
from autoscaler.policies.config import PolicyBook
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.base import SourceDefaults

RUNTIMES = 100
ANNOTATIONS = {"autoscaler.modelmesh.io/target-rps-per-pod": "100"}


class ChurningSource(SourceDefaults):
    """`RUNTIMES` runtimes of two fresh pods each; `churn()` replaces them all by new ones."""

    name = "test"
    errors: dict[str, int] = {}

    def __init__(self) -> None:
        self.generation = 0

    def churn(self) -> None:
        self.generation += 1

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        keys = [RuntimeKey(f"team-{self.generation % 3}", f"modelmesh-serving-g{self.generation}-{index}")
                for index in range(RUNTIMES)]
        return [RuntimeSnapshot(key, tuple(PodSample(f"{key.deployment}-{pod}", sampled_at=now - 1,
                                                     requests_per_second=20.0 + pod) for pod in range(2)),
                                taken_at=now, replicas=2, annotations=dict(ANNOTATIONS)) for key in keys]

    async def close(self) -> None:
        return None


async def test_runtimes_that_came_and_went_leave_nothing_behind_in_the_refresh() -> None:
    source = ChurningSource()
    metrics = AdapterMetrics()
    refresher = Refresher(source, PolicyBook(), metrics, interval_s=1, window_s=3)
    refresher.hpa_bounds = lambda key: (1, 10)
    publisher = SnapshotPublisher(metrics)

    async def publish(views: dict[RuntimeKey, RuntimeView]) -> None:
        publisher.snapshot_blob(views, refresher.ready)

    refresher.listeners.append(publish)

    async def cycles(count: int) -> None:
        for _ in range(count):
            source.churn()
            for _ in range(2):
                await refresher.refresh_once()

    tracemalloc.start()
    try:
        await cycles(3)  # caches of fixed size (rendered timestamps, selectors) filled; 100 runtimes live
        gc.collect()
        before = tracemalloc.take_snapshot()
        await cycles(10)  # 1,000 runtimes came and went; 100 exist, as before
        gc.collect()
        grown = sum(stat.size_diff for stat in tracemalloc.take_snapshot().compare_to(before, "filename"))
    finally:
        tracemalloc.stop()
    assert grown < 100_000, f"{grown} bytes kept for 1,000 runtimes that are gone"
