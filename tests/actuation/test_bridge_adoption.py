"""The bridge adopts the runtime's replicas only into a RuntimeScale that still has none (docs/design.md, "The
RuntimeScale bridge"): the adoption is conditional on the version it read, so replicas set since (by the HPA,
KEDA or a user) are never replaced by the runtime's old size."""

from __future__ import annotations

import logging

import pytest

from autoscaler.actuation.bridge import ReplicaBridge
from autoscaler.kube.client import KubeClient
from tests.actuation.conftest import SteppedClock
from tests.fakes.kube import JSON, FakeKubeApi

NS = "ml"
DEPLOYMENT = "modelmesh-serving-triton"


def spec_patches(kube: FakeKubeApi) -> list[tuple[object, int | None]]:
    """(body, answer status) of each PATCH of a RuntimeScale's main resource: the adoptions."""
    return [(r.body, r.status) for r in kube.requests if r.resource == "runtimescales" and r.method == "PATCH"
            and not r.path.endswith("/status")]


@pytest.fixture
def bridge(kube_client: KubeClient, clock: SteppedClock) -> ReplicaBridge:
    return ReplicaBridge(kube_client, namespaces=[NS], clock=clock, rand=lambda: 1.0)


@pytest.fixture
def created(kube: FakeKubeApi) -> JSON:
    """A runtime at 8 pods (its ServingRuntime sets none) and its RuntimeScale as created, without replicas."""
    kube.add_serving_runtime(NS, "triton")
    kube.add_modelmesh_runtime(NS, DEPLOYMENT, replicas=8)
    return kube.add_runtime_scale(NS, "triton")


async def test_replicas_set_after_the_bridge_read_the_runtime_scale_are_kept(
    kube: FakeKubeApi, bridge: ReplicaBridge, created: JSON, caplog: pytest.LogCaptureFixture
) -> None:
    """A late watch event (or a leader that has just lost its Lease) hands over the RuntimeScale as created;
    meanwhile its HPA set 10. Adopting the runtime's 8 over that undid the HPA's scale-up."""
    kube.update_object("runtimescales", NS, "triton", lambda scale: scale["spec"].update(replicas=10))

    with caplog.at_level(logging.INFO, logger="autoscaler.actuation.bridge"):
        bridge.wake(created)
        await bridge.sync_changed()

    assert kube.stored("runtimescales", NS, "triton")["spec"]["replicas"] == 10
    assert kube.serving_runtime_replicas(NS, "triton") == 10
    assert "spec.replicas was set to 10 while the adapter adopted the runtime's 8: kept" in caplog.text


async def test_the_adoption_is_conditional_on_the_version_read(
    kube: FakeKubeApi, bridge: ReplicaBridge, created: JSON
) -> None:
    await bridge.sync()

    [(adoption, status)] = spec_patches(kube)
    version = created["metadata"]["resourceVersion"]
    assert adoption == {"spec": {"replicas": 8}, "metadata": {"resourceVersion": version}}
    assert status == 200
    assert kube.stored("runtimescales", NS, "triton")["spec"]["replicas"] == 8


async def test_a_runtime_scale_changed_only_in_its_metadata_is_still_adopted(
    kube: FakeKubeApi, bridge: ReplicaBridge, created: JSON
) -> None:
    """A label added between the bridge's read and its adoption changes the resourceVersion, not the fact that
    the RuntimeScale has no replicas: it is adopted at once into the version read again, not after a retry."""
    kube.update_object("runtimescales", NS, "triton", lambda scale: scale["metadata"].setdefault(
        "labels", {}).update(team="search"))

    bridge.wake(created)
    await bridge.sync_changed()

    assert kube.stored("runtimescales", NS, "triton")["spec"]["replicas"] == 8
    assert kube.serving_runtime_replicas(NS, "triton") == 8
    assert [status for _, status in spec_patches(kube)] == [409, 200]


async def test_a_runtime_scale_waiting_for_its_replicas_says_what_its_hpa_and_keda_show_meanwhile(
    kube: FakeKubeApi, bridge: ReplicaBridge
) -> None:
    """A runtime scaled to zero is adopted only when modelmesh-serving starts it; until then KEDA's
    "ScaledObjectCheckFailed" and the HPA's "FailedGetScale" look like faults: `kubectl describe runtimescale`
    says they are the wait, and that nothing changes the runtime meanwhile."""
    kube.add_serving_runtime(NS, "triton")
    kube.add_modelmesh_runtime(NS, DEPLOYMENT, replicas=0)
    kube.add_runtime_scale(NS, "triton")

    await bridge.sync()

    [ready] = kube.stored("runtimescales", NS, "triton")["status"]["conditions"]
    assert (ready["status"], ready["reason"]) == ("False", "NoReplicas")
    assert "FailedGetScale" in ready["message"] and "ScaledObjectCheckFailed" in ready["message"]
