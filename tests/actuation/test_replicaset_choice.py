"""Which pod the ReplicaSet controller removes, end to end: the real decision ranks the pods, the real writer
puts the costs on the fake API server's pods, and the pods are then ordered the way kube-controller-manager
orders them (`ActivePodsWithRanks.Less` with `getPodsRankedByRelatedPodsOnSameNode`, Kubernetes 1.31:
terminated and terminating pods are not candidates; then unscheduled, Pending < Unknown < Running, not Ready,
lower `pod-deletion-cost`, more active pods of the set on the same node, shorter Ready (log2 buckets), more
restarts, newer (log2 buckets), UID). Unlike the simulator's short version this one knows nodes, so it shows the
costs beating the co-location rule, which would otherwise pick a busy pod sharing a node."""

from __future__ import annotations

import functools
import math
import time
from collections import Counter
from datetime import datetime

from autoscaler.actuation.deletion_cost import DeletionCostWriter, WriterSettings
from autoscaler.kube.client import KubeClient
from autoscaler.model import PodSample, RuntimeSnapshot
from autoscaler.names import DELETION_COST_ANNOTATION
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.selfmetrics import AdapterMetrics
from tests.actuation.conftest import KEY, SteppedClock
from tests.fakes.kube import JSON, FakeKubeApi

PHASE = {"Pending": 0, "Unknown": 1, "Running": 2}


def _time(value: str | None) -> float | None:
    return datetime.fromisoformat(value).timestamp() if value else None


def _ready_since(pod: JSON) -> float | None:
    for condition in pod["status"].get("conditions") or []:
        if condition["type"] == "Ready":
            return _time(condition["lastTransitionTime"]) if condition["status"] == "True" else None
    return None


def _cost(pod: JSON) -> int:
    try:  # the controller ignores a cost it cannot parse (0)
        return int((pod["metadata"].get("annotations") or {}).get(DELETION_COST_ANNOTATION, "0"))
    except ValueError:
        return 0


def replicaset_removes(pods: list[JSON], count: int, now: float) -> list[str]:
    """The names of the `count` pods the ReplicaSet controller deletes first."""
    active = [p for p in pods if p["status"].get("phase") not in ("Succeeded", "Failed")
              and not p["metadata"].get("deletionTimestamp")]
    on_node = Counter(p["spec"].get("nodeName") or "" for p in active)

    def log_rank(moment: float) -> int:
        return int(math.log2((now - moment) * 1e9)) if now > moment else -1

    def less(a: JSON, b: JSON) -> int:  # -1: a goes first
        node_a, node_b = a["spec"].get("nodeName") or "", b["spec"].get("nodeName") or ""
        if node_a != node_b and not (node_a and node_b):
            return -1 if not node_a else 1
        phase_a, phase_b = PHASE.get(a["status"].get("phase"), 0), PHASE.get(b["status"].get("phase"), 0)
        if phase_a != phase_b:
            return -1 if phase_a < phase_b else 1
        ready_a, ready_b = _ready_since(a), _ready_since(b)
        if (ready_a is None) != (ready_b is None):
            return -1 if ready_a is None else 1
        if _cost(a) != _cost(b):
            return -1 if _cost(a) < _cost(b) else 1
        if on_node[node_a] != on_node[node_b]:
            return -1 if on_node[node_a] > on_node[node_b] else 1
        if ready_a is not None and ready_b is not None and ready_a != ready_b:
            diff = log_rank(ready_a) - log_rank(ready_b)
            if diff:
                return -1 if diff < 0 else 1
        created_a = _time(a["metadata"]["creationTimestamp"]) or 0.0
        created_b = _time(b["metadata"]["creationTimestamp"]) or 0.0
        diff = log_rank(created_a) - log_rank(created_b)
        if created_a != created_b and diff:
            return -1 if diff < 0 else 1
        return -1 if a["metadata"]["uid"] < b["metadata"]["uid"] else 1

    return [p["metadata"]["name"] for p in sorted(active, key=functools.cmp_to_key(less))[:count]]


async def test_the_replicaset_removes_the_least_needed_ready_pod_after_the_not_ready_one(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    now = time.time()
    labels = {"modelmesh-service": "modelmesh-serving", "name": KEY.deployment}
    # name: (node, age s, ready, requests/s, GPU busy, cache used)
    pods = {
        "hot-new": ("node-1", 300, True, 120.0, 0.8, 0.3),  # just took the hot model; shares node-1
        "busy-old": ("node-1", 90_000, True, 60.0, 0.5, 0.9),
        "idle": ("node-2", 20_000, True, 0.0, 0.0, 0.2),  # alone on its node, idle: the one to let go
        "busy-mid": ("node-3", 40_000, True, 50.0, 0.4, 0.8),
        "starting": ("node-2", 20, False, None, None, None),  # readiness failing
    }
    for name, (node, age, ready, *_rest) in pods.items():
        kube.add_pod(KEY.namespace, name, labels=labels, ready=ready, created=now - age, node=node,
                     annotations={DELETION_COST_ANNOTATION: "5000"} if name == "idle" else None)
    kube.add_pod(KEY.namespace, "leaving", labels=labels, created=now - 50_000, node="node-3")
    kube.delete_pod(KEY.namespace, "leaving", graceful=True)  # terminating: no longer the set's

    # Without the adapter's costs (a user's 5000 on "idle"): the not-Ready pod, then a doubled-up busy pod.
    assert replicaset_removes(kube.objects("pods", KEY.namespace), 2, now) == ["starting", "hot-new"]

    snapshot = RuntimeSnapshot(KEY, tuple(
        PodSample(name, ready=ready, sampled_at=now - 1 if ready else None, gpu_sampled_at=now - 1 if ready else None,
                  requests_per_second=rps, gpu_busy=gpu, cache_used_ratio=cache, created_at=now - age)
        for name, (_, age, ready, rps, gpu, cache) in pods.items()), taken_at=now, replicas=5)
    view, _ = decide(snapshot, RuntimePolicy(), None, now, 30.0)
    writer = DeletionCostWriter(kube_client, AdapterMetrics(), settings=WriterSettings(qps=None), clock=clock)
    writer.offer({KEY: view})
    assert await writer.sync() == 4  # the Ready pods; the user's 5000 on "idle" is the adapter's to replace

    assert replicaset_removes(kube.objects("pods", KEY.namespace), 2, now) == ["starting", "idle"]
    least_needed = min((pod for pod in view.pods if pod.ready), key=lambda pod: pod.need or 0.0)
    assert least_needed.name == "idle"
