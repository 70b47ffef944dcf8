"""The deletion costs the leader's /metrics publishes across a Lease hand-over, with real processes: two adapter
replicas in cluster mode on one Lease over the fake Kubernetes API, real exporters on the pods' IPs.

The dashboard's "Pod deletion cost" panel draws `modelmesh_autoscaler_pod_deletion_cost`, one line a pod. A new
leader published it only for the pods it wrote a cost to in its term (or found already carrying the cost it would
write): a pod whose ModelMesh was down (no fresh data, so no cost to write) kept the cost the previous leader wrote,
and the ReplicaSet went on reading it, but no replica published it and the panel dropped the pod. Here the busiest
pod's ModelMesh goes down, then the Lease changes hands; the new leader's page must say what every pod carries.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from autoscaler.names import DELETION_COST_ANNOTATION
from tests.e2e.cluster_pods import start_pod
from tests.e2e.test_adapter_rollout import DEPLOYMENT, NS, SELECTOR, Cluster, answer, holder, ready, until
from tests.fakes.kube import FakeKubeApi
from tests.support.processes import free_port

pytestmark = pytest.mark.slow

PODS = {"triton-hot": ("127.0.0.81", 150.0), "triton-warm": ("127.0.0.82", 100.0),
        "triton-idle": ("127.0.0.83", 10.0)}
DOWN = "triton-hot"
"""The pod whose ModelMesh stops answering: Ready still, its exporter's data going stale."""


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[tuple[Cluster, dict[str, web.AppRunner]]]:
    meshes: dict[str, web.AppRunner] = {}
    async with FakeKubeApi() as kube:
        kube.add_deployment(NS, DEPLOYMENT, replicas=len(PODS), labels=SELECTOR, selector=SELECTOR,
                            annotations={"autoscaler.modelmesh.io/target-rps-per-pod": "100"})
        cluster = Cluster(kube, tmp_path, free_port())
        with contextlib.ExitStack() as stack:
            try:
                for name, (ip, rps) in PODS.items():
                    meshes[name] = await start_pod(stack, kube, FakeModelMesh(ModelMeshLoad(requests_per_second=rps)),
                                                   namespace=NS, name=name, ip=ip, labels=SELECTOR,
                                                   exporter_port=cluster.exporter_port, logs=tmp_path)
                yield cluster, meshes
            finally:
                for replica in cluster.replicas:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(replica.process.pid, signal.SIGCONT)
                    await replica.stop(signal.SIGKILL)
                for runner in meshes.values():
                    await runner.cleanup()


async def page(url: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """The replica's /metrics as Prometheus reads it: each sample's value by name and labels."""
    code, body = await answer(url + "/metrics")
    assert code == 200, body
    found: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            found.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def one(samples: dict[tuple[tuple[str, str], ...], float] | None) -> float:
    return sum((samples or {}).values())


async def deletion_costs(url: str) -> dict[str, float]:
    """The pods `modelmesh_autoscaler_pod_deletion_cost` names on the replica's page, with their cost."""
    series = (await page(url)).get("modelmesh_autoscaler_pod_deletion_cost", {})
    return {dict(labels)["pod"]: value for labels, value in series.items() if dict(labels)["namespace"] == NS}


def carried(kube: FakeKubeApi) -> dict[str, float]:
    """The cost on each pod as the ReplicaSet reads it."""
    return {pod: float(kube.pod_annotations(NS, pod).get(DELETION_COST_ANNOTATION) or 0) for pod in PODS}


async def published(url: str, costs: dict[str, float], what: str) -> None:
    """Wait until the replica's page names `costs` (its series come with each refresh's values)."""
    deadline = asyncio.get_running_loop().time() + 30
    while (shown := await deletion_costs(url)) != costs:
        assert asyncio.get_running_loop().time() < deadline, f"{what}: {shown}, the pods carry {costs}"
        await asyncio.sleep(0.2)


async def passes(url: str) -> float:
    return one((await page(url)).get("modelmesh_autoscaler_deletion_cost_passes_total"))


async def test_a_new_leader_publishes_the_cost_a_pod_without_data_still_carries(
        world: tuple[Cluster, dict[str, web.AppRunner]]) -> None:
    cluster, meshes = world
    kube = cluster.kube
    replicas = [await cluster.start_replica("--bridge", "off") for _ in range(2)]
    for replica in replicas:
        await ready(replica)
    await until(lambda: holder(kube) is not None
                and all(kube.pod_annotations(NS, pod).get(DELETION_COST_ANNOTATION) for pod in PODS), 60,
                "a replica leads and every pod carries a cost")
    leader = next(replica for replica in replicas if replica.identity == holder(kube))
    follower = next(replica for replica in replicas if replica is not leader)
    await published(leader.url, carried(kube), "the leader publishes the costs it wrote")

    await meshes[DOWN].cleanup()  # its exporter keeps its last values, their timestamp growing old
    deadline = asyncio.get_running_loop().time() + 60
    while not one((await page(leader.url)).get("modelmesh_autoscaler_runtime_consecutive_misses")):
        assert asyncio.get_running_loop().time() < deadline, "the leader never missed the pod's data"
        await asyncio.sleep(0.2)
    on_pods = carried(kube)

    leader.process.send_signal(signal.SIGTERM)  # a rollout, a node drained: the Lease changes hands
    assert await leader.stop() == 0
    await until(lambda: holder(kube) == follower.identity, 60, "the follower took the Lease")
    first = await passes(follower.url)
    deadline = asyncio.get_running_loop().time() + 60
    while await passes(follower.url) < first + 3:  # a few passes of its term, each a refresh apart
        assert asyncio.get_running_loop().time() < deadline, "the new leader's writer made no pass"
        await asyncio.sleep(0.2)

    assert carried(kube) == on_pods, "no pod's cost was to change: the new leader writes what the old one wrote"
    await published(follower.url, on_pods, "the new leader publishes what every pod carries")
