"""A RuntimeScale created while its runtime is half-way through a scale-up, as a platform engineer meets it: the
ServingRuntime's `spec.replicas` already raised (by hand, or by the tool used before this adapter), the new pods
created but not Ready yet, and then the RuntimeScale (without replicas, as the shipped example has) and its HPA
applied. Real adapter and exporters, the fake Kubernetes API, the modelmesh-serving and ReplicaSet stand-ins of
`test_scale_seams` and the HPA model.

What must hold: the RuntimeScale adopts the replicas asked for, not the pods Ready so far, and neither that
adoption nor the HPA's first write right after it sends the runtime back down.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest

from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh
from tests.e2e.test_runtime_scale_loop import DEPLOYMENT, NS, RUNTIME, SELECTOR, SLOTS, eventually, fakes, metric_reader
from tests.e2e.test_scale_seams import HPA_SPEC, StartingCluster
from tests.fakes.kube import FakeKubeApi
from tests.support.hpa_step import HpaStep
from tests.support.processes import Server, all_running, free_port, running

pytestmark = pytest.mark.slow
__all__ = ["fakes"]  # the fixture, imported to be used here


async def test_a_runtime_scale_created_mid_scale_up_adopts_the_raised_replicas_and_the_hpa_keeps_them(
    tmp_path: Path, fakes: tuple[list[FakeModelMesh], list[int]]
) -> None:
    models, mm_ports = fakes
    for fake, rps in zip(models, (250.0, 0.0, 0.0), strict=True):
        fake.update(requests_per_second=rps)  # the one Ready pod alone is 2.5 pods' worth at 100 per pod
    exporter_port, adapter_port = free_port(), free_port()
    adapter = f"https://127.0.0.1:{adapter_port}"
    async with FakeKubeApi() as kube, aiohttp.ClientSession() as session:
        cluster = StartingCluster(kube, models, startup_s=3600.0)  # the new pods stay not Ready here
        kube.add_serving_runtime(NS, RUNTIME, replicas=1)
        kube.add_deployment(NS, DEPLOYMENT, replicas=1, labels=SELECTOR, selector=SELECTOR,
                            annotations={"autoscaler.modelmesh.io/target-rps-per-pod": "100"})
        cluster.replica_set()
        kube.set_ready(NS, f"{DEPLOYMENT}-5d9c8b7f6-slot0", True)
        del cluster.starting[f"{DEPLOYMENT}-5d9c8b7f6-slot0"]
        read = metric_reader(adapter, session)
        runtime_replicas: list[int | None] = []

        async def controllers() -> None:
            """modelmesh-serving and the ReplicaSet, every 0.2 s; what the runtime asks for, as it changes."""
            while True:
                cluster.modelmesh_serving()
                cluster.replica_set()
                runtime_replicas.append(kube.serving_runtime_replicas(NS, RUNTIME))
                await asyncio.sleep(0.2)

        with contextlib.ExitStack() as stack:
            await asyncio.to_thread(stack.enter_context, all_running([Server(
                ["exporter.cli", "--listen", f"{SLOTS[0]}:{exporter_port}", "--no-gpu",
                 "--modelmesh-url", f"http://{SLOTS[0]}:{mm_ports[0]}/metrics", "--modelmesh-interval", "0.5",
                 "--load-window", "3"], f"http://{SLOTS[0]}:{exporter_port}/healthz", tmp_path / "exporter-0.log")]))
            await asyncio.to_thread(stack.enter_context, running(
                ["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{adapter_port}",
                 "--kubeconfig", str(kube.write_kubeconfig(tmp_path / "cluster.kubeconfig", namespace=NS)),
                 "--namespaces", NS, "--exporter-port", str(exporter_port), "--refresh-interval", "1",
                 "--window", "3", "--leader-elect", "true", "--leader-elect-lease-duration", "3",
                 "--leader-elect-renew-deadline", "2", "--leader-elect-retry-period", "0.2"],
                f"{adapter}/healthz", tmp_path / "adapter.log"))
            loop = asyncio.create_task(controllers())
            try:
                assert await eventually_async(read) >= 2.5  # the adapter knows the runtime, at 1 replica
                # The scale-up under way: the runtime asks for 3, two new pods exist and are not Ready.
                kube.update_object("servingruntimes", NS, RUNTIME, lambda o: o["spec"].update(replicas=3))
                await eventually(lambda: len(cluster.pods) == 3 and len(cluster.starting) == 2, 30)

                kube.add_runtime_scale(NS, RUNTIME)  # applied now, without replicas
                await eventually(lambda: (kube.stored("runtimescales", NS, RUNTIME).get("status") or {})
                                 .get("selector"), 30)
                assert kube.stored("runtimescales", NS, RUNTIME)["spec"]["replicas"] == 3

                hpa = HpaStep(f"{kube.url}/apis/autoscaler.modelmesh.io/v1alpha1/namespaces/{NS}/runtimescales/"
                              f"{RUNTIME}/scale", read, HPA_SPEC)
                value = await eventually_async(read)
                assert value >= 2.5, value  # what the one Ready pod's load asks for
                await hpa.sync(session)  # the HPA's first write (if any), right after the adoption
                await hpa.sync(session)
                await asyncio.sleep(2)  # the bridge carries whatever it wrote
            finally:
                loop.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await loop

        assert kube.stored("runtimescales", NS, RUNTIME)["spec"]["replicas"] >= 3, hpa.events
        after = runtime_replicas[runtime_replicas.index(3):]
        assert min(r for r in after if r is not None) >= 3, (hpa.events, after)


async def eventually_async(read: Callable[[], Awaitable[float | None]]) -> float:
    """The adapter's value, once it serves one."""
    async with asyncio.timeout(60):
        while (value := await read()) is None:
            await asyncio.sleep(0.5)
    return value
