"""The replica bridge under a ClusterRole from before the bridge (an upgrade that kept its old RBAC): no
`get`/`list` on ServingRuntimes. Every resync (15 s) fails the same two ways, a list and each RuntimeScale's
read; the operator needs each cause said once, not a pair of WARNINGs every 15 s all day."""

from __future__ import annotations

import logging

import pytest

from autoscaler.actuation.bridge import ReplicaBridge
from autoscaler.kube.client import KubeClient
from tests.actuation.conftest import SteppedClock
from tests.fakes.kube import FakeKubeApi

NS = "ml"


async def test_a_missing_permission_is_warned_about_once_per_cause(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock, caplog: pytest.LogCaptureFixture
) -> None:
    kube.add_serving_runtime(NS, "triton", replicas=2)
    kube.add_modelmesh_runtime(NS, "modelmesh-serving-triton", replicas=2)
    kube.add_runtime_scale(NS, "triton", replicas=5)
    kube.forbid("get", "servingruntimes")  # list and get: RBAC's 403
    bridge = ReplicaBridge(kube_client, namespaces=[NS], clock=clock, rand=lambda: 1.0)

    with caplog.at_level(logging.INFO, "autoscaler.actuation.bridge"):
        for _ in range(4):
            await bridge.sync()
            clock.advance(15.0)

    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
                and r.getMessage().startswith("replica bridge:")]
    assert len(warnings) == 2, warnings
    assert "cannot list ServingRuntimes" in warnings[0] and "403" in warnings[0]
    assert "RuntimeScale ml/triton not reconciled" in warnings[1] and "forbidden" in warnings[1]

    # The Role is fixed: the runtime follows. Broken again later, it is news again.
    caplog.clear()
    kube.clear_faults()
    clock.advance(60.0)
    await bridge.sync()
    assert kube.serving_runtime_replicas(NS, "triton") == 5
    kube.forbid("get", "servingruntimes")
    with caplog.at_level(logging.INFO, "autoscaler.actuation.bridge"):
        await bridge.sync()
    assert any(r.levelno == logging.WARNING and "cannot list ServingRuntimes" in r.getMessage()
               for r in caplog.records)
