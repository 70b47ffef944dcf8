"""A new leader (after a failover or a rolling upgrade) and the costs the previous leader left on the pods: what
the API server receives, with real discovery watching the fake Kubernetes API as the adapter runs it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from autoscaler.actuation.deletion_cost import DeletionCostWriter, WriterSettings
from autoscaler.kube.client import KubeClient
from autoscaler.names import DELETION_COST_ANNOTATION
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.kube_pods import KubePodDiscovery
from tests.actuation.conftest import KEY, SteppedClock, pod_view, runtime_view
from tests.actuation.test_deletion_cost_recreated_pod import LABELS, watching
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

LEFT_BY_THE_OLD_LEADER = {"pod-a": "900", "pod-b": "300", "pod-c": "0", "pod-d": "500", "pod-e": None}
RANKED_NOW = {"pod-a": 900, "pod-b": 300, "pod-c": 0, "pod-d": 200, "pod-e": 600}


@pytest.fixture
async def discovery(kube: FakeKubeApi) -> AsyncIterator[KubePodDiscovery]:
    for name, cost in LEFT_BY_THE_OLD_LEADER.items():
        kube.add_pod(KEY.namespace, name, labels=LABELS,
                     annotations={DELETION_COST_ANNOTATION: cost} if cost is not None else None)
    async with watching(kube) as subject:
        yield subject


def new_leader(kube_client: KubeClient, clock: SteppedClock, discovery: KubePodDiscovery | None,
               spread: float = 0.5) -> DeletionCostWriter:
    return DeletionCostWriter(kube_client, AdapterMetrics(), settings=WriterSettings(qps=None), clock=clock,
                              rand=lambda: spread, cluster=discovery)


async def test_a_new_leader_writes_only_the_costs_the_pods_do_not_already_carry(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock, discovery: KubePodDiscovery
) -> None:
    writer = new_leader(kube_client, clock, discovery)
    writer.offer({KEY: runtime_view([pod_view(name, cost) for name, cost in RANKED_NOW.items()])})
    await writer.sync()

    # pod-d's cost changed (500 -> 200) and pod-e had none; the other three already say what it would write.
    assert sorted(patch.name for patch in kube.patches) == ["pod-d", "pod-e"]
    await eventually(lambda: discovery.deletion_cost(KEY.namespace, "pod-e") == "600")


async def test_without_discovery_a_new_leader_writes_every_pod_once(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock, discovery: KubePodDiscovery
) -> None:
    """With a targets file the adapter sees no pod objects: every pod is written once per term, as before."""
    writer = new_leader(kube_client, clock, None)
    writer.offer({KEY: runtime_view([pod_view(name, cost) for name, cost in RANKED_NOW.items()])})
    await writer.sync()

    assert sorted(patch.name for patch in kube.patches) == sorted(RANKED_NOW)


async def test_the_costs_left_in_place_are_checked_within_five_minutes_spread_out_and_not_rewritten(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock, discovery: KubePodDiscovery,
    caplog: pytest.LogCaptureFixture
) -> None:
    """Left in place, a cost is looked at again at its periodic moment, spread over the 5 minutes rather than all
    at once (here they count as written 150 s, half of 300 s, before the pass): a pod that still carries it is
    not patched. One edited by hand meanwhile is written again at the next pass (it waited for its periodic
    moment, up to 5 minutes, while the ranking hold took the cost for in place), said once at INFO."""
    caplog.set_level(logging.DEBUG, "autoscaler.actuation.deletion_cost")
    writer = new_leader(kube_client, clock, discovery, spread=0.5)
    view = {KEY: runtime_view([pod_view(name, cost) for name, cost in RANKED_NOW.items()])}
    writer.offer(view)
    await writer.sync()
    await kube_client.patch_pod_annotations(KEY.namespace, "pod-b", {DELETION_COST_ANNOTATION: "0"})
    await eventually(lambda: discovery.deletion_cost(KEY.namespace, "pod-b") == "0")
    kube.clear_requests()

    clock.advance(1)
    writer.offer(view)
    await writer.sync()
    assert [(patch.name, patch.body) for patch in kube.patches] == [
        ("pod-b", {"metadata": {"annotations": {DELETION_COST_ANNOTATION: "300"}}})]
    said = [r.getMessage() for r in caplog.records if "another writer" in r.getMessage()]
    assert len(said) == 1 and "1 pods carry a cost another writer set" in said[0] and "ml/pod-b (0)" in said[0], said
    await eventually(lambda: discovery.deletion_cost(KEY.namespace, "pod-b") == "300")
    kube.clear_requests()

    def checked() -> list[str]:
        return [r.getMessage() for r in caplog.records if "periodic check still carry" in r.getMessage()]

    clock.advance(148)
    writer.offer(view)
    await writer.sync()
    assert kube.patches == [] and not checked()

    clock.advance(2)
    writer.offer(view)
    await writer.sync()
    assert kube.patches == [] and checked() == ["deletion costs: 2 pods due for their periodic check still carry "
                                                "their cost"]  # pod-a and pod-c, left in place


async def test_a_periodic_pass_over_a_fleet_whose_pods_carry_their_costs_sends_nothing(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock, discovery: KubePodDiscovery
) -> None:
    """Every 5 minutes each pod's cost was written again although the pod watch showed it in place: at 10,000
    pods that is 33 patches a second, over the writer's 20 qps, forever, each a pod update sent to every pod
    watcher of the cluster, and a backlog in which a changed cost waits. Now a cost the watch shows in place
    counts as checked; only what the watch shows different is written."""
    writer = new_leader(kube_client, clock, discovery)
    view = {KEY: runtime_view([pod_view(name, cost) for name, cost in RANKED_NOW.items()])}
    writer.offer(view)
    await writer.sync()
    await eventually(lambda: all(discovery.deletion_cost(KEY.namespace, name) == str(cost)
                                 for name, cost in RANKED_NOW.items()))
    kube.clear_requests()

    for _ in range(3):  # three periodic moments: none of them writes
        clock.advance(301)
        writer.offer(view)
        await writer.sync()
    assert kube.patches == []


async def test_a_cost_changed_by_hand_after_the_watch_saw_it_is_written(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock, discovery: KubePodDiscovery
) -> None:
    """The watch follows the annotation: a cost someone edits before the new leader's first pass is written."""
    await kube_client.patch_pod_annotations(KEY.namespace, "pod-a", {DELETION_COST_ANNOTATION: "-100"})
    await eventually(lambda: discovery.deletion_cost(KEY.namespace, "pod-a") == "-100")
    kube.clear_requests()
    writer = new_leader(kube_client, clock, discovery)
    writer.offer({KEY: runtime_view([pod_view(name, cost) for name, cost in RANKED_NOW.items()])})
    await writer.sync()

    assert sorted(patch.name for patch in kube.patches) == ["pod-a", "pod-d", "pod-e"]
