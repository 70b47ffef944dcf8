"""/debug says what each pod carries beside what the adapter wants: `pods[].deletion_cost` is the ranking's cost,
`pods[].deletion_cost_on_pod` the one on the pod, which the ReplicaSet removes by.

The reviewer's finding (s57 on-call, incident b): /debug showed `deletion_cost` 500 while the pod carried 700,
every patch refused 403, and nothing there said the cost was not written once the hold ended. Read here as the
operator reads it: the /debug JSON, against the annotations on the fake API's pods."""

from __future__ import annotations

import logging

import pytest

from tests.actuation.test_deletion_cost_hold import AFTER, Cluster
from tests.actuation.test_deletion_cost_hold import cluster as cluster  # the fixture

QUIET_B = {"pod-a": 50.0, "pod-b": 10.0, "pod-c": 90.0}  # 150 req/s: 2; pod-b the least needed, a and c swapped


async def _pods(cluster: Cluster) -> dict[str, dict[str, object]]:
    return {pod["name"]: pod for pod in (await cluster.debug())["pods"]}


@pytest.mark.parametrize("status", [403, 503])
async def test_debug_shows_the_cost_on_the_pod_beside_the_cost_wanted(cluster: Cluster, status: int) -> None:
    await cluster.refresh()  # /debug is the refresh's: the first costs were written after the fixture's
    pods = await _pods(cluster)
    assert {name: pod["deletion_cost_on_pod"] for name, pod in pods.items()} == cluster.costs()
    cluster.kube.fail(r"/pods/pod-b$", status=status, times=None, method="PATCH")
    cluster.source.load = AFTER
    await cluster.refresh()
    await cluster.until(lambda: cluster.refused("pod-b"), "tried pod-b's raise")
    for _ in range(6):  # past the hold's bound: the value fell with pod-b's raise still refused
        await cluster.refresh()
    pods = await _pods(cluster)
    on_pods = cluster.costs()
    assert {name: pod["deletion_cost_on_pod"] for name, pod in pods.items()} == on_pods, pods
    wanted = pods["pod-b"]["deletion_cost"]
    assert isinstance(wanted, int) and on_pods["pod-b"] is not None and wanted > on_pods["pod-b"], pods

    cluster.kube.clear_faults()
    await cluster.refresh(400.0)  # past any retry: the writer writes pod-b's raise
    await cluster.until(lambda: cluster.costs()["pod-b"] == wanted, "wrote pod-b's raise")
    await cluster.refresh()
    pods = await _pods(cluster)
    assert all(pod["deletion_cost_on_pod"] == pod["deletion_cost"] for pod in pods.values()), pods


async def test_a_wait_ended_without_the_costs_does_not_say_written(
        cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    """Every PATCH refused; the load moves (pod-b, carrying the lowest cost, becomes the busiest: held and warned),
    then back (pod-b the quietest again): the pods that would go by the costs they carry are the least needed, and
    the wait ends with the costs still not written. The log said `deletion costs written` there."""
    caplog.set_level(logging.INFO)
    cluster.kube.fail(r"/pods/pod-[abc]$", status=403, times=None, method="PATCH")
    cluster.source.load = AFTER
    await cluster.refresh()
    await cluster.until(lambda: cluster.refused("pod-b"), "tried pod-b's raise")
    await cluster.refresh()
    assert await cluster.served() == 3.0
    assert any("scale-down waits" in r.getMessage() for r in caplog.records)
    cluster.source.load = QUIET_B
    await cluster.refresh()
    assert await cluster.served() == 2.0  # pod-b goes first, and it is the least needed
    pods = await _pods(cluster)
    said = [r.getMessage() for r in caplog.records
            if r.name == "autoscaler.ranking_hold" and not r.getMessage().startswith("scale-down waits")]
    assert not [line for line in said if "deletion costs written" in line], (said, pods)
    unwritten = sorted(name for name, pod in pods.items() if pod["deletion_cost_on_pod"] != pod["deletion_cost"])
    assert unwritten, pods
    ended = [line for line in said if "no longer waits for deletion costs" in line]
    assert len(ended) == 1 and all(name in ended[0] for name in unwritten), (ended, pods)
