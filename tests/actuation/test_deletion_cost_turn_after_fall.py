"""A ranking that turns after `modelmesh_desired_replicas` fell: the load moves onto the pod carrying the lowest
deletion cost while the lower value is already served (a reviewer's `scale-down-tau-s: "0"` run). The hold judges
only the refresh where the value falls, and the new costs waited their per-pod minute, so an HPA with no scale-down
stabilization (as the shipped example) removed the pod that had just become the busiest at its next sync.

The real refresher, hold and writer (its pass after each refresh, as the actuator runs it), patching the fake
Kubernetes API through the real client; the HPA is the simulator's with the shipped example's behavior, reading
the API's answer, and the pod removed is the one the ReplicaSet controller picks by the costs on the pods."""

from __future__ import annotations

import logging
import random
import time
from typing import Any

import pytest

from autoscaler.actuation.deletion_cost import DeletionCostWriter
from autoscaler.api.app import build_api_app
from autoscaler.kube.client import KubeClient
from autoscaler.names import DELETION_COST_ANNOTATION, ServedMetric
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.simulation.hpa import HorizontalPodAutoscaler
from autoscaler.simulation.hpa_spec import (
    DEFAULT_SCALE_UP,
    Behavior,
    HpaPod,
    HpaSpec,
    MetricSpec,
    ScalingPolicy,
    ScalingRules,
)
from tests.actuation.conftest import KEY, SteppedClock, add_pods, refresher_writing_costs
from tests.actuation.fleet_load import FleetLoad
from tests.actuation.test_deletion_cost_hold import PODS, POLICY, T0, Cluster, LoadSource
from tests.actuation.test_replicaset_choice import replicaset_removes
from tests.fakes.kube import FakeKubeApi

SHIPPED_EXAMPLE = Behavior(DEFAULT_SCALE_UP, ScalingRules(0, "Max", (ScalingPolicy("Percent", 100, 15),)))
"""manifests/examples/hpa-triton.yaml: scale down at any sync, as far as the metric says."""
DESIRED = ServedMetric.DESIRED_REPLICAS.value
BUSY = {"pod-a": 150.0, "pod-b": 100.0, "pod-c": 40.0}  # 3 replicas; pod-c the least needed
FALLEN = {"pod-a": 90.0, "pod-b": 60.0, "pod-c": 20.0}  # 2 replicas; pod-c still the least needed
TURNED = {"pod-a": 20.0, "pod-b": 20.0, "pod-c": 90.0}  # still 2; pod-c now clearly the most needed


POLICIES = {"default weights": POLICY, "need_weight_cache 0": RuntimePolicy(
    target_rps_per_pod=100.0, scale_down_tau_s=0.0, need_weight_cache=0.0)}


@pytest.mark.parametrize("weights", list(POLICIES))
async def test_a_ranking_that_turns_after_the_fall_is_on_the_pods_before_the_hpa_next_acts(
        weights: str, kube: FakeKubeApi, kube_client: KubeClient, aiohttp_client: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    add_pods(kube, PODS)
    clock = SteppedClock(T0)
    source = LoadSource()
    refresher, writer, metrics = refresher_writing_costs(source, POLICIES[weights], kube_client, clock)
    api = await aiohttp_client(build_api_app(refresher, metrics))
    cluster = Cluster(kube, api, refresher, source, clock)
    hpa = HorizontalPodAutoscaler(HpaSpec((MetricSpec(DESIRED, "External", "AverageValue", 1.0),),
                                          max_replicas=len(PODS), behavior=SHIPPED_EXAMPLE))
    hpa_pods = [HpaPod(name, ready=True) for name in PODS]

    source.load = BUSY
    await cluster.refresh(0.0)
    await writer.sync()
    assert hpa.sync(clock(), len(PODS), hpa_pods, {DESIRED: await cluster.served()}).desired == len(PODS)

    # The adapter refreshes every 5 s (--refresh-interval 5), the HPA syncs every 15 s: two refreshes between.
    source.load = FALLEN
    await cluster.refresh(5.0)
    await writer.sync()
    assert await cluster.served() < len(PODS)  # the fall, pod-c rightly carrying the lowest cost
    source.load = TURNED
    await cluster.refresh(5.0)
    await writer.sync()
    assert await cluster.served() < len(PODS), (await cluster.debug())["reason"]

    clock.advance(5.0)
    desired = hpa.sync(clock(), len(PODS), hpa_pods, {DESIRED: await cluster.served()}).desired
    assert desired < len(PODS)
    pods = kube.objects("pods", KEY.namespace)
    removed = replicaset_removes(pods, len(PODS) - desired, time.time())
    carried = {pod["metadata"]["name"]: (pod["metadata"].get("annotations") or {}).get(DELETION_COST_ANNOTATION)
               for pod in pods}
    assert "pod-c" not in removed, (
        f"the ReplicaSet removed {removed}, pod-c serving {TURNED['pod-c']:g} of "
        f"{sum(TURNED.values()):g} req/s; costs on the pods {carried}; /debug held "
        f"{(await cluster.debug())['held']}")
    said = [r.getMessage() for r in caplog.records if "ranking turned" in r.getMessage()]
    assert len(said) == 1 and KEY.deployment in said[0] and "writing deletion costs now" in said[0], said
    await api.close()


async def busy_cluster(kube: FakeKubeApi, kube_client: KubeClient,
                       aiohttp_client: Any) -> tuple[Cluster, DeletionCostWriter]:
    """Three pods at `BUSY` load, refreshed once with their costs written: where the turn tests begin."""
    add_pods(kube, PODS)
    clock = SteppedClock(T0)
    source = LoadSource()
    refresher, writer, metrics = refresher_writing_costs(source, POLICY, kube_client, clock)
    cluster = Cluster(kube, await aiohttp_client(build_api_app(refresher, metrics)), refresher, source, clock)
    source.load = BUSY
    await cluster.refresh(0.0)
    await writer.sync()
    return cluster, writer


async def test_a_ready_pod_whose_scrape_fails_is_no_turn(
        kube: FakeKubeApi, kube_client: KubeClient, aiohttp_client: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A reviewer's run: pod-a, the busiest, keeps the highest cost while its exporter's scrape fails. Counted as
    the least needed pod beside the fresh ones, it made pod-b and pod-c look misplaced, and the line below was
    said at every refresh while nothing turned."""
    caplog.set_level(logging.INFO)
    cluster, writer = await busy_cluster(kube, kube_client, aiohttp_client)
    source, api = cluster.source, cluster.api
    source.load = {"pod-a": 20.0, "pod-b": 15.0, "pod-c": 10.0}  # the fall, the ranking as before
    for _ in range(3):
        await cluster.refresh(15.0)
        await writer.sync()
    assert await cluster.served() < len(PODS)

    source.scrapes_failing = frozenset({"pod-a"})
    caplog.clear()
    for _ in range(20):
        await cluster.refresh(15.0)
        await writer.sync()
    said = [r.getMessage() for r in caplog.records if "ranking turned" in r.getMessage()]
    assert said == [], f"said {len(said)} times over 20 refreshes; costs on the pods {cluster.costs()}"
    await api.close()


@pytest.mark.parametrize("pods", [20])
async def test_under_load_noise_a_ready_pod_whose_scrape_fails_hurries_no_writes(
        pods: int, kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture) -> None:
    """The same under 40-60 req/s noise: every fresh pod a little busier than the stale one looked misplaced, and
    the noise's changed costs were written at every refresh, not at each pod's minute (a reviewer counted 20 pods'
    PATCHes over 5 minutes go from 73 to 171)."""
    caplog.set_level(logging.INFO)
    names = [f"pod-{i:02d}" for i in range(pods)]
    add_pods(kube, names)
    clock = SteppedClock(T0)
    source = FleetLoad(names)
    refresher, writer, _ = refresher_writing_costs(source, POLICY, kube_client, clock)
    rates = random.Random(3)
    source.load = {**dict.fromkeys(names, 98.0), names[0]: 150.0}  # pod-00 the busiest: the highest cost
    await refresher.refresh_once()
    await writer.sync()
    for _ in range(3):  # the fall, pod-00 still the busiest
        clock.advance(15.0)
        source.load = {**{name: rates.choice((40.0, 50.0, 60.0)) for name in names}, names[0]: 90.0}
        await refresher.refresh_once()
        await writer.sync()

    source.scrapes_failing = frozenset({names[0]})
    caplog.clear()
    start = len(kube.patches)
    for _ in range(20):
        clock.advance(15.0)
        source.load = {name: rates.choice((40.0, 50.0, 60.0)) for name in names}
        await refresher.refresh_once()
        await writer.sync()
    said = [r.getMessage() for r in caplog.records if "ranking turned" in r.getMessage()]
    assert said == [], f"said {len(said)} times over 20 refreshes, {len(kube.patches) - start} cost PATCHes"


async def test_a_turn_whose_writes_are_refused_is_said_once_until_its_costs_are_on_the_pods(
        kube: FakeKubeApi, kube_client: KubeClient, aiohttp_client: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A reviewer's run: the Role lacks `patch` on pods while the ranking turned after the fall. The line was said
    at every refresh (20 times in 5 minutes), beside the writer's own "next try in 300 s"; it is said once for the
    turn, and again for a turn after a refresh found its costs on the pods."""
    caplog.set_level(logging.INFO)
    cluster, writer = await busy_cluster(kube, kube_client, aiohttp_client)
    source, api = cluster.source, cluster.api
    source.load = FALLEN
    await cluster.refresh(5.0)
    await writer.sync()
    assert await cluster.served() < len(PODS)

    kube.forbid("patch", "pods")
    source.load = TURNED
    for _ in range(20):
        await cluster.refresh(15.0)
        await writer.sync()
    said = [r.getMessage() for r in caplog.records if "ranking turned" in r.getMessage()]
    assert len(said) == 1 and KEY.deployment in said[0], f"said {len(said)} times over 20 refreshes"

    kube.clear_faults()  # the Role fixed: the writer's retry puts the turned ranking on the pods
    for _ in range(40):
        if max(PODS, key=lambda pod: cluster.costs()[pod] or 0) == "pod-c":
            break
        await cluster.refresh(15.0)
        await writer.sync()
    assert max(PODS, key=lambda pod: cluster.costs()[pod] or 0) == "pod-c", cluster.costs()
    await cluster.refresh(15.0)  # a refresh finds them there: that turn is over
    await writer.sync()
    source.load = {"pod-a": 90.0, "pod-b": 20.0, "pod-c": 20.0}  # turns again, onto a pod carrying a low cost
    for _ in range(3):
        await cluster.refresh(15.0)
        await writer.sync()
    assert await cluster.served() < len(PODS)
    said = [r.getMessage() for r in caplog.records if "ranking turned" in r.getMessage()]
    assert len(said) == 2, f"said {len(said)} times; costs on the pods {cluster.costs()}"
    await api.close()
