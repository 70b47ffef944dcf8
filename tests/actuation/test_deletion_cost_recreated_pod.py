"""A pod deleted and created again under the same name (a controller that reuses names, a StatefulSet-like
runtime): the new pod object carries no deletion cost, whatever the writer wrote on the old one. What the API
server receives, with real discovery watching the fake Kubernetes API as the adapter runs it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.actuation.deletion_cost import DeletionCostWriter, WriterSettings
from autoscaler.kube.client import KubeClient
from autoscaler.names import DELETION_COST_ANNOTATION
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.kube_pods import KubePodDiscovery
from tests.actuation.conftest import KEY, SteppedClock, connected, views_of
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

LABELS = {"modelmesh-service": "modelmesh-serving", "name": KEY.deployment}
RANKED = {"pod-a": 900, "pod-b": 300}
REFRESH_S = 15.0


@contextlib.asynccontextmanager
async def watching(kube: FakeKubeApi, pods: Iterable[str] = ()) -> AsyncIterator[KubePodDiscovery]:
    """The pods (none: a test that put its own on `kube`), and discovery watching the runtime's as `serve` runs
    it, with the kubeconfig's token (the fake refuses none), its watch open."""
    for name in pods:
        kube.add_pod(KEY.namespace, name, labels=LABELS)
    subject = KubePodDiscovery(kube.client_configuration(), runtimes=[KEY], discover=False, resync_interval_s=0.1,
                               request_timeout_s=2.0, backoff_initial_s=0.02, backoff_max_s=0.1)
    await subject.start()
    try:
        await kube.wait_for_watches(1, "pods")
        yield subject
    finally:
        await subject.close()


@pytest.fixture
async def discovery(kube: FakeKubeApi) -> AsyncIterator[KubePodDiscovery]:
    async with watching(kube, list(RANKED)) as subject:
        yield subject


def seen_uid(discovery: KubePodDiscovery, pod: str) -> str | None:
    """The pod's uid as discovery's inventory has it (what the refresh's views are built from)."""
    return next((target.uid for target in discovery.inventory()[KEY].pods if target.name == pod), None)


def cost_on(kube: FakeKubeApi, pod: str) -> str | None:
    return kube.pod_annotations(KEY.namespace, pod).get(DELETION_COST_ANNOTATION)


async def recreate(kube: FakeKubeApi, discovery: KubePodDiscovery, pod: str) -> None:
    """Delete the pod and create it again under its name, as a new object (new uid, no annotations); return
    once discovery sees the new one."""
    kube.delete_pod(KEY.namespace, pod)
    uid = kube.add_pod(KEY.namespace, pod, labels=LABELS)["metadata"]["uid"]
    await eventually(lambda: seen_uid(discovery, pod) == uid)


async def test_a_pod_created_again_under_its_name_gets_its_cost_at_the_next_refresh(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock, discovery: KubePodDiscovery,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The writer remembered what it wrote by namespace and name: the new pod-b was taken for the old one,
    which carried 300, and went without a cost until the 5-minute rewrite, so a scale-down meanwhile could
    remove it (cost 0 by default) instead of the pod the ranking chose. Now it is written at the next refresh,
    and the pod that was not re-created is left alone."""
    caplog.set_level(logging.INFO, logger="autoscaler.actuation.deletion_cost")
    writer = DeletionCostWriter(kube_client, AdapterMetrics(), settings=WriterSettings(qps=None), clock=clock,
                                cluster=discovery)
    views = views_of(RANKED)
    writer.offer(views)
    await writer.sync()
    assert {pod: cost_on(kube, pod) for pod in RANKED} == {"pod-a": "900", "pod-b": "300"}
    await eventually(lambda: discovery.deletion_cost(KEY.namespace, "pod-b") == "300")

    await recreate(kube, discovery, "pod-b")
    assert cost_on(kube, "pod-b") is None
    kube.clear_requests()
    clock.advance(REFRESH_S)
    writer.offer(views)
    await writer.sync()

    assert cost_on(kube, "pod-b") == "300"
    assert [patch.name for patch in kube.patches] == ["pod-b"]
    assert ("deletion costs: 1 pods were deleted and created again under their names (a new uid, without the "
            "annotation written on the old one); writing them as new pods: ml/pod-b") in caplog.messages


async def test_a_pod_created_again_is_written_once_and_then_left_alone(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock, discovery: KubePodDiscovery
) -> None:
    """The new pod's cost is written once: the refreshes after that (before the 5-minute check) send nothing."""
    writer = DeletionCostWriter(kube_client, AdapterMetrics(), settings=WriterSettings(qps=None), clock=clock,
                                cluster=discovery)
    views = views_of(RANKED)
    writer.offer(views)
    await writer.sync()
    await eventually(lambda: discovery.deletion_cost(KEY.namespace, "pod-b") == "300")
    await recreate(kube, discovery, "pod-b")
    clock.advance(REFRESH_S)
    writer.offer(views)
    await writer.sync()
    await eventually(lambda: discovery.deletion_cost(KEY.namespace, "pod-b") == "300")
    kube.clear_requests()

    for _ in range(4):
        clock.advance(REFRESH_S)
        writer.offer(views)
        await writer.sync()
    assert kube.patches == []
    assert {pod: cost_on(kube, pod) for pod in RANKED} == {"pod-a": "900", "pod-b": "300"}


async def test_without_pod_objects_the_writer_still_writes_by_name(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock, discovery: KubePodDiscovery
) -> None:
    """With a targets file the adapter sees no pod objects (no uid, no annotation): a re-created pod is then
    written at the 5-minute rewrite, as every pod is, and nothing is written twice meanwhile."""
    writer = DeletionCostWriter(kube_client, AdapterMetrics(), settings=WriterSettings(qps=None), clock=clock)
    views = views_of(RANKED)
    writer.offer(views)
    await writer.sync()
    await recreate(kube, discovery, "pod-b")
    kube.clear_requests()
    clock.advance(REFRESH_S)
    writer.offer(views)
    await writer.sync()
    assert kube.patches == []

    clock.advance(300)
    writer.offer(views)
    await writer.sync()
    assert cost_on(kube, "pod-b") == "300"


FLEET = {"pod-a": 900, "pod-b": 300, "pod-c": 0, "pod-d": 600}


@settings(max_examples=15, deadline=None)
@given(steps=st.lists(st.sets(st.sampled_from(sorted(FLEET))), min_size=1, max_size=8))
def test_after_every_refresh_each_pod_carries_its_cost_and_only_pods_created_again_are_written(
    steps: list[set[str]],
) -> None:
    """Whichever pods are created again between refreshes (none, some, the same twice in a row), the refresh
    after writes exactly those, and then every pod carries its cost: none waits for the 5-minute rewrite,
    none is written twice. (`steps[i]`: the pods created again before the i-th refresh, within 5 minutes.)"""
    asyncio.run(_refreshes_with_pods_created_again(steps))


async def _refreshes_with_pods_created_again(steps: list[set[str]]) -> None:
    async with FakeKubeApi() as kube, watching(kube, list(FLEET)) as discovery, \
            connected(kube, KEY.namespace) as client:
        clock = SteppedClock()
        writer = DeletionCostWriter(client, AdapterMetrics(), settings=WriterSettings(qps=None), clock=clock,
                                    cluster=discovery)
        views = views_of(FLEET)
        carried = {pod: str(cost) for pod, cost in FLEET.items()}
        writer.offer(views)
        await writer.sync()
        await eventually(lambda: all(discovery.deletion_cost(KEY.namespace, pod) == carried[pod]
                                     for pod in FLEET))
        for recreated in steps:
            for pod in sorted(recreated):
                await recreate(kube, discovery, pod)
            kube.clear_requests()
            clock.advance(REFRESH_S)
            writer.offer(views)
            await writer.sync()

            assert sorted(patch.name for patch in kube.patches) == sorted(recreated)
            assert {pod: cost_on(kube, pod) for pod in FLEET} == carried
            await eventually(lambda: all(discovery.deletion_cost(KEY.namespace, pod) == carried[pod]
                                         for pod in FLEET))
