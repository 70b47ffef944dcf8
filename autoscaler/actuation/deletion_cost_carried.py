"""What `modelmesh_autoscaler_pod_deletion_cost` says: the cost each pod the leader manages carries.

The series was set only where this replica wrote a cost, or found one already in place, in its own term. A pod it
writes nothing to (no fresh data: its ModelMesh down; not Ready) kept the cost the previous leader wrote, and the
ReplicaSet goes on ordering removals by it, but after a Lease hand-over no replica published it: the dashboard's
"Pod deletion cost" panel dropped that pod, often the one with the highest cost. So at each pass the leader
publishes, for every pod of the runtimes it writes for, what the pod carries as the ReplicaSet reads it: the
annotation discovery's pod watch shows (a pod it watches without one: 0), or without a pod watch (a targets file)
what this replica wrote. Which cost is written does not change (`deletion_cost_due`); between passes a write that
went through sets its pod's series at once (`deletion_cost_writes`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from autoscaler.actuation.deletion_cost_memory import WrittenCosts
from autoscaler.actuation.deletion_cost_plan import PodId
from autoscaler.actuation.removal_order import carried_cost
from autoscaler.model import RuntimeKey, RuntimeView
from autoscaler.selfmetrics import AdapterMetrics


def carried_costs(memory: WrittenCosts, views: Mapping[RuntimeKey, RuntimeView],
                  namespaces: Collection[str]) -> dict[PodId, int]:
    """The cost on each pod of `views` (in `namespaces`; empty: all) as the ReplicaSet reads it; a pod neither
    watched nor written by this replica is left out (nothing is known of it). Pure reads: run in the pass's thread,
    as the plan is (the pod watch's events only replace its entries, on the loop)."""
    wanted = frozenset(namespaces)
    records = memory.records
    found: dict[PodId, int] = {}
    for key, view in views.items():
        if wanted and key.namespace not in wanted:
            continue
        for name, *_ in view.pods.deletion_costs():
            pod = (key.namespace, name)
            if memory.watched(pod):
                found[pod] = carried_cost(memory.on_pod(pod))
            elif (record := records.get(pod)) is not None and record.cost is not None:
                found[pod] = record.cost
    return found


def publish(metrics: AdapterMetrics, carried: Mapping[PodId, int]) -> None:
    """Make the series exactly `carried` (on the loop that renders /metrics): pods gone, or no longer known, lose
    theirs. Lines whose value is unchanged keep their rendered text (`RuntimeGauge.update`)."""
    metrics.pod_deletion_cost.update({pod: float(cost) for pod, cost in carried.items()})


def withdraw(metrics: AdapterMetrics) -> None:
    """No series at all: this replica no longer leads (only the leader publishes what the pods carry)."""
    metrics.pod_deletion_cost.update({})
