"""A ServingRuntime that modelmesh-serving's own `hpa` class scales (its controller's CPU HPA on the Deployment)
and a RuntimeScale for it: `AutoscalerClassConflict`. What the RuntimeScale's message tells the user to do must
keep the runtime's pods: with no class, the controller sets the Deployment to `spec.replicas`, else to the global
`podsPerRuntime`, on the change itself, before the bridge can adopt anything (`tests/support/modelmesh_serving.py`
decides as the controller does). And while the conflict lasts the RuntimeScale must not publish the runtime's pod
selector: an HPA on it and the controller's CPU HPA would select the same pods, and the HPA controller stops both
(`AmbiguousSelector`), the runtime's own autoscaling included (docs/design.md, "The RuntimeScale bridge")."""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from autoscaler.actuation.bridge import BridgeSettings, ReplicaBridge
from autoscaler.actuation.bridge_runtime_watch import ServingRuntimeWatch
from autoscaler.actuation.bridge_watch import RuntimeScaleWatch
from autoscaler.kube.client import KubeClient
from autoscaler.simulation.hpa_spec import HpaSpec, MetricSpec
from tests.fakes.kube import FakeKubeApi
from tests.support import modelmesh_serving
from tests.support.hpa_step import HpaStep
from tests.support.kubectl import KUBECTL
from tests.support.waiting import eventually

NS = "ml"
RUNTIME = "triton"
DEPLOYMENT = "modelmesh-serving-triton"
CLASS = modelmesh_serving.CLASS_ANNOTATION
RUNNING = 5
"""Where the controller's CPU HPA has the runtime: above `podsPerRuntime` (2), so a step that hands the runtime to
podsPerRuntime removes pods."""

HOURLY = BridgeSettings(resync_interval_s=3600.0)
"""A resync no test outlives: what happens after the user's step comes from the watches, not from a full pass."""
AT_ONCE_S = 10.0
"""A hang detector for "within a round trip", far below the hourly resync and the shipped 15 s."""


def ready(kube: FakeKubeApi) -> dict[str, Any]:
    conditions = (kube.stored("runtimescales", NS, RUNTIME).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Ready"), {})


def the_command(message: str) -> list[str]:
    """The kubectl command the condition's message gives, split as a shell splits it."""
    found = re.search(r"\bkubectl .*$", message)
    assert found, f"the message gives no kubectl command to run: {message!r}"
    return shlex.split(found.group(0))


async def kubectl(kubeconfig: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    """The real kubectl against the fake (in a thread: the fake answers from this test's event loop)."""
    assert args[0] == "kubectl", args
    return await asyncio.to_thread(subprocess.run, [
        KUBECTL, "--kubeconfig", str(kubeconfig), "--cache-dir", str(kubeconfig.parent / "kubectl-cache"),
        *args[1:]], capture_output=True, text=True, timeout=60)


@contextlib.asynccontextmanager
async def cluster(kube: FakeKubeApi, kube_client: KubeClient, bridge: ReplicaBridge) -> AsyncIterator[list[int]]:
    """The bridge run by its watches, as in the adapter, with modelmesh-serving's controller beside it (reconciling
    every 20 ms, as fast as it reacts to a ServingRuntime event); yields the Deployment's replicas at each change
    the controller makes."""
    resized: list[int] = []

    async def controller() -> None:
        while True:
            if (changed := modelmesh_serving.reconcile(kube, NS, RUNTIME, DEPLOYMENT)) is not None:
                resized.append(changed)
            await asyncio.sleep(0.02)

    tasks = [asyncio.create_task(controller()),
             asyncio.create_task(RuntimeScaleWatch(kube_client, NS, bridge.wake).run()),
             asyncio.create_task(ServingRuntimeWatch(kube_client, NS, bridge.handovers.runtime_changed).run())]
    try:
        await kube.wait_for_watches(1, "runtimescales")
        await kube.wait_for_watches(1, "servingruntimes")
        tasks.append(asyncio.create_task(bridge.run()))
        yield resized
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


@pytest.mark.parametrize(("asked", "resized"), [(None, []), (3, [3])], ids=["adopted", "restored-copy"])
async def test_the_step_the_conflict_gives_keeps_the_runtimes_pods_and_hands_it_over_at_once(
    kube: FakeKubeApi, kube_client: KubeClient, kubeconfig: Path, asked: int | None, resized: list[int]
) -> None:
    """The documented fix was "remove the annotation": the controller then set the Deployment from 5 to
    podsPerRuntime (2) at once, and the next full pass (up to 15 s later) adopted 2. The message now gives one patch
    that removes the annotation and sets `spec.replicas` to the replicas the Deployment runs (the webhook judges the
    new object only, so it is admitted): nothing is removed, the RuntimeScale adopts 5 at once (the ServingRuntime
    watch hands it over), and a RuntimeScale that already asks 3 (restored from a backup) is carried at once, the
    runtime going from 5 to its HPA's 3 and never through 2."""
    kube.add_serving_runtime(NS, RUNTIME, annotations={CLASS: "hpa"})  # the webhook: class hpa, no replicas
    kube.add_modelmesh_runtime(NS, DEPLOYMENT, replicas=RUNNING)
    kube.add_runtime_scale(NS, RUNTIME, replicas=asked)
    bridge = ReplicaBridge(kube_client, namespaces=[NS], settings=HOURLY)
    async with cluster(kube, kube_client, bridge) as sizes:
        await eventually(lambda: ready(kube).get("reason") == "AutoscalerClassConflict")
        message = ready(kube)["message"]
        done = await kubectl(kubeconfig, the_command(message))
        assert done.returncode == 0, done.stderr
        try:
            await eventually(lambda: ready(kube).get("reason") == "Bridged", timeout=AT_ONCE_S)
        except TimeoutError:
            pytest.fail(f"not handed to the RuntimeScale within {AT_ONCE_S} s: {ready(kube)}")
        await eventually(lambda: kube.stored("deployments", NS, DEPLOYMENT)["spec"]["replicas"]
                         == kube.serving_runtime_replicas(NS, RUNTIME))  # the controller has applied the last change
    runtime = kube.stored("servingruntimes", NS, RUNTIME)
    assert modelmesh_serving.webhook_refusal(runtime) is None
    assert CLASS not in (runtime["metadata"].get("annotations") or {})
    assert sizes == resized, f"the Deployment went {RUNNING} -> {sizes} (the message: {message})"
    want = RUNNING if asked is None else asked
    assert kube.stored("runtimescales", NS, RUNTIME)["spec"]["replicas"] == want
    assert kube.serving_runtime_replicas(NS, RUNTIME) == want


async def test_a_conflicting_runtimescales_hpa_stops_alone_and_leaves_the_runtimes_own_hpa_scaling(
    kube: FakeKubeApi, kube_client: KubeClient
) -> None:
    """A RuntimeScale with `spec.replicas` (a restored or GitOps copy, or one made for KEDA) on a runtime of class
    `hpa`: its scale published the runtime's pod selector, so its HPA acted (`SuccessfulRescale`, though the bridge
    carries nothing) and the HPA controller saw two HPAs over the runtime's pods, the controller's CPU HPA too:
    `AmbiguousSelector` on both. Now it publishes none while the class is there (its HPA stops: "selector is
    required"), and does again once the class is gone."""
    kube.add_serving_runtime(NS, RUNTIME, annotations={CLASS: "hpa"})
    kube.add_modelmesh_runtime(NS, DEPLOYMENT, replicas=3)
    kube.add_runtime_scale(NS, RUNTIME, replicas=3)
    bridge = ReplicaBridge(kube_client, namespaces=[NS])
    await bridge.sync()

    async def six() -> float:
        return 6.0

    scale_url = f"{kube.url}/apis/autoscaler.modelmesh.io/v1alpha1/namespaces/{NS}/runtimescales/{RUNTIME}/scale"
    hpa = HpaStep(scale_url, six, HpaSpec((MetricSpec("m", "External", "AverageValue", 1.0),)))
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer test-token"}) as session:
        await hpa.sync(session)
        assert ready(kube)["reason"] == "AutoscalerClassConflict"
        assert hpa.events == ["InvalidSelector selector is required"]
        assert not kube.stored("runtimescales", NS, RUNTIME)["status"].get("selector")

        def one_patch(runtime: dict[str, Any]) -> None:  # the message's step
            del runtime["metadata"]["annotations"][CLASS]
            runtime["spec"]["replicas"] = 3

        kube.update_object("servingruntimes", NS, RUNTIME, one_patch)
        await bridge.sync()
        await hpa.sync(session)
    await bridge.sync()
    assert ready(kube)["reason"] == "Bridged"
    assert hpa.events[-1] == "SuccessfulRescale 3 -> 6"
    assert kube.serving_runtime_replicas(NS, RUNTIME) == 6
