"""The replica bridge when it cannot *read*: a ClusterRole without `get`/`list` on ServingRuntimes, an API server
failing those reads, a ClusterRole without `list` on RuntimeScales. The HPA reports SuccessfulRescale while its
replicas reach nothing, so what the user and the shipped alerts read must say so (docs/design.md, "Who wins":
the status never says `Bridged` while the HPA's replicas do not reach the runtime)."""

from __future__ import annotations

import logging

import pytest

from autoscaler.actuation.bridge import ReplicaBridge
from autoscaler.selfmetrics import AdapterMetrics
from tests.actuation.conftest import SteppedClock
from tests.actuation.test_bridge import NS, bridge, metrics, ready
from tests.actuation.test_bridge_during_scale import hpa_writes
from tests.fakes.kube import FakeKubeApi

__all__ = ["bridge", "metrics"]  # the fixtures, used by name


@pytest.fixture
async def bridged(kube: FakeKubeApi, bridge: ReplicaBridge) -> None:
    """triton at 2 replicas, its RuntimeScale Bridged."""
    kube.add_serving_runtime(NS, "triton", replicas=2)
    kube.add_modelmesh_runtime(NS, "modelmesh-serving-triton", replicas=2)
    kube.add_runtime_scale(NS, "triton", replicas=2)
    await bridge.sync()
    assert ready(kube)["reason"] == "Bridged"


def gauges(metrics: AdapterMetrics) -> tuple[float | None, float | None]:
    """`runtime_scale_ready` of triton, and its `runtime_scale_not_ready` with reason ServingRuntimeNotRead."""
    labels = {"namespace": NS, "runtimescale": "triton"}
    return (metrics.registry.get_sample_value("modelmesh_autoscaler_runtime_scale_ready", labels),
            metrics.registry.get_sample_value("modelmesh_autoscaler_runtime_scale_not_ready",
                                              {**labels, "reason": "ServingRuntimeNotRead"}))


async def test_a_runtime_the_bridge_may_not_read_is_not_reported_as_bridged(
    kube: FakeKubeApi, bridge: ReplicaBridge, clock: SteppedClock, metrics: AdapterMetrics, bridged: None,
    caplog: pytest.LogCaptureFixture
) -> None:
    """A ClusterRole without get/list on ServingRuntimes (an upgrade that kept the old one): the HPA's 6 never
    reached the runtime, yet the RuntimeScale said Ready True, Bridged, its gauge stayed 1, and no alert could
    fire; only a WARNING that the RuntimeScale was "not reconciled" said anything."""
    kube.forbid("get", "servingruntimes")  # list and get: RBAC's 403
    hpa_writes(kube, 6)

    with caplog.at_level(logging.INFO, "autoscaler.actuation.bridge"):
        bridge.wake(kube.stored("runtimescales", NS, "triton"))  # the watch hands the HPA's write over
        await bridge.sync_changed()

    assert kube.serving_runtime_replicas(NS, "triton") == 2
    condition = ready(kube)
    assert (condition["status"], condition["reason"]) == ("False", "ServingRuntimeNotRead")
    assert "ServingRuntime triton could not be read" in condition["message"]
    assert "403" in condition["message"] and "get and list on servingruntimes" in condition["message"]
    assert gauges(metrics) == (0, 1)  # ModelMeshRuntimeScaleNotReady reads the second
    assert any(r.levelno == logging.WARNING and r.getMessage().startswith("RuntimeScale ml/triton: "
                                                                           "ServingRuntimeNotRead: ")
               for r in caplog.records)

    clock.advance(15.0)
    await bridge.sync()  # the resync: the list refused too, then the read
    assert ready(kube)["reason"] == "ServingRuntimeNotRead" and gauges(metrics) == (0, 1)

    kube.clear_faults()  # the ClusterRole fixed
    clock.advance(15.0)
    await bridge.sync()
    assert kube.serving_runtime_replicas(NS, "triton") == 6
    assert (ready(kube)["status"], ready(kube)["reason"]) == ("True", "Bridged")
    assert gauges(metrics) == (1, None)


async def test_a_runtime_read_failing_twice_in_a_row_is_not_reported_as_bridged(
    kube: FakeKubeApi, bridge: ReplicaBridge, clock: SteppedClock, metrics: AdapterMetrics, bridged: None
) -> None:
    """The API server answering 503 to every ServingRuntime read: one failure is retried a moment later and says
    nothing (a single 503 would flap Ready), the second in a row turns Ready False, as a failing write does."""
    kube.fail(r"/servingruntimes", status=503, times=None, method="GET")
    hpa_writes(kube, 6)

    await bridge.sync()
    assert ready(kube)["reason"] == "Bridged"
    clock.advance(bridge.next_pass_in_s())
    await bridge.sync()

    assert kube.serving_runtime_replicas(NS, "triton") == 2
    condition = ready(kube)
    assert (condition["status"], condition["reason"]) == ("False", "ServingRuntimeNotRead")
    assert "could not be read" in condition["message"] and "retried with backoff" in condition["message"]
    assert gauges(metrics) == (0, 1)


def list_failures(metrics: AdapterMetrics) -> float | None:
    return metrics.registry.get_sample_value("modelmesh_autoscaler_bridge_runtime_scale_list_failures_total")


async def test_runtime_scales_the_bridge_may_not_list_are_counted_for_an_alert(
    kube: FakeKubeApi, bridge: ReplicaBridge, clock: SteppedClock, metrics: AdapterMetrics
) -> None:
    """A ClusterRole without list on RuntimeScales: the bridge sees none, so it can neither carry the HPA's
    replicas nor write any status (READY stays empty), and it published no bridge series at all: nothing an
    alert could read. Each refused list is counted (ModelMeshRuntimeScalesNotListed reads it)."""
    kube.add_serving_runtime(NS, "triton", replicas=2)
    kube.add_modelmesh_runtime(NS, "modelmesh-serving-triton", replicas=2)
    kube.add_runtime_scale(NS, "triton", replicas=3)
    kube.fail(r"/runtimescales$", status=403, times=None, method="GET")

    for _ in range(2):
        await bridge.sync()
        clock.advance(15.0)

    assert kube.serving_runtime_replicas(NS, "triton") == 2
    assert not kube.stored("runtimescales", NS, "triton").get("status")
    assert list_failures(metrics) == 2

    kube.clear_faults()
    await bridge.sync()
    assert kube.serving_runtime_replicas(NS, "triton") == 3 and list_failures(metrics) == 2


async def test_runtime_scales_without_their_crd_are_no_list_failure(
    kube: FakeKubeApi, bridge: ReplicaBridge, metrics: AdapterMetrics
) -> None:
    """The RuntimeScale CRD not installed (an adapter that serves metrics only, the bridge on by default):
    there is nothing to bridge, so nothing for an alert to count."""
    kube.fail(r"/runtimescales$", status=404, times=None, method="GET")
    await bridge.sync()
    assert list_failures(metrics) == 0
