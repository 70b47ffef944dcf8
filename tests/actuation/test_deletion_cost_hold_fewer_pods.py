"""A Deployment that runs fewer pods than its replicas (a quota, an admission webhook or a full node pool kept two
from being created) still waits for its deletion costs: the ReplicaSet removes its pods beyond the replicas
asked, not the Deployment's replicas less the replicas asked.

The reviewer's scenario (s57 on-call, incident b, rt4): 6 replicas, 4 pods, pod PATCH refused 403. The hold
counted the pods to go as 6 - 2 = 4, all the pods there were, so "no choice to get wrong": it let the value fall,
said `deletion costs written` while none was, counted no `expired`, and the ReplicaSet removed 2 of the 4 by the
costs they carried, the busy pod first. Here: 5 replicas, 3 pods, the busiest carrying the lowest cost."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from autoscaler.kube.client import KubeClient
from autoscaler.names import ServedMetric
from tests.actuation.conftest import KEY
from tests.actuation.test_deletion_cost_hold import Cluster, LoadSource, hold_world
from tests.fakes.kube import FakeKubeApi

REPLICAS = 5
"""The Deployment's replicas: two more than the three pods that exist."""
QUIET_A = {"pod-a": 10.0, "pod-b": 220.0, "pod-c": 220.0}  # 450 req/s: 5 or more; pod-a carries the lowest cost
SOME = {"pod-a": 90.0, "pod-b": 60.0, "pod-c": 60.0}  # 210: 3 with headroom, the pods there are: none goes
ONLY_A = {"pod-a": 90.0, "pod-b": 0.0, "pod-c": 0.0}  # 90: 2 with headroom; one of 3 goes, pod-a the one needed
DESIRED = ServedMetric.DESIRED_REPLICAS.value


@pytest.fixture
async def cluster(kube: FakeKubeApi, kube_client: KubeClient, aiohttp_client: Any) -> AsyncIterator[Cluster]:
    async with hold_world(kube, kube_client, aiohttp_client, LoadSource(QUIET_A, REPLICAS)) as world:
        assert await world.served() >= float(REPLICAS)
        assert world.least_needed_in_cluster() == ["pod-a"]
        yield world


async def test_a_scale_down_of_a_deployment_short_of_pods_waits_for_refused_costs(
        cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    """While every pod PATCH is refused 403, the value does not fall to where the ReplicaSet would remove pod-a
    (the busiest, carrying the lowest cost) until the hold's bound; the log never says the costs were written;
    the fall past the bound is counted `expired` and said, naming the 403."""
    caplog.set_level(logging.INFO)
    cluster.kube.fail(r"/pods/pod-[abc]$", status=403, times=None, method="PATCH")
    cluster.source.load = SOME
    for _ in range(2):
        await cluster.refresh()
        assert await cluster.served() == 3.0  # 3 of 3 pods: the ReplicaSet removes none of them
    cluster.source.load = ONLY_A
    await cluster.refresh()
    served = [await cluster.served()]
    await cluster.until(lambda: cluster.refused("pod-a"), "tried pod-a's raise")
    served += await cluster.served_over(6)  # 90 s
    assert cluster.least_needed_in_cluster() == ["pod-a"]  # nothing was written: the busy pod still goes first
    assert served[:3] == [3.0, 3.0, 3.0] and served[-1] == 2.0, served
    written = [r.getMessage() for r in caplog.records if "deletion costs written" in r.getMessage()]
    assert not written, written
    went = [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and "goes ahead with stale" in r.getMessage()]
    assert len(went) == 1 and "refused with 403" in went[0] and KEY.deployment in went[0], went
    counted = await cluster.holds_counted()
    assert counted.get("expired") == 1.0 and counted.get("refused", 0) >= 1.0, counted
