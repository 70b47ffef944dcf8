"""A scale-down held for its deletion costs across a Lease hand-over, with real processes: two adapter replicas in
cluster mode on one Lease over the fake Kubernetes API, cost PATCHes refused 403 (a Role without `patch` on
pods), the load turned so that the pod carrying the lowest cost is the most needed as the recommendation falls.
The leader freezes mid-hold (SIGSTOP past its Lease, as a node under memory pressure) and comes back a follower.
Both replicas let the value fall past the bound; their /metrics, summed as ModelMeshScaleDownWithStaleDeletionCosts
sums them, must read the one scale-down once (each counted it: 2)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from tests.e2e.cluster_pods import start_pod
from tests.e2e.test_adapter_rollout import DEPLOYMENT, NS, SELECTOR, Cluster, answer, costs, holder, ready, until
from tests.fakes.kube import FakeKubeApi
from tests.support.processes import free_port
from tests.support.quantities import quantity_value

pytestmark = pytest.mark.slow

PODS = {"triton-hot": ("127.0.0.61", 150.0), "triton-warm": ("127.0.0.62", 100.0),
        "triton-idle": ("127.0.0.63", 30.0)}
RANKED_AGAIN = {"triton-hot": 0.0, "triton-warm": 150.0, "triton-idle": 150.0}  # the ranking turns, 3 pods still
FALLEN = {"triton-hot": 0.0, "triton-warm": 5.0, "triton-idle": 70.0}  # 2 pods, triton-idle now the most needed
METRIC = (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{NS}/modelmesh_desired_replicas"
          f"?labelSelector=deployment%3D{DEPLOYMENT}")
HOLDS = "modelmesh_autoscaler_scale_down_holds_total"


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[tuple[Cluster, dict[str, FakeModelMesh]]]:
    runners: list[web.AppRunner] = []
    meshes: dict[str, FakeModelMesh] = {}
    async with FakeKubeApi() as kube:
        kube.add_deployment(NS, DEPLOYMENT, replicas=len(PODS), labels=SELECTOR, selector=SELECTOR,
                            annotations={"autoscaler.modelmesh.io/target-rps-per-pod": "100",
                                         "autoscaler.modelmesh.io/scale-down-tau-s": "0"})
        cluster = Cluster(kube, tmp_path, free_port())
        with contextlib.ExitStack() as stack:
            try:
                for name, (ip, rps) in PODS.items():
                    meshes[name] = FakeModelMesh(ModelMeshLoad(requests_per_second=rps))
                    runners.append(await start_pod(stack, kube, meshes[name], namespace=NS, name=name, ip=ip,
                                                   labels=SELECTOR, exporter_port=cluster.exporter_port,
                                                   logs=tmp_path))
                yield cluster, meshes
            finally:
                for replica in cluster.replicas:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(replica.process.pid, signal.SIGCONT)
                    await replica.stop(signal.SIGKILL)
                for runner in runners:
                    await runner.cleanup()


async def counted(url: str, reason: str) -> float:
    """`modelmesh_autoscaler_scale_down_holds_total{reason=...}` as Prometheus scrapes it."""
    code, body = await answer(url + "/metrics")
    assert code == 200, body
    return sum(sample.value for family in text_string_to_metric_families(body) for sample in family.samples
               if sample.name == HOLDS and sample.labels["reason"] == reason)


async def served(url: str) -> float | None:
    """What the HPA reads from the replica, in replicas (None: no value)."""
    code, body = await answer(url + METRIC)
    found = re.search(r'"value": ?"([^"]+)"', body) if code == 200 else None
    if found is None:
        return None
    quantity = found.group(1)
    return quantity_value(quantity)


async def test_a_scale_down_gone_ahead_across_a_hand_over_is_counted_once(
        world: tuple[Cluster, dict[str, FakeModelMesh]]) -> None:
    cluster, meshes = world
    kube = cluster.kube
    replicas = [await cluster.start_replica("--bridge", "off") for _ in range(2)]
    for replica in replicas:
        await ready(replica)
    await until(lambda: holder(kube) is not None and all(costs(kube).values()), 60, "the first costs written")
    leader = next(replica for replica in replicas if replica.identity == holder(kube))
    follower = next(replica for replica in replicas if replica is not leader)
    kube.fail(r"/pods/", status=403, times=None, method="PATCH")
    for name, rps in RANKED_AGAIN.items():
        meshes[name].update(requests_per_second=rps)
    await asyncio.sleep(8)
    for name, rps in FALLEN.items():
        meshes[name].update(requests_per_second=rps)
    deadline = time.monotonic() + 30
    while not await counted(leader.url, "refused"):  # held, its writes refused
        assert time.monotonic() < deadline, "the leader never held the scale-down"
        await asyncio.sleep(0.5)
    os.kill(leader.process.pid, signal.SIGSTOP)  # mid-hold: past its Lease, the follower takes it
    await until(lambda: holder(kube) == follower.identity, 60, "the follower took the Lease")
    os.kill(leader.process.pid, signal.SIGCONT)
    deadline = time.monotonic() + 120
    while (answers := [await served(replica.url) for replica in replicas]) != [2.0, 2.0]:
        assert time.monotonic() < deadline, f"the value never fell past the hold on both replicas: {answers}"
        await asyncio.sleep(1.0)
    await asyncio.sleep(5)  # a refresh more on each, should one count late
    counts = [await counted(replica.url, "expired") for replica in (leader, follower)]
    assert sum(counts) == 1.0, f"expired on the old leader, the new one: {counts}"
