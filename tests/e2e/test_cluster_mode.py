"""The adapter as it runs in a cluster, minus the cluster: runtimes and pods found through the (fake)
Kubernetes API, real exporters on the pods' IPs, values read with kubectl, deletion costs written back.

Each pod gets its own loopback address so every exporter answers on the same port of a different pod IP.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TypeVar

import pytest
from aiohttp import web

from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from autoscaler.names import DELETION_COST_ANNOTATION
from tests.e2e.cluster_pods import start_pod
from tests.fakes.kube import FakeKubeApi
from tests.support.kubectl import get_raw, write_kubeconfig
from tests.support.processes import free_port, running

pytestmark = pytest.mark.slow

NS = "modelmesh-serving"
DEPLOYMENT = "modelmesh-serving-triton"
SELECTOR = {"modelmesh-service": "modelmesh-serving", "name": DEPLOYMENT}
PODS = {"triton-hot": ("127.0.0.2", 300.0), "triton-idle": ("127.0.0.3", 0.0)}
T = TypeVar("T")


async def eventually(check: Callable[[], T | None], timeout: float = 30.0) -> T:
    async with asyncio.timeout(timeout):
        while True:
            result = await asyncio.to_thread(check)
            if result:
                return result
            await asyncio.sleep(0.5)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[FakeKubeApi, str]]:
    exporter_port, adapter_port = free_port(), free_port()
    runners: list[web.AppRunner] = []
    async with FakeKubeApi() as kube:
        kube.add_deployment(NS, DEPLOYMENT, replicas=2, labels=SELECTOR, selector=SELECTOR,
                            annotations={"autoscaler.modelmesh.io/target-rps-per-pod": "100"})
        with contextlib.ExitStack() as stack:
            try:
                for name, (ip, rps) in PODS.items():
                    runners.append(await start_pod(
                        stack, kube, FakeModelMesh(ModelMeshLoad(requests_per_second=rps)), namespace=NS,
                        name=name, ip=ip, labels=SELECTOR, exporter_port=exporter_port, logs=tmp_path))
                await asyncio.to_thread(stack.enter_context, running(
                    ["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{adapter_port}",
                     "--kubeconfig", str(kube.write_kubeconfig(tmp_path / "cluster.kubeconfig")),
                     "--exporter-port", str(exporter_port), "--refresh-interval", "1", "--window", "3",
                     "--leader-elect", "false"],
                    f"https://127.0.0.1:{adapter_port}/healthz", tmp_path / "adapter.log"))
                yield kube, f"https://127.0.0.1:{adapter_port}"
            finally:
                for runner in runners:
                    await runner.cleanup()


async def test_discovered_runtime_is_served_and_the_idle_pod_is_cheapest_to_remove(
    cluster: tuple[FakeKubeApi, str], tmp_path: Path
) -> None:
    kube, adapter = cluster
    kubeconfig = write_kubeconfig(tmp_path / "adapter.kubeconfig", adapter)
    path = (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{NS}/modelmesh_desired_replicas"
            "?labelSelector=servingruntime%3Dtriton")

    def desired() -> str | None:
        code, body = get_raw(kubeconfig, path)
        return body["items"][0]["value"] if code == 0 else None

    # M2(300, 0) x 2 pods = 424 req/s at 100 per pod (the Deployment's annotation): 5 pods.
    assert await eventually(lambda: desired() == "5000m")

    def costs() -> dict[str, str] | None:
        found = {name: kube.pod_annotations(NS, name).get(DELETION_COST_ANNOTATION) for name in PODS}
        written = {name: cost for name, cost in found.items() if cost}
        return written if len(written) == len(PODS) else None

    written = await eventually(costs)
    assert int(written["triton-idle"]) < int(written["triton-hot"])
    [patch, *_] = [p for p in kube.patches if p.name == "triton-idle"]
    assert patch.content_type == "application/merge-patch+json"
