"""The replica bridge while a runtime is scaling, at its seams: someone else writes the runtime's replicas, the
watch hands over a RuntimeScale older than the bridge has already carried, the RuntimeScale is deleted and
created again. What wins, and is it said (docs/design.md, "The RuntimeScale bridge")."""

from __future__ import annotations

import copy

import pytest

from autoscaler.actuation.bridge import ReplicaBridge
from autoscaler.kube.client import KubeClient
from tests.actuation.conftest import SteppedClock
from tests.fakes.kube import FakeKubeApi

NS = "ml"
DEPLOYMENT = "modelmesh-serving-triton"


@pytest.fixture
def bridge(kube_client: KubeClient, clock: SteppedClock) -> ReplicaBridge:
    kube_client_bridge = ReplicaBridge(kube_client, namespaces=[NS], clock=clock, rand=lambda: 1.0)
    return kube_client_bridge


@pytest.fixture
def runtime(kube: FakeKubeApi) -> None:
    kube.add_serving_runtime(NS, "triton", replicas=3)
    kube.add_modelmesh_runtime(NS, DEPLOYMENT, replicas=3)


def hpa_writes(kube: FakeKubeApi, replicas: int) -> None:
    kube.update_object("runtimescales", NS, "triton", lambda o: o["spec"].update(replicas=replicas))


async def test_a_late_watch_event_of_an_older_runtime_scale_does_not_write_its_replicas_back(
    kube: FakeKubeApi, bridge: ReplicaBridge, runtime: None
) -> None:
    """A watch stream can lag behind the bridge's own consistent list: the full pass already carried the HPA's
    2, then the watch hands over the RuntimeScale as it was at 3. Writing 3 back to the runtime would have the
    ReplicaSet start a pod, and remove one (models and all) when the next event comes."""
    kube.add_runtime_scale(NS, "triton", replicas=3)
    await bridge.sync()
    older = copy.deepcopy(kube.stored("runtimescales", NS, "triton"))
    hpa_writes(kube, 2)
    await bridge.sync()
    assert kube.serving_runtime_replicas(NS, "triton") == 2
    kube.clear_requests()

    bridge.wake(older)
    await bridge.sync_changed()

    assert kube.serving_runtime_replicas(NS, "triton") == 2
    assert not [r for r in kube.requests if r.resource == "servingruntimes" and r.method == "PATCH"]


async def test_a_runtime_scale_deleted_and_created_again_mid_scale_carries_on_from_what_runs(
    kube: FakeKubeApi, bridge: ReplicaBridge, runtime: None
) -> None:
    kube.add_runtime_scale(NS, "triton", replicas=3)
    await bridge.sync()
    hpa_writes(kube, 5)  # a scale-up under way
    await bridge.sync()
    kube.delete_object("runtimescales", NS, "triton")
    await bridge.sync()
    assert kube.serving_runtime_replicas(NS, "triton") == 5  # nothing to follow: the runtime stays as it is

    kube.add_runtime_scale(NS, "triton")  # the manifest applied again (no replicas, as the example has)
    created = copy.deepcopy(kube.stored("runtimescales", NS, "triton"))
    bridge.wake(created)
    await bridge.sync_changed()

    assert kube.stored("runtimescales", NS, "triton")["spec"]["replicas"] == 5
    assert kube.serving_runtime_replicas(NS, "triton") == 5
