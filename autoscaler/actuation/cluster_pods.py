"""What the deletion-cost writer reads of the pods as the cluster has them, through discovery's pod watch.

Apart from `deletion_cost` (which imports the Kubernetes client) so that `serve` can ask whether its discovery
sees pod objects without importing that client where a targets file is used.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class ClusterPods(Protocol):
    """Pod objects as the pod watch last saw them (`autoscaler.sources.kube_pods.KubePodDiscovery` has it).

    Both are read from the writer's planning thread, so each must be a plain lookup."""

    def deletion_cost(self, namespace: str, pod: str) -> str | None:
        """The pod's `controller.kubernetes.io/pod-deletion-cost` annotation (None: none, or not watched): a
        pod that already carries the cost to write is not patched."""
        ...

    def pod_uid(self, namespace: str, pod: str) -> str | None:
        """The `metadata.uid` of the pod of that name (None: not watched): a pod deleted and created again
        under its name is a new object, which carries none of what was written on the old one."""
        ...
