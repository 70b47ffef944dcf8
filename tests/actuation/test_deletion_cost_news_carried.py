"""A refused deletion-cost write is said over once the pod carries the cost wanted, written or not.

The log promises one WARNING when writes in a namespace are refused (403: a Role without `patch` on pods), and one
INFO line `deletion costs are written again ...` when they are over (docs/operations.md, Troubleshooting: "The wrong
pod is removed"). The news closed a refusal only when that very pod was written. Where the pod's wanted cost went
back to the one already on it (the load moved back), there was nothing to write, so the INFO line did not come until
the refused write's 5-minute retry, or never where a Lease hand-over came first; and meanwhile a new refusal in that
namespace, for another pod (a Role broken again), was logged at DEBUG only: the refusal read as still the one warned
about.

The writer runs against the fake Kubernetes API with real pod discovery watching it, as `serve` wires them.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from autoscaler.actuation.deletion_cost import DeletionCostWriter
from autoscaler.kube.client import KubeClient
from autoscaler.names import DELETION_COST_ANNOTATION
from autoscaler.sources.kube_pods import KubePodDiscovery
from tests.actuation.conftest import KEY, SteppedClock, pod_view, runtime_view
from tests.actuation.test_deletion_cost_new_term import new_leader
from tests.actuation.test_deletion_cost_recreated_pod import watching
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

WARNED = "deletion costs of 1 pods in namespace ml not written (403"
OVER = "deletion costs are written again in namespace ml"


@pytest.fixture
async def discovery(kube: FakeKubeApi) -> AsyncIterator[KubePodDiscovery]:
    async with watching(kube, ["pod-a", "pod-b"]) as subject:
        yield subject


def said(caplog: pytest.LogCaptureFixture, words: str) -> list[tuple[str, str]]:
    """(level, message) of the writer's lines that carry `words`, in order."""
    return [(record.levelname, record.getMessage()) for record in caplog.records
            if record.name == "autoscaler.actuation.deletion_cost" and words in record.getMessage()]


async def ranked(writer: DeletionCostWriter, clock: SteppedClock, seconds: float, **costs: int) -> None:
    """`seconds` later, a refresh that ranks the pods `costs` (pod_a=500, ...), and the writer's pass on it."""
    clock.advance(seconds)
    writer.offer({KEY: runtime_view([pod_view(name.replace("_", "-"), cost) for name, cost in costs.items()])})
    await writer.sync()


async def test_a_refused_pod_whose_wanted_cost_is_back_on_it_ends_the_refusal_and_a_new_one_is_warned(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock, discovery: KubePodDiscovery,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, "autoscaler.actuation.deletion_cost")
    writer = new_leader(kube_client, clock, discovery)
    await ranked(writer, clock, 0, pod_a=500, pod_b=100)
    await eventually(lambda: discovery.deletion_cost(KEY.namespace, "pod-a") == "500")

    kube.fail("/pods/pod-a$", 403, times=None)  # the Role loses patch on pods; pod-a's cost changes meanwhile
    await ranked(writer, clock, 61, pod_a=700, pod_b=100)
    assert [level for level, _ in said(caplog, WARNED)] == ["WARNING"], said(caplog, "not written")

    kube.clear_faults()  # the Role is fixed; the load moves back, and pod-a's wanted cost is the one it carries
    await ranked(writer, clock, 15, pod_a=500, pod_b=100)
    assert discovery.deletion_cost(KEY.namespace, "pod-a") == "500"
    over = said(caplog, OVER)
    assert [level for level, _ in over] == ["INFO"], said(caplog, "")
    assert "ml/pod-a" in over[0][1], over  # the pod that needed no write, named

    kube.fail("/pods/pod-b$", 403, times=None)  # refused again, later, for another pod
    await ranked(writer, clock, 61, pod_a=500, pod_b=300)
    assert [level for level, _ in said(caplog, "not written (403")] == ["WARNING", "WARNING"], said(caplog, "")


async def test_a_pod_that_carries_its_cost_is_not_written_again_for_its_refused_write(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock, discovery: KubePodDiscovery,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Its refused write was of a cost no longer wanted: the retry 5 minutes on would PATCH what the pod carries,
    and, the Role still refusing, warn again of a write nobody needs."""
    caplog.set_level(logging.DEBUG, "autoscaler.actuation.deletion_cost")
    writer = new_leader(kube_client, clock, discovery)
    await ranked(writer, clock, 0, pod_a=500, pod_b=100)
    await eventually(lambda: discovery.deletion_cost(KEY.namespace, "pod-a") == "500")
    kube.fail("/pods/pod-a$", 403, times=None)
    await ranked(writer, clock, 61, pod_a=700, pod_b=100)
    await ranked(writer, clock, 15, pod_a=500, pod_b=100)
    kube.clear_requests()

    for _ in range(5):  # past the refused write's retry at 5 minutes, the Role still refusing
        await ranked(writer, clock, 60, pod_a=500, pod_b=100)
    assert [patch.name for patch in kube.patches if patch.name == "pod-a"] == [], kube.patches
    assert [level for level, _ in said(caplog, WARNED)] == ["WARNING"], said(caplog, "not written")
    assert kube.pod_annotations(KEY.namespace, "pod-a")[DELETION_COST_ANNOTATION] == "500"
