"""Runtimes outside `--namespaces`, as /debug and the log show their deletion costs: none shown as if written,
and those left on their pods named, with the command that removes them.

Why: ecc8de1's leader wrote pod-deletion costs on a policy-file runtime outside `--namespaces`; this release writes
none there (`autoscaler.runtimes_outside_namespaces`) and so removes none either. After an upgrade those pods keep
the ranking of the upgrade's moment, and the ReplicaSet removes pods by it at every scale-down: the busiest pod,
once the load has moved (the reviewer's run kept 700 / 200 on two pods whose load had swapped). The adapter does
not remove them itself, which would be a write where `--namespaces` says it writes nothing; it says so instead,
from the pod watch's view of the pods' annotations, with the `kubectl annotate` that removes them. And /debug's
per-pod `deletion_cost`, elsewhere the ranking's cost that the leader writes, is null there: nothing writes it, and
500 / 700 beside pods carrying 700 / 200 read as the order the ReplicaSet follows.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from autoscaler.log_lists import few
from autoscaler.model import RuntimeKey, RuntimeView
from autoscaler.names import DELETION_COST_ANNOTATION
from autoscaler.unwritten_costs import without_costs

log = logging.getLogger(__name__)


@runtime_checkable
class PodCostsSeen(Protocol):
    """The pods' annotations and the runtimes' selectors as discovery's watches last saw them
    (`autoscaler.sources.kube_pods.KubePodDiscovery` has both)."""

    def deletion_cost(self, namespace: str, pod: str) -> str | None:
        """The pod's `controller.kubernetes.io/pod-deletion-cost` annotation (None: none, or not watched)."""
        ...

    def pod_selector(self, key: RuntimeKey) -> Mapping[str, str]:
        """The labels that select the runtime's pods: its Deployment's `matchLabels`, or ModelMesh's own."""
        ...


def removal_command(key: RuntimeKey, selector: Mapping[str, str]) -> str:
    """The `kubectl annotate` that removes the deletion-cost annotation from every pod of the runtime."""
    labels = ",".join(f"{name}={value}" for name, value in selector.items())
    return f"kubectl -n {key.namespace} annotate pods -l {labels} {DELETION_COST_ANNOTATION}-"


class CostsLeftOutside:
    """Shows the runtimes outside `--namespaces` without a deletion cost of their own, and warns, once per runtime
    and spell, of the costs left on their pods."""

    def __init__(self, flag: str, given: str, seen: PodCostsSeen) -> None:
        """`flag`: `--namespaces` or `AUTOSCALER_NAMESPACES`, as the user set it; `given`: with its value."""
        self._flag, self._given = flag, given
        self._seen = seen
        self._warned: set[RuntimeKey] = set()

    def shown(self, view: RuntimeView) -> RuntimeView:
        """`view` as /debug shows it: no pod's `deletion_cost`, and a warning naming the costs left on its pods."""
        shown = without_costs(view)
        left = self._costs_left(view)
        if not left:
            self._warned.discard(view.key)  # removed: costs put back later are news again
            return shown
        warning = self._warning(view.key, left)
        if view.key not in self._warned:
            self._warned.add(view.key)
            log.warning("%s", warning)
        return dataclasses.replace(shown, warnings=(*view.warnings, warning))

    def forget(self, key: RuntimeKey) -> None:
        """The runtime is gone, or another object: its costs left are news again."""
        self._warned.discard(key)

    def _costs_left(self, view: RuntimeView) -> dict[str, str]:
        namespace = view.key.namespace
        found = {name: self._seen.deletion_cost(namespace, name) for name, *_ in view.pods.deletion_costs()}
        return {name: cost for name, cost in found.items() if cost is not None}

    def _warning(self, key: RuntimeKey, left: Mapping[str, str]) -> str:
        selector = self._seen.pod_selector(key)
        carried = few([f"{pod} {cost}" for pod, cost in left.items()])
        return (f"runtime {key}: its pods carry pod-deletion costs that this adapter neither wrote nor rewrites, "
                f"its namespace not in {self._given} ({carried}; an earlier release's leader wrote them there, or "
                f"someone by hand): the ReplicaSet removes its pods by them at every scale-down, whatever their "
                f"load now. Remove them with `{removal_command(key, selector)}`, or add {key.namespace} to "
                f"{self._flag} for the leader to write them")

