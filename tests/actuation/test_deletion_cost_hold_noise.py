"""Ordinary load noise, every PATCH accepted: a scale-down waits at most the refresh that hands the writer its
ranking, and nothing blames RBAC (the reviewer's rv3 scenario: three pods at random 40/50/60 req/s held
`modelmesh_desired_replicas` for the full 60 s in 18 of 30 runs, then logged "scale-down goes ahead with stale
deletion costs ... a 403 is a Role without the verb patch").

The real refresher, hold and writer, the writer patching the fake Kubernetes API through the real client; the
tests read what the HPA reads (and act on it as the HPA does), /debug's `held`, and the log."""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest

from autoscaler.actuation.deletion_cost import DeletionCostWriter, WriterSettings
from autoscaler.api.app import build_api_app
from autoscaler.kube.client import KubeClient
from autoscaler.names import ServedMetric
from autoscaler.policies.config import PolicyBook
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.simulation.hpa import (
    DOWNSCALE_STABILIZATION_S,
    SYNC_PERIOD_S,
    HorizontalPodAutoscaler,
    HpaPod,
    HpaSpec,
    MetricSpec,
)
from tests.actuation.conftest import SteppedClock, add_pods
from tests.actuation.test_deletion_cost_hold import PODS, POLICY, T0, Cluster, LoadSource
from tests.fakes.kube import FakeKubeApi

REFRESHES = 12  # three minutes: three of the writer's per-pod minutes
RUNS = 8
WINDOW_SYNCS = int(DOWNSCALE_STABILIZATION_S // SYNC_PERIOD_S)


class NoisyCluster(Cluster):
    """The adapter over the fake API whose three pods each take 40, 50 or 60 req/s at random at every refresh:
    150 req/s about, 2 replicas at 100 a pod while 3 run. The writer's pass runs after each refresh (`written`)."""

    def __init__(self, cluster: Cluster, writer: DeletionCostWriter, seed: int) -> None:
        super().__init__(cluster.kube, cluster.api, cluster.refresher, cluster.source, cluster.clock)
        self.writer = writer
        self.noise = random.Random(seed)

    async def noisy_refresh(self) -> None:
        self.source.load = {pod: self.noise.choice([40.0, 50.0, 60.0]) for pod in PODS}
        await self.refresh(SYNC_PERIOD_S)

    async def held(self) -> bool:
        """Whether /debug says `modelmesh_desired_replicas` is held for its deletion costs."""
        return ServedMetric.DESIRED_REPLICAS.value in (await self.debug())["held"]

    async def written(self) -> None:
        await self.writer.sync()


StartNoisy = Callable[[int], AbstractAsyncContextManager[NoisyCluster]]
"""Starts an adapter under load noise whose random loads come from the seed given."""


@pytest.fixture
def noisy_cluster(kube: FakeKubeApi, kube_client: KubeClient, aiohttp_client: Any) -> StartNoisy:
    """Starts, per run, an adapter whose pods all took 90 req/s (3 replicas, their costs written) until now."""
    add_pods(kube, PODS)

    @asynccontextmanager
    async def start(seed: int) -> AsyncIterator[NoisyCluster]:
        clock = SteppedClock(T0)
        source = LoadSource()
        metrics = AdapterMetrics()
        refresher = Refresher(source, PolicyBook(POLICY), metrics, clock=clock, monotonic=clock)
        writer = DeletionCostWriter(kube_client, metrics, settings=WriterSettings(qps=None), clock=clock,
                                    rand=lambda: 1.0)
        refresher.cost_writes = writer  # as the actuator wires it; the writer's pass runs after each refresh
        api = await aiohttp_client(build_api_app(refresher, metrics))
        source.load = dict.fromkeys(PODS, 90.0)
        await refresher.refresh_once()
        await writer.sync()
        try:
            yield NoisyCluster(Cluster(kube, api, refresher, source, clock), writer, seed)
        finally:
            await api.close()

    return start


async def test_load_noise_holds_a_scale_down_no_longer_than_a_refresh_and_warns_of_nothing(
        noisy_cluster: StartNoisy, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    longest: list[int] = []
    for run in range(RUNS):
        async with noisy_cluster(run) as cluster:
            held_for = held_longest = 0
            for _ in range(REFRESHES):
                await cluster.noisy_refresh()
                await cluster.served()
                held_for = held_for + 1 if await cluster.held() else 0
                held_longest = max(held_longest, held_for)
                await cluster.written()
            longest.append(held_longest)
    assert max(longest) <= 1, f"refreshes held in a row, per run: {longest}"
    said = [r.getMessage() for r in caplog.records
            if r.name == "autoscaler.ranking_hold" and r.levelno >= logging.WARNING]
    assert said == [], said


async def test_under_load_noise_an_hpa_with_the_default_scale_down_stabilization_scales_down_after_its_window(
        noisy_cluster: StartNoisy) -> None:
    """The HPA's default scale-down stabilization keeps the highest recommendation of the last 300 s: a value
    held back up to the replicas that run at any refresh of the window starts the wait again. Under ordinary
    noise only the refresh where the scale-down starts may hold (the writer has not had its ranking), so the HPA
    lowers the replicas one window after it: a hold at every third or fourth refresh (a ranking that turned by a
    bucket, the writer leaving it to the per-pod minute) kept 3 replicas running for good."""
    metric = ServedMetric.DESIRED_REPLICAS.value
    pods = [HpaPod(pod, ready=True) for pod in PODS]
    scaled_at: list[int | None] = []
    for run in range(RUNS):
        hpa = HorizontalPodAutoscaler(HpaSpec((MetricSpec(metric, "External", "AverageValue", 1.0),)))
        async with noisy_cluster(run) as cluster:
            assert hpa.sync(cluster.clock(), 3, pods, {metric: await cluster.served()}).desired == 3
            scaled_at.append(None)
            for sync in range(1, 2 * WINDOW_SYNCS):
                await cluster.noisy_refresh()
                if hpa.sync(cluster.clock(), 3, pods, {metric: await cluster.served()}).desired < 3:
                    scaled_at[-1] = sync
                    break
                await cluster.written()
    # The first noisy refresh may hold; the window then runs from the second.
    assert all(at is not None and at <= WINDOW_SYNCS + 2 for at in scaled_at), (
        f"the HPA's sync that scaled 3 -> 2, per run (None: never within {2 * WINDOW_SYNCS}): {scaled_at}")
