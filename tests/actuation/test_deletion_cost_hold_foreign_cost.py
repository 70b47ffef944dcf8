"""A deletion cost set on a pod by another writer after the leader's write: `kubectl annotate pod ...
controller.kubernetes.io/pod-deletion-cost=-1000 --overwrite` (to drain it first), or another tool that writes
the annotation. The leader trusted its own last write over the pod watch until the pod's 5-minute check, so the
ranking hold took the busiest pod's cost for in place: `modelmesh_desired_replicas` fell and the ReplicaSet,
reading the costs on the pods, removed the busiest pod. A cost on the pod that this replica did not write counts
as not written: the scale-down waits while it is written again.

The real refresher, writer and discovery's pod watch over the fake Kubernetes API, time stepped; the test reads
what the HPA reads (the API's answer) and the pods' annotations the ReplicaSet picks by."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from autoscaler.actuation.deletion_cost import DeletionCostWriter, WriterSettings
from autoscaler.api.app import build_api_app
from autoscaler.kube.client import KubeClient
from autoscaler.names import DELETION_COST_ANNOTATION
from autoscaler.policies.config import PolicyBook
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.kube_pods import KubePodDiscovery
from tests.actuation.conftest import KEY, SteppedClock
from tests.actuation.test_deletion_cost_hold import BEFORE, POLICY, T0, Cluster, LoadSource
from tests.actuation.test_deletion_cost_recreated_pod import watching
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

FALLEN = {"pod-a": 90.0, "pod-b": 10.0, "pod-c": 50.0}  # 150 req/s at 100 a pod: 2; pod-b the least needed


def annotate(kube: FakeKubeApi, pod: str, cost: str) -> None:
    """Another writer's `kubectl annotate pod POD controller.kubernetes.io/pod-deletion-cost=COST --overwrite`."""
    kube.update_object("pods", KEY.namespace, pod,
                       lambda o: o["metadata"].setdefault("annotations", {}).update({DELETION_COST_ANNOTATION: cost}))


@contextlib.asynccontextmanager
async def fighting(kube: FakeKubeApi, pod: str, cost: str) -> AsyncIterator[None]:
    """Another tool that puts `cost` back on `pod` within milliseconds of any other value (a self-healing
    controller), for as long as the block runs."""
    async def fight() -> None:
        while True:
            if kube.pod_annotations(KEY.namespace, pod).get(DELETION_COST_ANNOTATION) != cost:
                annotate(kube, pod, cost)
            await asyncio.sleep(0.005)

    fighter = asyncio.create_task(fight())
    try:
        yield
    finally:
        fighter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await fighter


@contextlib.asynccontextmanager
async def leader(kube: FakeKubeApi, kube_client: KubeClient, aiohttp_client: Any,
                 watch: KubePodDiscovery) -> AsyncIterator[Cluster]:
    """The leading adapter over `BEFORE`'s three pods, its writer reading the pod watch as `serve` wires it, its
    first costs on the pods and in the watch."""
    clock = SteppedClock(T0)
    metrics = AdapterMetrics()
    source = LoadSource()
    refresher = Refresher(source, PolicyBook(POLICY), metrics, clock=clock, monotonic=clock)
    writer = DeletionCostWriter(kube_client, metrics, settings=WriterSettings(qps=None), clock=clock,
                                rand=lambda: 1.0, cluster=watch)
    refresher.cost_writes = writer
    task = asyncio.create_task(writer.run())
    try:
        world = Cluster(kube, await aiohttp_client(build_api_app(refresher, metrics)), refresher, source, clock,
                        writer)
        await world.refresh(0.0)
        await eventually(lambda: all(watch.deletion_cost(KEY.namespace, pod) is not None for pod in BEFORE))
        yield world
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.asynccontextmanager
async def fight_over_the_busiest_pod(kube: FakeKubeApi, kube_client: KubeClient,
                                     aiohttp_client: Any) -> AsyncIterator[tuple[Cluster, KubePodDiscovery]]:
    """Where the fights start: the leader's first costs a minute old, another tool putting -1000 back on pod-a
    (the busiest) within milliseconds of any other value, the watch showing it, and the load just fallen (3 to
    2 replicas, pod-b the least needed). The tool gives up when the block ends. Yields the leader and the pod
    watch its writer reads."""
    async with watching(kube, list(BEFORE)) as watch, leader(kube, kube_client, aiohttp_client, watch) as cluster:
        cluster.clock.advance(60.0)
        async with fighting(kube, "pod-a", "-1000"):
            await eventually(lambda: watch.deletion_cost(KEY.namespace, "pod-a") == "-1000")
            cluster.source.load = FALLEN
            yield cluster, watch


async def fought_back(cluster: Cluster, watch: KubePodDiscovery) -> None:
    """Wait for the writer's pass the last refresh woke, then for the tool's -1000 back on pod-a and in `watch`
    (what the writer reads): what the next refresh meets. A fixed 50 ms let a loaded machine's pass, its PATCH
    sent late, be answered a refresh late."""
    await cluster.written()
    await eventually(lambda: cluster.costs()["pod-a"] == -1000
                     and watch.deletion_cost(KEY.namespace, "pod-a") == "-1000")


async def test_a_cost_another_writer_set_on_the_busiest_pod_holds_the_scale_down_until_written_again(
        kube: FakeKubeApi, kube_client: KubeClient, aiohttp_client: Any) -> None:
    async with watching(kube, list(BEFORE)) as watch, leader(kube, kube_client, aiohttp_client, watch) as cluster:
        assert await cluster.served() == 3.0 and cluster.least_needed_in_cluster() == ["pod-b"]
        cluster.clock.advance(60.0)  # the leader's writes are a minute old
        annotate(kube, "pod-a", "-1000")  # the busiest pod, drained first by hand
        await eventually(lambda: watch.deletion_cost(KEY.namespace, "pod-a") == "-1000")

        cluster.source.load = FALLEN
        seen = []
        for _ in range(4):  # a minute
            await cluster.refresh()
            await cluster.written()
            served = await cluster.served()
            seen.append((served, cluster.costs()))
            # what the ReplicaSet removes when the HPA follows: the pod carrying the lowest cost
            assert served == 3.0 or cluster.least_needed_in_cluster() == ["pod-b"], seen
        await eventually(lambda: watch.deletion_cost(KEY.namespace, "pod-a") != "-1000")
        assert cluster.least_needed_in_cluster() == ["pod-b"], seen
        await cluster.refresh()
        assert await cluster.served() == 2.0, seen  # written again: the scale-down goes, taking pod-b


async def test_a_writer_that_puts_its_cost_back_after_each_write_holds_no_longer_than_the_bound_and_is_said(
        kube: FakeKubeApi, kube_client: KubeClient, aiohttp_client: Any, caplog: pytest.LogCaptureFixture) -> None:
    """Another tool puts -1000 back on the busiest pod within milliseconds of each write: the watch shows it
    again a moment after the leader's write, which is not the watch's lag for long. The scale-down waits its
    minute with pod-a written again at each refresh, then goes ahead saying so (as for a refused write)."""
    caplog.set_level(logging.INFO)
    async with fight_over_the_busiest_pod(kube, kube_client, aiohttp_client) as (cluster, watch):
        served = []
        for _ in range(6):  # 90 s
            await cluster.refresh()
            await fought_back(cluster, watch)
            served.append(await cluster.served())
    assert served[:4] == [3.0] * 4 and served[-1] == 2.0, served
    assert cluster.patched("pod-a") >= 3, "pod-a written again while held"
    went = [r.getMessage() for r in caplog.records if "goes ahead with stale" in r.getMessage()]
    assert len(went) == 1 and "pod-a" in went[0], went
