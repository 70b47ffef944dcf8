"""Which pods a ReplicaSet removes when its replicas are lowered, in the order docs/design.md documents:
not Ready first, then the lowest `controller.kubernetes.io/pod-deletion-cost`, then the newest.

This is the part of the ReplicaSet controller's ranking (`getPodsToDelete`, `controller.ActivePodsWithRanks`)
that decides between the pods of one ModelMesh runtime. The real controller also ranks unscheduled before
scheduled and Pending before Running pods (both count as not Ready here), pods doubled up on a node first,
and pods that have been Ready for less time and restarted more first; those tie-breaks are left out because
the simulator's pods never differ in them. A missing or malformed cost counts as 0, as in Kubernetes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ReplicaPod:
    """What the ReplicaSet looks at when choosing a pod to remove."""

    name: str
    ready: bool
    deletion_cost: int = 0
    created_at: float = 0.0


def removal_order(pods: Sequence[ReplicaPod]) -> list[ReplicaPod]:
    """All pods, the first to be removed first."""
    return sorted(pods, key=lambda pod: (pod.ready, pod.deletion_cost, -pod.created_at, pod.name))


def pods_to_remove(pods: Sequence[ReplicaPod], count: int) -> list[ReplicaPod]:
    """The `count` pods a scale-down by `count` removes (none for a count of 0 or less)."""
    return removal_order(pods)[: max(0, count)]
