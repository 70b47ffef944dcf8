"""Two replicas on one Lease (the shipped Deployment runs 2), each with its own refresher and writer over the one
fake Kubernetes API, the replica not leading judging by real discovery's pod watch, time stepped. Cost PATCHes
are refused 403 throughout and the load turns (pod-b, carrying the lowest cost, becomes the most needed) as the
recommendation falls from 3 to 2: every replica holds, then lets the value fall past the bound. What Prometheus
scrapes from both replicas' /metrics, summed as `ModelMeshScaleDownWithStaleDeletionCosts` sums it, must read one
scale-down gone ahead with stale costs, whether the Lease stays, moves to the other replica mid-hold with the first
alive (it lost its renewal), or moves because the leader died."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from autoscaler.actuation.deletion_cost import DeletionCostWriter, WriterSettings
from autoscaler.api.app import build_api_app
from autoscaler.kube.client import KubeClient
from autoscaler.names import ServedMetric
from autoscaler.policies.config import PolicyBook
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.kube_pods import KubePodDiscovery
from tests.actuation.conftest import KEY, SteppedClock, caught_up
from tests.actuation.test_deletion_cost_hold import AFTER, PODS, POLICY, LoadSource, holds_counted
from tests.actuation.test_deletion_cost_recreated_pod import watching
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

T0 = 1_700_000_000.0


@dataclass
class Replica:
    """One adapter replica: its refresher, its writer and its task, its API (what the HPA and Prometheus
    read)."""

    refresher: Refresher
    writer: DeletionCostWriter
    api: TestClient[Any, Any]
    task: asyncio.Task[None]

    def served(self) -> float | None:
        return self.refresher.views[KEY].values[ServedMetric.DESIRED_REPLICAS].value


@pytest.fixture
async def pod_watch(kube: FakeKubeApi) -> AsyncIterator[KubePodDiscovery]:
    """Real discovery over the fake API: the pods' annotations as a replica not leading sees them."""
    async with watching(kube, PODS) as subject:
        yield subject


@pytest.mark.parametrize("lease", ["stays", "moves", "leader dies"])
async def test_one_stale_scale_down_is_counted_once_across_two_replicas(
        kube: FakeKubeApi, kube_client: KubeClient, pod_watch: KubePodDiscovery, aiohttp_client: Any, lease: str,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    clock = SteppedClock(T0)
    leading = {"A": True, "B": False}
    sources = {name: LoadSource() for name in leading}
    replicas: dict[str, Replica] = {}
    for name, source in sources.items():
        metrics = AdapterMetrics()
        refresher = Refresher(source, PolicyBook(POLICY), metrics, clock=clock, monotonic=clock)
        writer = DeletionCostWriter(kube_client, metrics, settings=WriterSettings(qps=None), clock=clock,
                                    rand=lambda: 1.0, may_write=functools.partial(leading.__getitem__, name),
                                    cluster=pod_watch)
        refresher.cost_writes = writer
        api = await aiohttp_client(build_api_app(refresher, metrics))
        replicas[name] = Replica(refresher, writer, api, asyncio.create_task(writer.run()))
    alive = dict(replicas)

    async def refresh() -> None:
        for replica in alive.values():
            await replica.refresher.refresh_once()
        await eventually(lambda: all(caught_up(replica.writer) for replica in alive.values()))  # writers' passes

    try:
        await refresh()
        await eventually(lambda: all(pod_watch.deletion_cost(KEY.namespace, pod) for pod in PODS))
        kube.fail(r"/pods/", status=403, times=None, method="PATCH")
        for source in sources.values():
            source.load = AFTER
        served = []
        for step in range(8):  # 120 s
            if step == 2:  # 30 s into the hold
                if lease != "stays":
                    leading["A"], leading["B"] = False, True
                    replicas["B"].writer.wake()
                if lease == "leader dies":
                    alive.pop("A").task.cancel()
            clock.advance(15.0)
            await refresh()
            served.append({name: replica.served() for name, replica in alive.items()})
        assert served[0] == {"A": 3.0, "B": 3.0} and all(now == 2.0 for now in served[-1].values()), served
        expired = [(await holds_counted(replica.api)).get("expired", 0.0) for replica in replicas.values()]
        assert sum(expired) == 1.0, f"expired as each replica's /metrics counts it: {expired}"
    finally:
        for replica in replicas.values():
            replica.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await replica.task
