"""How `serve` settings turn into writing (or not writing) deletion costs: off means no Kubernetes calls at
all, a targets file without a kubeconfig means metrics only, and with a kubeconfig the refresh loop's views
reach the pods, through the elected leader when election is on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from autoscaler import __version__
from autoscaler.actuation.actuator import DeletionCostActuator, start_actuator
from autoscaler.actuation.leader import LeaseElector
from autoscaler.actuation.lease_timing import LeaseConfig
from autoscaler.kube.client import KubeClient
from autoscaler.kube.errors import KubeConfigError
from autoscaler.model import PodSample, RuntimeSnapshot
from autoscaler.names import DELETION_COST_ANNOTATION, ServedMetric
from autoscaler.policies.config import PolicyBook
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.settings import ServeSettings
from autoscaler.sources.base import SourceDefaults
from tests.actuation.conftest import KEY, add_pods, no_system_trust
from tests.fakes.kube import FakeKubeApi

PODS = {"pod-busy": 90.0, "pod-some": 30.0, "pod-idle": 0.0}
SHORT_LEASE = {"leader_elect_lease_duration_s": 1.0, "leader_elect_renew_deadline_s": 0.6,
               "leader_elect_retry_period_s": 0.1}


class SnapshotSource(SourceDefaults):
    """A metric source that reports the same fresh load every refresh (no exporters needed)."""

    name = "test"
    errors: dict[str, int] = {}

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        pods = tuple(PodSample(name, sampled_at=now - 1, requests_per_second=rps) for name, rps in PODS.items())
        return [RuntimeSnapshot(KEY, pods, taken_at=now, replicas=len(pods))]

    async def close(self) -> None:
        return None


@pytest.fixture
def refresher() -> Refresher:
    return Refresher(SnapshotSource(), PolicyBook(), AdapterMetrics())


@pytest.fixture(autouse=True)
def outside_a_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


@pytest.fixture
async def stopper() -> AsyncIterator[list[DeletionCostActuator]]:
    started: list[DeletionCostActuator] = []
    yield started
    for actuator in started:
        await actuator.stop()


async def wait_for(condition: Callable[[], object], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


def written(kube: FakeKubeApi) -> dict[str, str | None]:
    return {pod: kube.pod_annotations(KEY.namespace, pod).get(DELETION_COST_ANNOTATION) for pod in PODS}


async def test_deletion_cost_and_bridge_off_make_no_kubernetes_calls(
    kube: FakeKubeApi, kubeconfig: Path, refresher: Refresher, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    settings = ServeSettings(deletion_cost=False, bridge=False, kubeconfig=kubeconfig, leader_elect=True)

    assert await start_actuator(settings, refresher, refresher.metrics) is None
    await refresher.refresh_once()

    assert kube.requests == []
    assert refresher.listeners == []
    assert "--deletion-cost=off" in caplog.text


async def test_targets_without_kubeconfig_outside_a_cluster_serve_metrics_only(
    refresher: Refresher, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    settings = ServeSettings(targets=tmp_path / "targets.yaml", kubeconfig=None)

    assert await start_actuator(settings, refresher, refresher.metrics) is None

    [record] = [r for r in caplog.records if "deletion costs cannot be written" in r.getMessage()]
    assert record.levelno == logging.WARNING


async def test_an_unloadable_kubeconfig_stops_start_up(refresher: Refresher, tmp_path: Path) -> None:
    settings = ServeSettings(kubeconfig=tmp_path / "missing")

    with pytest.raises(KubeConfigError):
        await start_actuator(settings, refresher, refresher.metrics)


async def test_contradictory_lease_durations_stop_start_up(kubeconfig: Path, refresher: Refresher) -> None:
    settings = ServeSettings(kubeconfig=kubeconfig, leader_elect=True, leader_elect_lease_duration_s=5,
                             leader_elect_renew_deadline_s=10)

    with pytest.raises(ValueError, match="lease-duration"):
        await start_actuator(settings, refresher, refresher.metrics)


async def test_an_adapter_that_writes_nothing_to_the_cluster_has_no_leader_series(refresher: Refresher) -> None:
    """`--deletion-cost=off` with the bridge off writes nothing, so no replica leads anything and the
    ModelMeshAutoscalerNoLeader alert (leader series all 0) must not fire: the series is absent, not 0."""
    settings = ServeSettings(deletion_cost=False, bridge=False)

    assert await start_actuator(settings, refresher, refresher.metrics) is None
    assert refresher.metrics.registry.get_sample_value("modelmesh_autoscaler_leader") is None


async def test_a_replica_waiting_for_the_lease_publishes_0_at_once(
    kube: FakeKubeApi, kubeconfig: Path, refresher: Refresher, stopper: list[DeletionCostActuator]
) -> None:
    """Another replica holds the Lease: this one's series is 0 from the start (absent, the alert that watches
    for every replica at 0 would miss a fleet of followers whose leader is gone)."""
    with no_system_trust():  # plain http: the system's CA bundle, read for every client, is never used
        other = await KubeClient.connect(kubeconfig, user_agent="replica-1")
    try:
        holder = LeaseElector(other, LeaseConfig(namespace="ml", name="modelmesh-autoscaler", identity="replica-1",
                                                 lease_duration_s=60, renew_deadline_s=40, retry_period_s=2))
        assert await holder.try_acquire_or_renew()
    finally:
        await other.close()
    settings = ServeSettings(kubeconfig=kubeconfig, leader_elect=True, **SHORT_LEASE)  # type: ignore[arg-type]
    actuator = await start_actuator(settings, refresher, refresher.metrics, identity="replica-2")
    assert actuator is not None and actuator.elector is not None
    stopper.append(actuator)
    await asyncio.sleep(0.5)  # a few of its tries

    assert not actuator.elector.is_leader
    assert refresher.metrics.registry.get_sample_value("modelmesh_autoscaler_leader") == 0


async def test_outside_a_cluster_leader_election_defaults_off_and_this_replica_writes(
    kube: FakeKubeApi, kubeconfig: Path, refresher: Refresher, stopper: list[DeletionCostActuator]
) -> None:
    add_pods(kube, PODS)
    actuator = await start_actuator(ServeSettings(kubeconfig=kubeconfig), refresher, refresher.metrics)
    assert actuator is not None
    stopper.append(actuator)
    assert refresher.scale_asks is not None  # as the refresh loop's first refresh does (`Refresher.run`)
    assert await refresher.scale_asks.wait_settled(5.0)

    await refresher.refresh_once()
    await wait_for(lambda: all(written(kube).values()))

    # Request share alone (no GPUs): 90/90 -> bucket 9, 30/90 -> bucket 3, idle -> 0.
    assert written(kube) == {"pod-busy": "900", "pod-some": "300", "pod-idle": "0"}
    assert not any(request.resource == "leases" for request in kube.requests)
    assert refresher.metrics.registry.get_sample_value("modelmesh_autoscaler_leader") == 1


async def test_the_elected_leader_writes_and_releases_the_lease_on_shutdown(
    kube: FakeKubeApi, kubeconfig: Path, refresher: Refresher
) -> None:
    add_pods(kube, PODS)
    settings = ServeSettings(kubeconfig=kubeconfig, leader_elect=True, **SHORT_LEASE)  # type: ignore[arg-type]
    actuator = await start_actuator(settings, refresher, refresher.metrics, identity="replica-1")
    assert actuator is not None and actuator.elector is not None
    try:
        await wait_for(lambda: actuator.elector is not None and actuator.elector.is_leader)
        # The refresh hands its views to the writer and returns with the writer's pass still under way, its PATCHes
        # held unanswered here: it never waits on them (asked of the pass, not of a clock: load stretches a refresh).
        held = kube.hold_answer(r"/pods/", times=None, method="PATCH")
        await asyncio.wait_for(refresher.refresh_once(), timeout=30)
        writer = actuator.writer
        assert writer is not None and (writer.offers, writer.offers_passed) == (1, 0)
        assert not any(written(kube).values())
        held.release()
        await wait_for(lambda: all(written(kube).values()))
        lease = kube.get("leases", "ml", "modelmesh-autoscaler")  # the kubeconfig context's namespace
        assert lease is not None and lease["spec"]["holderIdentity"] == "replica-1"
        assert refresher.metrics.registry.get_sample_value("modelmesh_autoscaler_leader") == 1
        assert {r.headers["User-Agent"] for r in kube.requests if r.method == "PATCH"} == {
            f"modelmesh-autoscaler/{__version__} (replica-1)"}
    finally:
        await actuator.stop()

    lease = kube.get("leases", "ml", "modelmesh-autoscaler")
    assert lease is not None and not lease["spec"].get("holderIdentity")
    assert refresher.listeners == []
    assert refresher.metrics.registry.get_sample_value("modelmesh_autoscaler_leader") == 0


async def test_the_lease_is_released_on_shutdown_when_the_api_server_answers_slowly(
    kube: FakeKubeApi, kubeconfig: Path, refresher: Refresher
) -> None:
    """A release that takes seconds (a loaded API server) is not cut short by the stop: a stop that gave up on it
    would leave the followers waiting for the Lease to expire."""
    settings = ServeSettings(kubeconfig=kubeconfig, leader_elect=True)  # the shipped lease: a call may take 2.5 s
    actuator = await start_actuator(settings, refresher, refresher.metrics, identity="replica-1")
    assert actuator is not None and actuator.elector is not None
    try:
        await wait_for(lambda: actuator.elector is not None and actuator.elector.is_leader)
        assert actuator.kube.request_timeout_s >= 2.0
        kube.delay("/leases/", 1.5, method="PUT")  # within it, and longer than a stop waits before cancelling again
    finally:
        await actuator.stop()

    lease = kube.get("leases", "ml", "modelmesh-autoscaler")
    assert lease is not None and not lease["spec"].get("holderIdentity")


async def test_a_restarted_adapter_counts_what_the_hpa_asked_of_the_runtimescale_as_running(
    kube: FakeKubeApi, kubeconfig: Path, refresher: Refresher, stopper: list[DeletionCostActuator]
) -> None:
    """The HPA wrote 5 to the RuntimeScale; the three pods alone ask for 3 (no capacity signal: never below
    the Ready pods). A refresh loop with no memory starts its recommendation at the 5 (the warm-up seed)."""
    add_pods(kube, PODS)
    kube.add_runtime_scale(KEY.namespace, "triton", replicas=5)
    actuator = await start_actuator(ServeSettings(kubeconfig=kubeconfig), refresher, refresher.metrics)
    assert actuator is not None
    stopper.append(actuator)
    await wait_for(lambda: refresher.scale_asks is not None and refresher.scale_asks.replicas_for(KEY) == 5)

    await refresher.refresh_once()

    assert refresher.views[KEY].values[ServedMetric.DESIRED_REPLICAS].value == 5.0
