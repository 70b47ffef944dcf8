"""The replica bridge against the fake Kubernetes API: what the HPA writes to a RuntimeScale reaches
`ServingRuntime.spec.replicas` with a merge patch, the RuntimeScale reports the runtime Deployment, and every
reason not to act is said in its Ready condition (docs/design.md, "The RuntimeScale bridge")."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from autoscaler.actuation.bridge import BridgeSettings, ReplicaBridge
from autoscaler.actuation.bridge_watch import RuntimeScaleWatch
from autoscaler.kube.client import KubeClient
from autoscaler.model import RuntimeKey
from autoscaler.selfmetrics import AdapterMetrics
from tests.actuation.conftest import SteppedClock
from tests.fakes.kube import FakeKubeApi

NS = "ml"
DEPLOYMENT = "modelmesh-serving-triton"
SELECTOR = "modelmesh-service=modelmesh-serving,name=modelmesh-serving-triton"


def ready(kube: FakeKubeApi, name: str = "triton") -> dict[str, Any]:
    [condition] = [c for c in kube.stored("runtimescales", NS, name)["status"]["conditions"] if c["type"] == "Ready"]
    return condition  # type: ignore[no-any-return]


@pytest.fixture
def metrics() -> AdapterMetrics:
    return AdapterMetrics()


@pytest.fixture
def bridge(kube_client: KubeClient, clock: SteppedClock, metrics: AdapterMetrics) -> ReplicaBridge:
    return ReplicaBridge(kube_client, namespaces=[NS], clock=clock, rand=lambda: 1.0, metrics=metrics)


def sample(metrics: AdapterMetrics, name: str, **labels: str) -> float | None:
    value = metrics.registry.get_sample_value(name, labels)
    return value


@pytest.fixture
def runtime(kube: FakeKubeApi) -> list[str]:
    kube.add_serving_runtime(NS, "triton", replicas=2)
    return kube.add_modelmesh_runtime(NS, DEPLOYMENT, replicas=2)


async def test_the_hpas_replicas_reach_the_serving_runtime(
    kube: FakeKubeApi, bridge: ReplicaBridge, runtime: list[str]
) -> None:
    kube.add_runtime_scale(NS, "triton", replicas=5)

    await bridge.sync()

    assert kube.serving_runtime_replicas(NS, "triton") == 5
    [patch] = [p for p in kube.patches if p.resource == "servingruntimes"]
    assert (patch.content_type, patch.body) == ("application/merge-patch+json", {"spec": {"replicas": 5}})
    status = kube.stored("runtimescales", NS, "triton")["status"]
    assert (status["replicas"], status["selector"]) == (2, SELECTOR)  # the pods that exist now
    assert (ready(kube)["status"], ready(kube)["reason"]) == ("True", "Bridged")


async def test_the_bridge_reports_its_writes_and_readiness(
    kube: FakeKubeApi, bridge: ReplicaBridge, runtime: list[str], metrics: AdapterMetrics, clock: SteppedClock
) -> None:
    kube.add_runtime_scale(NS, "triton", replicas=5)
    kube.fail(r"/servingruntimes/triton$", status=503, times=1, method="PATCH")

    await bridge.sync()
    clock.advance(1.0)
    await bridge.sync()

    total = "modelmesh_autoscaler_bridge_writes_total"
    assert sample(metrics, total, write="servingruntime_replicas", result="retried") == 1
    assert sample(metrics, total, write="servingruntime_replicas", result="ok") == 1
    assert sample(metrics, total, write="runtimescale_status", result="ok") == 1
    assert sample(metrics, "modelmesh_autoscaler_runtime_scale_ready", namespace=NS, runtimescale="triton") == 1
    kube.delete_object("runtimescales", NS, "triton")
    await bridge.sync()
    assert sample(metrics, "modelmesh_autoscaler_runtime_scale_ready", namespace=NS, runtimescale="triton") is None


async def test_a_second_pass_with_nothing_changed_writes_nothing(
    kube: FakeKubeApi, bridge: ReplicaBridge, runtime: list[str]
) -> None:
    kube.add_runtime_scale(NS, "triton", replicas=5)
    await bridge.sync()
    kube.clear_requests()

    assert await bridge.sync() == 0

    assert [r.method for r in kube.requests if r.method != "GET"] == []


async def test_a_new_runtime_scale_adopts_the_runtimes_replicas(
    kube: FakeKubeApi, bridge: ReplicaBridge, runtime: list[str]
) -> None:
    kube.add_runtime_scale(NS, "triton")

    await bridge.sync()

    assert kube.stored("runtimescales", NS, "triton")["spec"]["replicas"] == 2
    assert kube.serving_runtime_replicas(NS, "triton") == 2
    assert not [p for p in kube.patches if p.resource == "servingruntimes"]


async def test_without_replicas_on_the_runtime_the_deployments_are_adopted(
    kube: FakeKubeApi, bridge: ReplicaBridge
) -> None:
    kube.add_serving_runtime(NS, "triton")  # modelmesh-serving's podsPerRuntime decides
    kube.add_modelmesh_runtime(NS, DEPLOYMENT, replicas=3)
    kube.add_runtime_scale(NS, "triton")

    await bridge.sync()

    assert kube.stored("runtimescales", NS, "triton")["spec"]["replicas"] == 3
    assert kube.serving_runtime_replicas(NS, "triton") == 3


async def test_a_runtime_scaled_to_zero_is_not_adopted_at_zero(kube: FakeKubeApi, bridge: ReplicaBridge) -> None:
    """modelmesh-serving scales a runtime no InferenceService uses to zero; its built-in ServingRuntimes set no
    replicas. Adopting the Deployment's 0 would write 0 into the ServingRuntime, which the controller then
    applies when the first InferenceService comes: the runtime would never start (and an HPA does not scale
    a target at 0). It is adopted once the controller starts it."""
    kube.add_serving_runtime(NS, "triton")  # no spec.replicas: podsPerRuntime decides
    kube.add_modelmesh_runtime(NS, DEPLOYMENT, replicas=0)
    kube.add_runtime_scale(NS, "triton")

    await bridge.sync()

    assert "replicas" not in kube.stored("runtimescales", NS, "triton")["spec"]
    assert kube.serving_runtime_replicas(NS, "triton") is None
    condition = ready(kube)
    assert (condition["status"], condition["reason"]) == ("False", "NoReplicas")
    assert "scaled to zero" in condition["message"]

    kube.update_object("deployments", NS, DEPLOYMENT, lambda d: d["spec"].update(replicas=2))  # a model came
    await bridge.sync()

    assert kube.stored("runtimescales", NS, "triton")["spec"]["replicas"] == 2
    assert kube.serving_runtime_replicas(NS, "triton") == 2
    assert ready(kube)["reason"] == "Bridged"


@pytest.mark.parametrize(
    ("case", "setup", "reason"),
    [
        ("no runtime", lambda kube: None, "ServingRuntimeNotFound"),
        ("cluster runtime", lambda kube: kube.add_cluster_serving_runtime("triton"), "ClusterServingRuntime"),
        ("autoscaler class", lambda kube: kube.add_serving_runtime(
            NS, "triton", replicas=2, annotations={"serving.kserve.io/autoscalerClass": "hpa"}),
         "AutoscalerClassConflict"),
        ("no deployment", lambda kube: kube.add_serving_runtime(NS, "triton", replicas=2), "DeploymentNotFound"),
    ],
)
async def test_what_stops_the_bridge_is_said_in_the_ready_condition(
    kube: FakeKubeApi, bridge: ReplicaBridge, case: str, setup: Callable[[FakeKubeApi], object], reason: str
) -> None:
    setup(kube)
    kube.add_runtime_scale(NS, "triton", replicas=5)

    await bridge.sync()

    assert (ready(kube)["status"], ready(kube)["reason"]) == ("False", reason)
    if reason != "DeploymentNotFound":  # the controller creates the Deployment from the runtime's replicas
        assert kube.serving_runtime_replicas(NS, "triton") in (None, 2)


async def test_failed_writes_are_retried_with_backoff(
    kube: FakeKubeApi, bridge: ReplicaBridge, runtime: list[str], clock: SteppedClock
) -> None:
    kube.add_runtime_scale(NS, "triton", replicas=5)
    kube.fail(r"/servingruntimes/triton$", status=503, times=1, method="PATCH")

    await bridge.sync()
    assert kube.serving_runtime_replicas(NS, "triton") == 2
    await bridge.sync()  # not due yet: the backoff holds it
    assert len([p for p in kube.patches if p.resource == "servingruntimes"]) == 1
    clock.advance(1.0)
    await bridge.sync()

    assert kube.serving_runtime_replicas(NS, "triton") == 5


async def test_a_failed_list_forgets_nothing(
    kube: FakeKubeApi, bridge: ReplicaBridge, runtime: list[str], metrics: AdapterMetrics, clock: SteppedClock
) -> None:
    """A 503 on the list says nothing about which RuntimeScales exist: the Ready gauge stays, and a write the
    server asked to wait (429, Retry-After: 30) still waits instead of going out at the next pass."""
    kube.add_runtime_scale(NS, "triton", replicas=5)
    kube.add_serving_runtime(NS, "vllm", replicas=1)
    kube.add_modelmesh_runtime(NS, "modelmesh-serving-vllm", replicas=1)
    kube.add_runtime_scale(NS, "vllm", replicas=3)
    kube.fail(r"/servingruntimes/vllm$", status=429, times=1, method="PATCH", retry_after=30)
    await bridge.sync()
    assert sample(metrics, "modelmesh_autoscaler_runtime_scale_ready", namespace=NS, runtimescale="triton") == 1
    clock.advance(5.0)
    await bridge.sync()  # the server's wait holds every call of the bridge
    assert len([p for p in kube.patches if p.resource == "servingruntimes" and p.name == "vllm"]) == 1

    clock.advance(25.0)
    kube.fail(r"/runtimescales$", status=503, times=1, method="GET")
    await bridge.sync()
    assert sample(metrics, "modelmesh_autoscaler_runtime_scale_ready", namespace=NS, runtimescale="triton") == 1
    assert len([p for p in kube.patches if p.resource == "servingruntimes" and p.name == "vllm"]) == 1
    await bridge.sync()
    assert kube.serving_runtime_replicas(NS, "vllm") == 3


@contextlib.asynccontextmanager
async def bridge_with_a_write_waiting_for_its_retry(kube: FakeKubeApi, kube_client: KubeClient) -> AsyncIterator[None]:
    """A running bridge whose write of RuntimeScale `triton` failed (every PATCH of the ServingRuntime answers
    503) and waits for its retry; stopped on the way out."""
    kube.add_runtime_scale(NS, "triton", replicas=5)
    kube.fail(r"/servingruntimes/triton$", status=503, times=None, method="PATCH")
    bridge = ReplicaBridge(kube_client, namespaces=[NS], settings=BridgeSettings(backoff_base_s=0.05))
    task = asyncio.create_task(bridge.run())
    try:
        async with asyncio.timeout(5):
            while not [p for p in kube.patches if p.resource == "servingruntimes"]:
                await asyncio.sleep(0.01)
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_runtime_scale_deleted_while_its_write_waits_for_a_retry_is_forgotten(
    kube: FakeKubeApi, kube_client: KubeClient, runtime: list[str]
) -> None:
    """Its retry must not stay due forever: the bridge would list RuntimeScales in a tight loop."""
    async with bridge_with_a_write_waiting_for_its_retry(kube, kube_client):
        kube.delete_object("runtimescales", NS, "triton")
        await asyncio.sleep(1.0)
        kube.clear_requests()
        await asyncio.sleep(1.0)

    assert len([r for r in kube.requests if r.resource == "runtimescales"]) <= 1  # the resync is 15 s


async def test_a_list_that_keeps_failing_is_not_retried_in_a_tight_loop(
    kube: FakeKubeApi, kube_client: KubeClient, runtime: list[str]
) -> None:
    """A write waiting for its retry when the API starts failing every list: the retry is due, but the bridge
    cannot see the RuntimeScale; it tries again at the resync, not as fast as the server answers 503."""
    async with bridge_with_a_write_waiting_for_its_retry(kube, kube_client):
        kube.fail(r"/runtimescales$", status=503, times=None, method="GET")
        await asyncio.sleep(0.5)
        kube.clear_requests()
        await asyncio.sleep(1.0)

    assert len(kube.requests) <= 1  # the resync is 15 s


async def test_only_the_leader_writes(kube: FakeKubeApi, kube_client: KubeClient, runtime: list[str]) -> None:
    kube.add_runtime_scale(NS, "triton", replicas=5)
    follower = ReplicaBridge(kube_client, namespaces=[NS], may_write=lambda: False)

    assert await follower.sync() == 0

    assert kube.requests == []


async def test_a_scale_write_reaches_the_runtime_within_a_round_trip(
    kube: FakeKubeApi, kube_client: KubeClient, runtime: list[str]
) -> None:
    kube.add_runtime_scale(NS, "triton", replicas=2)
    bridge = ReplicaBridge(kube_client, settings=BridgeSettings(resync_interval_s=3600.0))
    tasks = [asyncio.create_task(bridge.run()), asyncio.create_task(RuntimeScaleWatch(kube_client, None,
                                                                                      bridge.wake).run())]
    try:
        await kube.wait_for_watches(1, "runtimescales")
        kube.update_object("runtimescales", NS, "triton", lambda o: o["spec"].update(replicas=4))
        async with asyncio.timeout(5):
            while kube.serving_runtime_replicas(NS, "triton") != 4:
                await asyncio.sleep(0.02)
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_the_watch_knows_what_the_hpa_asked_for_each_runtime(kube: FakeKubeApi, kube_client: KubeClient) -> None:
    """Part of "what runs" for a runtime a restarted adapter has no memory of (autoscaler.policies.warmup):
    the HPA's last write to the RuntimeScale, on any replica, before the bridge has carried it anywhere."""
    kube.add_runtime_scale(NS, "triton", replicas=5)
    watch = RuntimeScaleWatch(kube_client, NS, lambda scale: None)
    task = asyncio.create_task(watch.run())
    key = RuntimeKey(NS, DEPLOYMENT)
    try:
        await kube.wait_for_watches(1, "runtimescales")
        assert watch.replicas_for(key) == 5 and watch.replicas_for(RuntimeKey(NS, "other")) is None
        kube.update_object("runtimescales", NS, "triton", lambda o: o["spec"].update(replicas=7))
        async with asyncio.timeout(5):
            while watch.replicas_for(key) != 7:
                await asyncio.sleep(0.02)
        # A second RuntimeScale on the same runtime (a copy, a misconfiguration): the owner's ask counts, the
        # oldest's, which the bridge carries; the copy's 9 is not what runs. (Events arrive in order: once the
        # owner's 8 is seen, so is the copy.)
        kube.add_runtime_scale(NS, "triton-too", serving_runtime="triton", replicas=9)
        kube.update_object("runtimescales", NS, "triton", lambda o: o["spec"].update(replicas=8))
        async with asyncio.timeout(5):
            while watch.replicas_for(key) != 8:
                await asyncio.sleep(0.02)
        # The owner deleted: the copy owns the runtime now.
        kube.delete_object("runtimescales", NS, "triton")
        async with asyncio.timeout(5):
            while watch.replicas_for(key) != 9:
                await asyncio.sleep(0.02)
        # Pointed at another runtime: it owns that one, and nothing asks for the first.
        kube.update_object("runtimescales", NS, "triton-too", lambda o: o["spec"].update(servingRuntime="ovms"))
        async with asyncio.timeout(5):
            while watch.replicas_for(key) is not None:
                await asyncio.sleep(0.02)
        assert watch.replicas_for(RuntimeKey(NS, "modelmesh-serving-ovms")) == 9
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
