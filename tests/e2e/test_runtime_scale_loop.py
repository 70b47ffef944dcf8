"""The whole scaling loop of a modelmesh-serving runtime, with real processes and the fake Kubernetes API:

    fake ModelMesh pods -> exporters -> the adapter (metrics API) -> HPA (autoscaler/simulation/hpa.py,
      driven by tests/support/hpa_step.py)
      -> RuntimeScale scale subresource -> the adapter's bridge -> ServingRuntime.spec.replicas
      -> modelmesh-serving stand-in -> Deployment.spec.replicas -> ReplicaSet stand-in -> pods

The modelmesh-serving stand-in does what the real controller does for a runtime with no autoscaler class: it
sets the Deployment's replicas from `ServingRuntime.spec.replicas` on every reconcile
(`tests/support/modelmesh_serving.py`). The ReplicaSet stand-in
adds pods and removes them in the ReplicaSet's order (`autoscaler.simulation.replicaset`: not Ready, then the
lowest pod-deletion-cost, then the newest). Each pod is a loopback address with its own fake ModelMesh and a
real exporter process; the adapter discovers them through the fake API like in a cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import aiohttp
import pytest

from autoscaler.demo.fake_modelmesh import serve
from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from autoscaler.names import DELETION_COST_ANNOTATION, ServedMetric
from autoscaler.simulation.hpa_spec import DEFAULT_SCALE_UP, Behavior, HpaSpec, MetricSpec, ScalingPolicy, ScalingRules
from autoscaler.simulation.replicaset import ReplicaPod, pods_to_remove
from tests.fakes.kube import FakeKubeApi
from tests.support import modelmesh_serving
from tests.support.hpa_step import HpaStep
from tests.support.processes import Server, all_running, free_port, running, stop

pytestmark = pytest.mark.slow

NS = "modelmesh-serving"
RUNTIME = "triton"
DEPLOYMENT = "modelmesh-serving-triton"
SELECTOR = {"modelmesh-service": "modelmesh-serving", "name": DEPLOYMENT}
SLOTS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
T = TypeVar("T")
DOWN_WINDOW_S = 30
# The documented HPA, quickened for a test: one pod removed per 10 s after a 30 s scale-down window.
HPA_SPEC = HpaSpec(
    (MetricSpec(ServedMetric.DESIRED_REPLICAS.value, "External", "AverageValue", 1.0),), min_replicas=1, max_replicas=3,
    behavior=Behavior(DEFAULT_SCALE_UP, ScalingRules(DOWN_WINDOW_S, "Max", (ScalingPolicy("Pods", 1, 10),))))


async def eventually(check: Callable[[], T], timeout: float = 30.0, what: str = "") -> T:
    async with asyncio.timeout(timeout):
        while not (result := check()):
            await asyncio.sleep(0.2)
    return result


@dataclass
class Cluster:
    """The fake API plus the two controllers that would run in a cluster, stepped by `run()`."""

    kube: FakeKubeApi
    fakes: list[FakeModelMesh]
    pods: dict[str, int] = field(default_factory=dict)
    """Pod name -> slot, for the pods that exist."""
    history: list[tuple[float, int]] = field(default_factory=list)
    """(time, Deployment spec.replicas) at every change."""
    removed: list[int] = field(default_factory=list)
    """Slots of the pods the ReplicaSet removed, in order."""

    def modelmesh_serving(self) -> None:
        """Class none: the Deployment's replicas follow ServingRuntime.spec.replicas (podsPerRuntime: 1)."""
        if (wanted := modelmesh_serving.reconcile(self.kube, NS, RUNTIME, DEPLOYMENT, pods_per_runtime=1)) is not None:
            self.history.append((time.monotonic(), wanted))

    def replica_set(self) -> None:
        wanted = self.kube.stored("deployments", NS, DEPLOYMENT)["spec"]["replicas"]
        while len(self.pods) < wanted:
            slot = min(set(range(len(SLOTS))) - set(self.pods.values()))
            name = f"{DEPLOYMENT}-5d9c8b7f6-slot{slot}"
            self.kube.add_pod(NS, name, labels={**SELECTOR, "pod-template-hash": "5d9c8b7f6"}, ip=SLOTS[slot],
                              created=time.time())
            self.pods[name] = slot
        if len(self.pods) > wanted:
            candidates = []
            for name in self.pods:
                stored = self.kube.stored("pods", NS, name)
                cost = (stored["metadata"].get("annotations") or {}).get(DELETION_COST_ANNOTATION, "0")
                created = stored["metadata"]["creationTimestamp"]
                candidates.append(ReplicaPod(name, True, int(cost), time.mktime(time.strptime(
                    created, "%Y-%m-%dT%H:%M:%SZ"))))
            for pod in pods_to_remove(candidates, len(self.pods) - wanted):
                self.kube.delete_pod(NS, pod.name)
                self.removed.append(self.pods.pop(pod.name))

    def set_loads(self, *rps: float) -> None:
        for fake, value in zip(self.fakes, rps, strict=True):
            fake.update(requests_per_second=value)


async def run_controllers(cluster: Cluster, hpa: HpaStep, session: aiohttp.ClientSession) -> None:
    """The cluster's controllers, forever: modelmesh-serving and the ReplicaSet every 0.2 s, the HPA every
    second (its 15 s sync period, shortened as the adapter's refresh is)."""
    last_hpa = 0.0
    while True:
        cluster.modelmesh_serving()
        cluster.replica_set()
        if time.monotonic() - last_hpa >= 1.0:
            last_hpa = time.monotonic()
            await hpa.sync(session)
        await asyncio.sleep(0.2)


def metric_reader(adapter: str, session: aiohttp.ClientSession) -> Callable[[], asyncio.Future[float | None]]:
    path = (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{NS}/modelmesh_desired_replicas"
            f"?labelSelector=deployment%3D{DEPLOYMENT}")

    async def read() -> float | None:
        try:
            async with session.get(adapter + path, ssl=False, timeout=aiohttp.ClientTimeout(total=2)) as response:
                if response.status != 200:
                    return None
                value = (await response.json())["items"][0]["value"]
        except (aiohttp.ClientError, TimeoutError):
            return None  # the adapter is down: the HPA holds
        return int(value[:-1]) / 1000 if value.endswith("m") else float(value)

    return read  # type: ignore[return-value]


@pytest.fixture
async def fakes() -> AsyncIterator[tuple[list[FakeModelMesh], list[int]]]:
    models, ports, runners = [], [], []
    try:
        for ip in SLOTS:
            fake, port = FakeModelMesh(ModelMeshLoad()), free_port()
            runners.append(await serve(fake, ip, port))
            models.append(fake)
            ports.append(port)
        yield models, ports
    finally:
        for runner in runners:
            await runner.cleanup()


async def test_load_scales_the_runtime_through_the_runtime_scale_and_the_idle_pod_goes_first(
    tmp_path: Path, fakes: tuple[list[FakeModelMesh], list[int]]
) -> None:
    models, mm_ports = fakes
    exporter_port, adapter_port = free_port(), free_port()
    adapter = f"https://127.0.0.1:{adapter_port}"
    async with FakeKubeApi() as kube, aiohttp.ClientSession() as session:
        kubeconfig = kube.write_kubeconfig(tmp_path / "cluster.kubeconfig", namespace=NS)
        cluster = Cluster(kube, models)
        cluster.set_loads(250, 80, 70)  # slot 0 alone is 2.5 pods' worth at 100 req/s per pod
        kube.add_serving_runtime(NS, RUNTIME, replicas=1)
        kube.add_deployment(NS, DEPLOYMENT, replicas=1, labels=SELECTOR, selector=SELECTOR,
                            annotations={"autoscaler.modelmesh.io/target-rps-per-pod": "100"})
        kube.add_runtime_scale(NS, RUNTIME)  # no replicas: the bridge adopts the runtime's
        cluster.replica_set()
        hpa = HpaStep(f"{kube.url}/apis/autoscaler.modelmesh.io/v1alpha1/namespaces/{NS}/runtimescales/"
                      f"{RUNTIME}/scale", metric_reader(adapter, session), HPA_SPEC)
        adapter_args = ["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{adapter_port}",
                        "--kubeconfig", str(kubeconfig), "--namespaces", NS, "--exporter-port", str(exporter_port),
                        "--refresh-interval", "1", "--window", "3", "--scale-down-tau", "1",
                        "--leader-elect", "true", "--leader-elect-lease-duration", "3",
                        "--leader-elect-renew-deadline", "2", "--leader-elect-retry-period", "0.2"]

        with contextlib.ExitStack() as stack:
            await asyncio.to_thread(stack.enter_context, all_running([Server(
                ["exporter.cli", "--listen", f"{ip}:{exporter_port}", "--no-gpu",
                 "--modelmesh-url", f"http://{ip}:{mm_ports[slot]}/metrics", "--modelmesh-interval", "0.5",
                 "--load-window", "3"],
                f"http://{ip}:{exporter_port}/healthz", tmp_path / f"exporter-{slot}.log")
                for slot, ip in enumerate(SLOTS)]))
            # The API server refuses ServingRuntime writes for now: the HPA's first decision stays pending.
            kube.fail(r"/servingruntimes/", status=503, times=None, method="PATCH")
            first = await asyncio.to_thread(stack.enter_context, running(
                adapter_args, f"{adapter}/healthz", tmp_path / "adapter-1.log"))
            scale = await eventually(
                lambda: (kube.stored("runtimescales", NS, RUNTIME).get("status") or {}).get("selector"))
            assert scale == "modelmesh-service=modelmesh-serving,name=modelmesh-serving-triton"
            assert kube.stored("runtimescales", NS, RUNTIME)["spec"]["replicas"] == 1  # adopted, nothing moved

            loop = asyncio.create_task(run_controllers(cluster, hpa, session))
            try:
                # Load goes up: the HPA asks for 3 through the scale subresource; the bridge cannot pass it on.
                await eventually(lambda: "SuccessfulRescale 1 -> 3" in hpa.events, 30)
                await eventually(lambda: [r for r in kube.requests if r.resource == "servingruntimes"
                                          and r.method == "PATCH" and r.status == 503])
                assert kube.stored("deployments", NS, DEPLOYMENT)["spec"]["replicas"] == 1

                # The bridge restarts; the new leader carries the pending replicas on: nothing is lost.
                await asyncio.to_thread(stop, first)
                kube.clear_faults()
                await asyncio.to_thread(stack.enter_context, running(
                    adapter_args, f"{adapter}/healthz", tmp_path / "adapter-2.log"))
                await eventually(lambda: len(cluster.pods) == 3, 30)
                assert kube.serving_runtime_replicas(NS, RUNTIME) == 3
                assert [replicas for _, replicas in cluster.history] == [3]

                # Load goes down, and the oldest pod (slot 0) is now the idle one.
                cluster.set_loads(0, 60, 50)
                lowered_at = time.monotonic()
                await eventually(lambda: len(cluster.pods) == 2, 90)
                await asyncio.sleep(3)  # and it stays there: 2 pods at 60 and 50 req/s need 1.1 pods
            finally:
                loop.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await loop

            assert cluster.removed == [0]  # the idle pod, not the newest
            [(down_at, _)] = [(t, r) for t, r in cluster.history if r == 2]
            assert down_at - lowered_at >= DOWN_WINDOW_S - 1  # slowly: after the stabilization window
            assert [replicas for _, replicas in cluster.history] == [3, 2]
            scale_object = kube.stored("runtimescales", NS, RUNTIME)
            assert scale_object["spec"]["replicas"] == 2 == kube.serving_runtime_replicas(NS, RUNTIME)
            # The Deployment's pods reach status.replicas within one resync of the bridge (15 s).
            await eventually(lambda: kube.stored("runtimescales", NS, RUNTIME)["status"]["replicas"] == 2, 20)

            process = await asyncio.create_subprocess_exec(
                "/usr/bin/kubectl", "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "cache"),
                "get", "runtimescale", RUNTIME, "-o", "json",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            stdout, stderr = await asyncio.wait_for(process.communicate(), 30)
            assert process.returncode == 0, stderr.decode()
            [ready] = json.loads(stdout)["status"]["conditions"]
            assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "Bridged")


