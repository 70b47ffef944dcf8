"""A scale-down in the middle of a rolling update with surge still waits for its deletion costs: the Deployment's
ReplicaSets then run more Ready pods than its replicas (the old ReplicaSet's and the new one's surge pods), and
lowering the replicas removes fewer pods than those beyond the replicas asked.

The reviewer's scenario (s57, rvh `rollout_hidden`): a Deployment at 3 replicas with 5 Ready pods, every pod PATCH
refused 403, the pods carrying 400, 400, 400, 500, 600, and the load moving onto pod-a (one of the three tied
lowest) while 2 is asked. Counting the pods that go as the 5 pods less the 2 asked, the three tied pods all went,
"no choice to get wrong": the value fell to 2 at the first refresh, nothing was held or counted `expired`, and the
Deployment's scale-down could remove pod-a, the busiest."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from autoscaler.kube.client import KubeClient
from autoscaler.names import DELETION_COST_ANNOTATION
from tests.actuation.conftest import KEY
from tests.actuation.test_deletion_cost_hold import Cluster, LoadSource, hold_world
from tests.fakes.kube import FakeKubeApi

REPLICAS = 3
"""The Deployment's replicas, two below the five Ready pods its old and new ReplicaSets run mid-rollout."""
ROLLING = {"pod-a": 10.0, "pod-b": 20.0, "pod-c": 30.0, "pod-d": 80.0, "pod-e": 90.0}  # 230 req/s: 3
MOVED = {"pod-a": 40.0, "pod-b": 5.0, "pod-c": 5.0, "pod-d": 50.0, "pod-e": 50.0}  # 150: 2; pod-a now needed


def carried(kube: FakeKubeApi) -> dict[str, int | None]:
    """The five pods' deletion costs as the ReplicaSets read them."""
    found = {pod: kube.pod_annotations(KEY.namespace, pod).get(DELETION_COST_ANNOTATION) for pod in ROLLING}
    return {pod: None if cost is None else int(cost) for pod, cost in found.items()}


@pytest.fixture
async def cluster(kube: FakeKubeApi, kube_client: KubeClient, aiohttp_client: Any) -> AsyncIterator[Cluster]:
    async with hold_world(kube, kube_client, aiohttp_client, LoadSource(ROLLING, REPLICAS)) as world:
        costs = {pod: cost or 0 for pod, cost in carried(kube).items()}
        assert costs["pod-a"] == costs["pod-b"] == costs["pod-c"] < costs["pod-d"] < costs["pod-e"], costs
        assert await world.served() == float(REPLICAS)
        yield world


async def test_a_scale_down_mid_rollout_waits_for_refused_costs(
        cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    """While every pod PATCH is refused 403, the value does not fall to 2 (which may remove pod-a, now busy and
    tied for the lowest cost) until the hold's bound; the log says it waits, then that it goes ahead naming the
    403; the fall is counted `expired`."""
    caplog.set_level(logging.INFO)
    cluster.kube.fail(r"/pods/pod-[a-e]$", status=403, times=None, method="PATCH")
    cluster.source.load = MOVED
    await cluster.refresh()
    served = [await cluster.served()]
    await cluster.until(lambda: cluster.refused("pod-a"), "tried pod-a's raise")
    served += await cluster.served_over(6)  # 90 s
    assert served[:3] == [3.0, 3.0, 3.0] and served[-1] == 2.0, served
    waits = [r.getMessage() for r in caplog.records
             if r.levelno == logging.WARNING and "scale-down waits for deletion costs" in r.getMessage()]
    assert len(waits) == 1 and "held at 3, not 2" in waits[0], waits
    went = [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and "goes ahead with stale" in r.getMessage()]
    assert len(went) == 1 and "refused with 403" in went[0] and KEY.deployment in went[0], went
    counted = await cluster.holds_counted()
    assert counted.get("expired") == 1.0 and counted.get("refused", 0) >= 1.0, counted
