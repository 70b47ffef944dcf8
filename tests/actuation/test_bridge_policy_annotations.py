"""Policy annotations written on the ServingRuntime (the object users edit) instead of the runtime Deployment:
the adapter reads the Deployment's only, so the bridge, which reads both, says so once rather than let the user
believe `autoscaler.modelmesh.io/max-replicas` on the ServingRuntime caps the runtime."""

from __future__ import annotations

import logging

import pytest

from autoscaler.actuation.bridge import ReplicaBridge
from autoscaler.kube.client import KubeClient
from tests.actuation.conftest import SteppedClock
from tests.fakes.kube import FakeKubeApi

NS = "ml"


@pytest.fixture
def bridge(kube_client: KubeClient, clock: SteppedClock) -> ReplicaBridge:
    return ReplicaBridge(kube_client, namespaces=[NS], clock=clock, rand=lambda: 1.0)


async def test_a_policy_annotation_on_the_servingruntime_is_warned_about_once(
    kube: FakeKubeApi, bridge: ReplicaBridge, clock: SteppedClock, caplog: pytest.LogCaptureFixture
) -> None:
    kube.add_serving_runtime(NS, "triton", replicas=2, annotations={"autoscaler.modelmesh.io/max-replicas": "8"})
    kube.add_modelmesh_runtime(NS, "modelmesh-serving-triton", replicas=2)
    kube.add_runtime_scale(NS, "triton", replicas=2)
    with caplog.at_level(logging.WARNING, logger="autoscaler.actuation"):
        for _ in range(3):
            await bridge.sync()
            clock.advance(60.0)
    [message] = [r.getMessage() for r in caplog.records if "max-replicas" in r.getMessage()]
    assert "ServingRuntime ml/triton" in message and "'8'" in message
    assert "Deployment ml/modelmesh-serving-triton" in message and "runtimes:" in message


async def test_the_same_annotation_on_the_deployment_too_is_not_warned_about(
    kube: FakeKubeApi, bridge: ReplicaBridge, caplog: pytest.LogCaptureFixture
) -> None:
    """A controller (or a user) that copies them onto the Deployment makes them apply."""
    annotations = {"autoscaler.modelmesh.io/max-replicas": "8"}
    kube.add_serving_runtime(NS, "triton", replicas=2, annotations=annotations)
    kube.add_modelmesh_runtime(NS, "modelmesh-serving-triton", replicas=2, annotations=annotations)
    kube.add_runtime_scale(NS, "triton", replicas=2)
    with caplog.at_level(logging.WARNING, logger="autoscaler.actuation"):
        await bridge.sync()
    assert [r for r in caplog.records if "max-replicas" in r.getMessage()] == []
