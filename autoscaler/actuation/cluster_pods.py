"""What the deletion-cost writer reads of the pods as the cluster has them, through discovery's pod watch.

Apart from `deletion_cost` (which imports the Kubernetes client) so that `serve` can ask whether its discovery
sees pod objects without importing that client where a targets file is used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

DeletionCostListener = Callable[[str, str, str | None], None]
"""`(namespace, pod, annotation)`: what the pod watch shows of one pod's deletion cost (None: none)."""


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


@runtime_checkable
class DeletionCostEvents(Protocol):
    """A pod watch that tells each pod it shows as it shows it (`KubePodDiscovery` does): the deletion-cost writer
    records its write's echo from the watch itself. Looked for only at each pass, the leader's value shown and
    then another writer's between two refreshes was never seen as the echo, and that writer's value was taken
    for the watch's lag for `ECHO_WAIT_S` (s58 review of e688a124)."""

    def on_deletion_cost(self, listener: DeletionCostListener) -> None:
        """Call `listener(namespace, pod, annotation)` for each pod in each list and each ADDED or MODIFIED event,
        on the event loop, in the watch's order."""
        ...
