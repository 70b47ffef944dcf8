"""The HPA's `maxReplicas` bounds what the adapter serves (docs/design.md §6, Bounds), in cluster mode: runtime
and pods from the fake Kubernetes API, an `autoscaling/v2` HPA there, real exporters, the real adapter with
`--kubeconfig`, values read with kubectl (polled in this process: the same GET). Both process layouts: the
default (serving workers fed by a refresh process, which must run the HPA watch) and `--workers 0`.

Was (issue 10): the served value reached 216 against a maxReplicas of 100, and once load fell it took
`tau · ln 2.16` before the HPA saw any change. That delay comes from the smoothing state staying above the cap;
the test shows the state by value rather than by timing the fall: demand falls (still above the cap) and the
cap is lifted, and a state held at the cap rises at once to the new demand, where one left above it would
serve more than the demand while it decayed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web

from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from tests.e2e.cluster_pods import start_pod
from tests.fakes.kube import FakeKubeApi
from tests.support.kubectl import get_raw, write_kubeconfig
from tests.support.processes import free_port, http_get, running
from tests.support.quantities import quantity_value

pytestmark = pytest.mark.slow

NS = "modelmesh-serving"
DEPLOYMENT = "modelmesh-serving-triton"
SELECTOR = {"modelmesh-service": "modelmesh-serving", "name": DEPLOYMENT}
PODS = {"triton-hot": "127.0.0.12", "triton-idle": "127.0.0.13"}
TAU_S = 10
"""Long enough that a state left above the cap (28.3) is still far above the lower demand (9.5) when the cap is
lifted: it would take tau ln 188 = 52 s to settle there."""
DESIRED = (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{NS}/modelmesh_desired_replicas"
           "?labelSelector=servingruntime%3Dtriton")
DEBUG = f"/debug/runtimes/{NS}/{DEPLOYMENT}"
HANG_GUARD_S = 90
"""Only a guard against a hung adapter: every wait below ends on what it waits for, in seconds when all is well."""
LOWER_RPS = 950 / 2 ** 0.5
"""The hot pod's rate for a demand of 9.5 pods: M2(671.8, 0) x 2 pods = 950 req/s at 100 per pod."""


@dataclass
class Cluster:
    kube: FakeKubeApi
    hot: FakeModelMesh
    kubeconfig: Path
    adapter_url: str
    served: list[float | None] = field(default_factory=list)

    def desired(self) -> float | None:
        """What the adapter serves kubectl now (None: an error), read in this process (a kubectl run costs about
        50 ms of CPU, and the waits below read every 0.3 s); every reading is kept for failure messages."""
        status, body = http_get(self.adapter_url + DESIRED)
        return self._kept(quantity_value(json.loads(body)["items"][0]["value"]) if status == 200 else None)

    def desired_by_kubectl(self) -> float | None:
        """What kubectl reads now (None: an error), kept with the others."""
        code, body = get_raw(self.kubeconfig, DESIRED)
        return self._kept(quantity_value(body["items"][0]["value"]) if code == 0 else None)

    def _kept(self, value: float | None) -> float | None:
        self.served.append(value)
        return value

    def request_load(self) -> float | None:
        """The runtime's request load before smoothing (`raw`), as /debug shows it: the recommendation's `raw` is
        already bounded, so the load tells when the demand has fallen."""
        status, body = http_get(self.adapter_url + DEBUG)
        if status != 200:
            return None
        raw: float | None = json.loads(body)["values"]["modelmesh_request_load"]["raw"]
        return raw


async def eventually(cluster: Cluster, check: Callable[[float | None], bool]) -> None:
    """Until kubectl reads a value for which `check(desired)` holds (polled in this process until it does, then
    read with kubectl); fails only if the adapter hangs (`HANG_GUARD_S`), with the last values served."""
    for read in (cluster.desired, cluster.desired_by_kubectl):
        deadline = time.monotonic() + HANG_GUARD_S
        while not check(await asyncio.to_thread(read)):
            if time.monotonic() > deadline:
                raise AssertionError(f"never met; served lately: {cluster.served[-10:]}")
            await asyncio.sleep(0.3)


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
                yield Cluster(kube, hot, kubeconfig, f"https://127.0.0.1:{adapter_port}")
            finally:
                for runner in runners:
                    await runner.cleanup()


async def test_served_desired_is_clamped_to_the_hpa_max_and_its_state_never_rises_above_it(
    cluster: Cluster,
) -> None:
    # M2(2000, 0) x 2 pods = 2828 req/s at 100 per pod: 28.3, so 29 pods; the HPA's max is 100.
    await eventually(cluster, lambda served: (served or 0) >= 25)

    cluster.kube.set_hpa_bounds(NS, "triton", max_replicas=3)
    await eventually(cluster, lambda served: served == 3.0)
    for _ in range(10):  # still 29 pods of demand: the cap holds
        assert await asyncio.to_thread(cluster.desired) == 3.0
        await asyncio.sleep(0.3)
    assert await asyncio.to_thread(cluster.desired_by_kubectl) == 3.0

    # Demand falls to 9.5 pods, still above the cap: 3 is served throughout.
    cluster.hot.update(requests_per_second=LOWER_RPS)
    deadline = time.monotonic() + HANG_GUARD_S
    while not 900 <= ((load := await asyncio.to_thread(cluster.request_load)) or 0) <= 1000:
        assert time.monotonic() < deadline, f"the request load never fell to 950 req/s; /debug raw: {load}"
        assert await asyncio.to_thread(cluster.desired) == 3.0
        await asyncio.sleep(0.3)

    # The cap lifted: a state held at 3 rises at once to the demand (10 pods); a state left at 28.3 would fall
    # from there towards 9.5, serving more pods than the demand for most of a minute.
    lifted_at = len(cluster.served)
    cluster.kube.set_hpa_bounds(NS, "triton", max_replicas=100)
    await eventually(cluster, lambda served: served == 10.0)
    assert all(served in (3.0, 10.0) for served in cluster.served[lifted_at:]), (
        f"served once the cap was lifted (demand 9.5 pods): {cluster.served[lifted_at:]}")
