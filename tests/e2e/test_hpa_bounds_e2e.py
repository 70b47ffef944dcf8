"""The HPA's `maxReplicas` bounds what the adapter serves (docs/design.md §6, Bounds), in cluster mode: runtime
and pods from the fake Kubernetes API, an `autoscaling/v2` HPA there, real exporters, the real adapter with
`--kubeconfig`, values read with kubectl. Both process layouts: the default (serving workers fed by a refresh
process, which must run the HPA watch) and `--workers 0`.

Was (issue 10): the served value reached 216 against a maxReplicas of 100, and once load fell it took
`tau · ln 2.16` before the HPA saw any change.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web

from autoscaler.demo.fake_modelmesh import FakeModelMesh, ModelMeshLoad
from tests.e2e.cluster_pods import start_pod
from tests.fakes.kube import FakeKubeApi
from tests.support.kubectl import get_raw, write_kubeconfig
from tests.support.processes import free_port, running

pytestmark = pytest.mark.slow

NS = "modelmesh-serving"
DEPLOYMENT = "modelmesh-serving-triton"
SELECTOR = {"modelmesh-service": "modelmesh-serving", "name": DEPLOYMENT}
PODS = {"triton-hot": "127.0.0.12", "triton-idle": "127.0.0.13"}
TAU_S = 10
"""Short enough for a quick test, long enough that a fall from the uncapped value (tau ln 27.3 = 33 s) cannot
pass for the prompt one from the cap (tau ln 2 = 7 s): the bound of 25 s below lies between the two."""
DESIRED = (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{NS}/modelmesh_desired_replicas"
           "?labelSelector=servingruntime%3Dtriton")


@dataclass
class Cluster:
    kube: FakeKubeApi
    hot: FakeModelMesh
    kubeconfig: Path
    served: list[float | None] = field(default_factory=list)

    def desired(self) -> float | None:
        """What kubectl reads now (None: an error); every reading is kept for failure messages."""
        code, body = get_raw(self.kubeconfig, DESIRED)
        value: float | None = None
        if code == 0:
            text: str = body["items"][0]["value"]
            value = int(text.removesuffix("m")) / 1000 if text.endswith("m") else float(text)
        self.served.append(value)
        return value


async def eventually(cluster: Cluster, check: Callable[[float | None], bool], timeout: float) -> float:
    """Seconds until `check(desired)` held; fails after `timeout` with the last values served."""
    started = time.monotonic()
    while not check(await asyncio.to_thread(cluster.desired)):
        if time.monotonic() - started > timeout:
            raise AssertionError(f"not met within {timeout} s; served lately: {cluster.served[-10:]}")
        await asyncio.sleep(0.3)
    return time.monotonic() - started


@pytest.fixture(params=[[], ["--workers", "0"]], ids=["workers", "one-process"])
async def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Cluster]:
    exporter_port, adapter_port = free_port(), free_port()
    runners: list[web.AppRunner] = []
    hot = FakeModelMesh(ModelMeshLoad(requests_per_second=2000.0))
    async with FakeKubeApi() as kube:
        kube.add_deployment(NS, DEPLOYMENT, replicas=2, labels=SELECTOR, selector=SELECTOR,
                            annotations={"autoscaler.modelmesh.io/target-rps-per-pod": "100"})
        kube.add_hpa(NS, "triton", max_replicas=100, target=("RuntimeScale", "triton"))
        with contextlib.ExitStack() as stack:
            try:
                for (name, ip), modelmesh in zip(PODS.items(), (hot, FakeModelMesh(ModelMeshLoad())), strict=True):
                    runners.append(await start_pod(stack, kube, modelmesh, namespace=NS, name=name, ip=ip,
                                                   labels=SELECTOR, exporter_port=exporter_port, logs=tmp_path))
                await asyncio.to_thread(stack.enter_context, running(
                    ["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{adapter_port}",
                     "--kubeconfig", str(kube.write_kubeconfig(tmp_path / "cluster.kubeconfig")),
                     "--exporter-port", str(exporter_port), "--refresh-interval", "1", "--window", "3",
                     "--scale-down-tau", str(TAU_S), "--leader-elect", "false", "--deletion-cost", "off",
                     *request.param],
                    f"https://127.0.0.1:{adapter_port}/healthz", tmp_path / "adapter.log"))
                kubeconfig = write_kubeconfig(tmp_path / "adapter.kubeconfig", f"https://127.0.0.1:{adapter_port}")
                yield Cluster(kube, hot, kubeconfig)
            finally:
                for runner in runners:
                    await runner.cleanup()


async def test_served_desired_is_clamped_to_the_hpa_max_and_falls_below_it_promptly(cluster: Cluster) -> None:
    # M2(2000, 0) x 2 pods = 2828 req/s at 100 per pod: 28.3, so 29 pods; the HPA's max is 100.
    await eventually(cluster, lambda served: (served or 0) >= 25, timeout=40)

    cluster.kube.set_hpa_bounds(NS, "triton", max_replicas=3)
    await eventually(cluster, lambda served: served == 3.0, timeout=30)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:  # still 29 pods of demand: the cap holds
        assert await asyncio.to_thread(cluster.desired) == 3.0
        await asyncio.sleep(0.3)

    cluster.hot.update(requests_per_second=0.0)
    # Demand falls to 0 (the lower bound: 1 pod) within the exporter's 3 s load window. From the cap, the
    # served value is below 3 once 1 + 2·exp(-t/10) ≤ 2: t = 10 ln 2 ≈ 7 s. From the uncapped 28.3 it would
    # take 10 ln 27.3 ≈ 33 s, all of it served as 3 by an HPA that cannot go above its max anyway.
    took = await eventually(cluster, lambda served: (served or 3.0) < 3.0, timeout=30)
    assert took < 25, took
