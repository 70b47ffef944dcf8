"""The replica bridge while a runtime is scaling, at its seams: someone else writes the runtime's replicas, the
watch hands over a RuntimeScale older than the bridge has already carried, the RuntimeScale is deleted and
created again. What wins, and is it said (docs/design.md, "The RuntimeScale bridge")."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest

from autoscaler.actuation.bridge import ReplicaBridge
from autoscaler.kube.client import KubeClient
from autoscaler.selfmetrics import AdapterMetrics
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


async def test_a_hand_edit_of_the_runtime_replicas_is_set_back_and_the_log_says_who_decides(
    kube: FakeKubeApi, bridge: ReplicaBridge, runtime: None, caplog: pytest.LogCaptureFixture
) -> None:
    kube.add_runtime_scale(NS, "triton", replicas=3)
    await bridge.sync()
    hpa_writes(kube, 2)  # a scale-down is under way
    await bridge.sync()
    assert kube.serving_runtime_replicas(NS, "triton") == 2

    kube.update_object("servingruntimes", NS, "triton", lambda o: o["spec"].update(replicas=6))  # kubectl edit
    with caplog.at_level(logging.INFO, "autoscaler.actuation.bridge"):
        await bridge.sync()

    assert kube.serving_runtime_replicas(NS, "triton") == 2  # the RuntimeScale (its HPA) wins
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "ServingRuntime ml/triton spec.replicas was set to 6 outside RuntimeScale ml/triton" in warning
    assert "set back to 2" in warning and "HPA" in warning

    # The bridge's own writes, and the HPA's next one, are not someone else's.
    caplog.clear()
    hpa_writes(kube, 1)
    with caplog.at_level(logging.INFO, "autoscaler.actuation.bridge"):
        await bridge.sync()
        await bridge.sync()
    assert kube.serving_runtime_replicas(NS, "triton") == 1
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


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


async def not_ready_until_the_faults_clear(kube: FakeKubeApi, bridge: ReplicaBridge, clock: SteppedClock,
                                           metrics: AdapterMetrics) -> None:
    """The Ready gauge says what the condition says (0) while the HPA's 5 does not reach the runtime; once the
    API server takes the writes again, the next pass carries it and says Bridged."""
    gauge = metrics.registry.get_sample_value("modelmesh_autoscaler_runtime_scale_ready",
                                              {"namespace": NS, "runtimescale": "triton"})
    assert gauge == 0

    kube.clear_faults()
    clock.advance(60.0)
    await bridge.sync()
    assert kube.serving_runtime_replicas(NS, "triton") == 5
    assert (ready(kube)["status"], ready(kube)["reason"]) == ("True", "Bridged")


async def test_a_scale_the_bridge_cannot_carry_is_not_reported_as_bridged(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock, runtime: None
) -> None:
    """The runtime's namespace lacks the write Role (manifests/base/role-runtimes.yaml is per namespace): the
    HPA's 5 never reaches the runtime. `kubectl get runtimescale` said Ready True, Bridged, "spec.replicas
    follows this RuntimeScale (3)" all along; only the adapter's log knew."""
    metrics = AdapterMetrics()
    bridge = ReplicaBridge(kube_client, namespaces=[NS], clock=clock, rand=lambda: 1.0, metrics=metrics)
    kube.add_runtime_scale(NS, "triton", replicas=3)
    await bridge.sync()
    assert ready(kube)["reason"] == "Bridged"
    kube.fail(r"/servingruntimes/triton$", status=403, times=None, method="PATCH")
    hpa_writes(kube, 5)

    await bridge.sync()

    assert kube.serving_runtime_replicas(NS, "triton") == 3
    condition = ready(kube)
    assert (condition["status"], condition["reason"]) == ("False", "ServingRuntimeNotWritten")
    assert "5" in condition["message"] and "has 3" in condition["message"] and "403" in condition["message"]
    assert "patch" in condition["message"] and "servingruntimes" in condition["message"]
    await not_ready_until_the_faults_clear(kube, bridge, clock, metrics)


async def test_a_runtime_write_throttled_with_retry_after_is_not_reported_as_bridged(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock, runtime: None
) -> None:
    """API Priority and Fairness answering the runtime's writes 429 with Retry-After, pass after pass: the HPA's 5
    never reached the runtime, yet the RuntimeScale said Ready True, Bridged, for as long as the 429s lasted (a
    503 turned it ServingRuntimeNotWritten at the second failure)."""
    metrics = AdapterMetrics()
    bridge = ReplicaBridge(kube_client, namespaces=[NS], clock=clock, rand=lambda: 1.0, metrics=metrics)
    kube.add_runtime_scale(NS, "triton", replicas=3)
    await bridge.sync()
    kube.fail(r"/servingruntimes/triton$", status=429, times=None, method="PATCH", retry_after=1)
    hpa_writes(kube, 5)

    for _ in range(3):
        await bridge.sync()
        clock.advance(bridge.next_pass_in_s())

    assert kube.serving_runtime_replicas(NS, "triton") == 3
    condition = ready(kube)
    assert (condition["status"], condition["reason"]) == ("False", "ServingRuntimeNotWritten")
    assert "429" in condition["message"] and "retried with backoff" in condition["message"]
    await not_ready_until_the_faults_clear(kube, bridge, clock, metrics)


async def test_a_write_an_admission_webhook_refuses_is_not_said_to_be_retried_with_backoff(
    kube: FakeKubeApi, bridge: ReplicaBridge, clock: SteppedClock, runtime: None
) -> None:
    """A policy engine (Kyverno, Gatekeeper) that denies changes to ServingRuntimes answers 400: the bridge
    tries again at the next resync, yet `kubectl describe runtimescale` said "retried with backoff"."""
    kube.add_runtime_scale(NS, "triton", replicas=3)
    await bridge.sync()
    kube.fail(r"/servingruntimes/triton$", status=400, times=None, method="PATCH",
              message='admission webhook "validate.kyverno.svc-fail" denied the request: spec.replicas is locked')
    hpa_writes(kube, 5)

    await bridge.sync()

    message = ready(kube)["message"]
    assert "denied the request" in message
    assert "retried with backoff" not in message and "tried again at the next resync (every 15 s)" in message


async def test_one_retried_conflict_does_not_flap_the_ready_condition(
    kube: FakeKubeApi, bridge: ReplicaBridge, clock: SteppedClock, runtime: None
) -> None:
    kube.add_runtime_scale(NS, "triton", replicas=3)
    await bridge.sync()
    kube.fail(r"/servingruntimes/triton$", status=409, times=1, method="PATCH")
    hpa_writes(kube, 5)

    await bridge.sync()
    assert ready(kube)["reason"] == "Bridged"
    clock.advance(5.0)
    await bridge.sync()

    assert kube.serving_runtime_replicas(NS, "triton") == 5
    assert ready(kube)["reason"] == "Bridged"


def ready(kube: FakeKubeApi) -> dict[str, Any]:
    [condition] = [c for c in kube.stored("runtimescales", NS, "triton")["status"]["conditions"]
                   if c["type"] == "Ready"]
    return condition  # type: ignore[no-any-return]


async def test_a_hand_edit_met_by_a_new_leader_is_set_back_with_the_same_warning(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock, runtime: None,
    caplog: pytest.LogCaptureFixture
) -> None:
    """The adapter restarted (a rollout, a new leader) while someone edited the runtime's replicas: the new leader
    set them back with an INFO line like an HPA's scale, and the one line that says to stop doing it was lost
    every time leadership moved (a GitOps tool re-applying spec.replicas fights every rollout)."""
    kube.add_runtime_scale(NS, "triton", replicas=4)
    await ReplicaBridge(kube_client, namespaces=[NS], clock=clock, rand=lambda: 1.0).sync()  # the old leader

    kube.update_object("servingruntimes", NS, "triton", lambda o: o["spec"].update(replicas=7))  # kubectl edit
    with caplog.at_level(logging.INFO, "autoscaler.actuation.bridge"):
        await ReplicaBridge(kube_client, namespaces=[NS], clock=clock, rand=lambda: 1.0).sync()  # the new one

    assert kube.serving_runtime_replicas(NS, "triton") == 4
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "ServingRuntime ml/triton spec.replicas was set to 7 outside RuntimeScale ml/triton" in warning
    assert "set back to 4" in warning

    # The HPA's write that no leader carried yet is the HPA's, not a hand edit, for the next leader too.
    caplog.clear()
    hpa_writes(kube, 6)
    with caplog.at_level(logging.INFO, "autoscaler.actuation.bridge"):
        await ReplicaBridge(kube_client, namespaces=[NS], clock=clock, rand=lambda: 1.0).sync()
    assert kube.serving_runtime_replicas(NS, "triton") == 6
    assert [r.levelno for r in caplog.records] == [logging.INFO] * len(caplog.records)
    assert "RuntimeScale ml/triton: ServingRuntime triton spec.replicas 4 -> 6" in caplog.messages


async def test_a_tool_that_keeps_setting_the_runtime_replicas_is_warned_about_once_per_episode(
    kube: FakeKubeApi, bridge: ReplicaBridge, runtime: None, clock: SteppedClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A GitOps tool with self-heal applies the ServingRuntime manifest (spec.replicas: 6) whenever it drifts:
    the bridge sets it back at every resync, all day. One WARNING says what is going on; a line every 15 s
    buries everything else. The same fight after a quiet spell, or a new value, is news again."""
    kube.add_runtime_scale(NS, "triton", replicas=3)
    await bridge.sync()
    hpa_writes(kube, 2)
    await bridge.sync()

    with caplog.at_level(logging.DEBUG, "autoscaler.actuation.bridge"):
        for _ in range(6):  # an hour and a half of resyncs would be 360; six show the rule
            kube.update_object("servingruntimes", NS, "triton", lambda o: o["spec"].update(replicas=6))
            clock.advance(15)
            await bridge.sync()
            assert kube.serving_runtime_replicas(NS, "triton") == 2
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        set_backs = [r for r in caplog.records if "set back to 2" in r.getMessage()]
        assert len(warnings) == 1 and "was set to 6 outside RuntimeScale ml/triton" in warnings[0]
        assert len(set_backs) == 6  # each one is still in the DEBUG log

        caplog.clear()
        kube.update_object("servingruntimes", NS, "triton", lambda o: o["spec"].update(replicas=7))
        await bridge.sync()  # another value: news
        clock.advance(3600)
        kube.update_object("servingruntimes", NS, "triton", lambda o: o["spec"].update(replicas=7))
        await bridge.sync()  # the same fight after an hour of peace: news again
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 2 and all("was set to 7 outside" in w for w in warnings)


@pytest.mark.parametrize("seen_deleted", [True, False], ids=["a-pass-saw-it-gone", "between-two-passes"])
async def test_a_serving_runtime_deleted_and_created_again_is_not_called_a_hand_edit(
    kube: FakeKubeApi, bridge: ReplicaBridge, runtime: None, clock: SteppedClock, caplog: pytest.LogCaptureFixture,
    seen_deleted: bool,
) -> None:
    """The ServingRuntime's manifest applied again after a `kubectl delete` (or a namespace restored from a backup)
    is a new object, with `replicas: 1` as written: the WARNING "set to 1 outside RuntimeScale ... (by hand, or by
    a tool that applies the ServingRuntime's manifest)" sent its reader looking for a tool that fights the HPA."""
    kube.add_runtime_scale(NS, "triton", replicas=5)
    await bridge.sync()
    assert kube.serving_runtime_replicas(NS, "triton") == 5
    kube.delete_object("servingruntimes", NS, "triton")
    if seen_deleted:
        clock.advance(15)
        await bridge.sync()
    kube.add_serving_runtime(NS, "triton", replicas=1)  # the manifest applied again
    clock.advance(15)
    caplog.clear()  # the pass that found no runtime said so (ServingRuntimeNotFound)
    with caplog.at_level(logging.INFO, "autoscaler.actuation.bridge"):
        await bridge.sync()

    assert kube.serving_runtime_replicas(NS, "triton") == 5  # the RuntimeScale (its HPA) still decides
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    [line] = [m for m in caplog.messages if "created again" in m]
    assert line.startswith("ServingRuntime ml/triton was deleted and created again (a new object, with "
                           "spec.replicas 1): set to 5, what RuntimeScale ml/triton asks"), line
