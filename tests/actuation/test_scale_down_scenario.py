"""Scenario: four pods, the newest of which has just taken the hot model. The load drops, the recommendation
falls below the replicas, and the ReplicaSet's removal order picks the idle pod, where without deletion costs
it would have picked the newest one, the hot model's. Runs the real decision (aggregation, recommendation,
smoothing, ranking), the real writer and the fake API server; only time is stepped."""

from __future__ import annotations

from datetime import datetime

import pytest

from autoscaler.actuation.deletion_cost import DeletionCostWriter, WriterSettings
from autoscaler.kube.client import KubeClient
from autoscaler.model import PodSample, RuntimeSnapshot, RuntimeView
from autoscaler.names import DELETION_COST_ANNOTATION, ServedMetric
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.runtime_memory import RuntimeMemory
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.simulation.replicaset import ReplicaPod, pods_to_remove, removal_order
from tests.actuation.conftest import KEY, SteppedClock
from tests.fakes.kube import FakeKubeApi

T0 = 1_700_000_000.0
CREATED = {"pod-a": T0 - 3000, "pod-b": T0 - 2000, "pod-idle": T0 - 1000, "pod-hot": T0 - 60}
BUSY = {"pod-hot": (0.75, 120.0), "pod-a": (0.7, 100.0), "pod-b": (0.7, 100.0), "pod-idle": (0.7, 100.0)}
QUIET = {"pod-hot": (0.5, 60.0), "pod-a": (0.15, 15.0), "pod-b": (0.15, 15.0), "pod-idle": (0.0, 0.0)}
# A short scale-down time constant makes the served recommendation fall within one refresh, well inside the
# minute in which the writer would otherwise not touch a pod it has just written.
POLICY = RuntimePolicy(scale_down_tau_s=10.0)


def snapshot(load: dict[str, tuple[float, float]], now: float) -> RuntimeSnapshot:
    pods = tuple(
        PodSample(name, sampled_at=now - 1, gpu_busy=gpu, requests_per_second=rps, created_at=CREATED[name])
        for name, (gpu, rps) in load.items()
    )
    return RuntimeSnapshot(KEY, pods, taken_at=now, replicas=len(pods))


def replica_pods(kube: FakeKubeApi) -> list[ReplicaPod]:
    """The runtime's pods as the ReplicaSet controller sees them in the API."""
    pods = []
    for obj in kube.objects("pods", KEY.namespace):
        conditions = obj["status"].get("conditions") or []
        cost = (obj["metadata"].get("annotations") or {}).get(DELETION_COST_ANNOTATION, "0")
        pods.append(ReplicaPod(
            name=obj["metadata"]["name"],
            ready=any(c["type"] == "Ready" and c["status"] == "True" for c in conditions),
            deletion_cost=int(cost),
            created_at=datetime.fromisoformat(obj["metadata"]["creationTimestamp"]).timestamp(),
        ))
    return pods


def served_replicas(view: RuntimeView) -> float | None:
    return view.values[ServedMetric.DESIRED_REPLICAS].value


async def test_after_the_load_drops_the_replicaset_removes_the_idle_pod_not_the_hot_one(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    for name, created in CREATED.items():
        kube.add_pod(KEY.namespace, name, created=created)
    assert [pod.name for pod in pods_to_remove(replica_pods(kube), 1)] == ["pod-hot"]  # no costs: newest goes

    writer = DeletionCostWriter(kube_client, AdapterMetrics(), settings=WriterSettings(qps=None), clock=clock)
    memory: RuntimeMemory | None = None

    busy, memory = decide(snapshot(BUSY, T0), POLICY, memory, T0, 30.0)
    assert served_replicas(busy) == 4 and busy.current_replicas == 4
    writer.offer({KEY: busy})
    assert await writer.sync() == 4

    clock.advance(15)
    quiet, memory = decide(snapshot(QUIET, T0 + 15), POLICY, memory, T0 + 15, 30.0)
    assert served_replicas(quiet) == 3  # the recommendation fell below the 4 replicas: the HPA will act
    by_name = {pod.name: pod for pod in quiet.pods}
    assert min(by_name.values(), key=lambda pod: pod.need or 0.0).name == "pod-idle"
    assert all(pod.need is not None and pod.deletion_cost is not None for pod in quiet.pods)  # for /debug
    writer.offer({KEY: quiet})
    assert await writer.sync() == 4  # at once: 15 s after the last write, inside the per-pod minute

    costs = {pod.name: pod.deletion_cost for pod in replica_pods(kube)}
    assert costs == {name: by_name[name].deletion_cost for name in CREATED}
    assert min(costs, key=lambda name: costs[name]) == "pod-idle"
    assert max(costs, key=lambda name: costs[name]) == "pod-hot"
    removed = pods_to_remove(replica_pods(kube), 4 - 3)
    assert [pod.name for pod in removed] == ["pod-idle"]


@pytest.mark.parametrize(
    ("pods", "first"),
    [
        ([ReplicaPod("ready-cheap", True, 0), ReplicaPod("unready-dear", False, 900)], "unready-dear"),
        ([ReplicaPod("dear", True, 900, 10), ReplicaPod("cheap", True, 100, 0)], "cheap"),
        ([ReplicaPod("old", True, 100, 0), ReplicaPod("new", True, 100, 10)], "new"),
        ([ReplicaPod("negative", True, -5, 0), ReplicaPod("unset", True, 0, 10)], "negative"),
    ],
    ids=["not ready first", "lowest cost next", "then newest", "costs may be negative"],
)
def test_replicaset_removal_order(pods: list[ReplicaPod], first: str) -> None:
    assert removal_order(pods)[0].name == first
    assert pods_to_remove(pods, 0) == []
