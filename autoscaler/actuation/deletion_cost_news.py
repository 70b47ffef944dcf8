"""The deletion-cost writer's lines about its failed writes (`FailureNews`), said at fleet size.

Failures are said once per pass and cause, not per pod (a Role missing in a namespace of 500 pods, or an API
server failing every tenth patch, was a warning per pod). A cause is the status, and for refusals (403 RBAC, 422,
an admission webhook) also the namespace, as Roles and policies are per namespace. A cause is a warning when it
starts, then debug until every pod it failed has been written, or carries the cost wanted without a write (its
wanted cost went back to the one on it: `carried`), which is one info line (`... written again`). A pod that needs
no write must end it too: else the cause stayed open until that pod's next write, and a new refusal in the
namespace meanwhile was logged at debug, as the one already warned about.
"""

from __future__ import annotations

import logging

from autoscaler.actuation.deletion_cost_plan import PodId
from autoscaler.kube.client import KubeApiError
from autoscaler.log_lists import few
from autoscaler.selfmetrics_deletion_costs import DeletionCostPatchResult

log = logging.getLogger("autoscaler.actuation.deletion_cost")

FailureCause = tuple[int | str, str | None]
"""(HTTP status or "no answer", namespace for refusals else None): what one grouped log line is about."""


class FailureNews:
    """Collects one pass's failed writes by cause (`failed`), then says them (`report`)."""

    def __init__(self) -> None:
        self._failing: dict[FailureCause, set[PodId]] = {}  # causes warned about, with the pods still failing
        self._carried: dict[FailureCause, list[PodId]] = {}  # per open cause, its pods that needed no write
        self._pass: dict[FailureCause, list[tuple[PodId, DeletionCostPatchResult, float, KubeApiError]]] = {}

    def failed(self, cause: FailureCause, pod: PodId, result: DeletionCostPatchResult, wait_s: float,
               error: KubeApiError) -> None:
        """The write of `pod` failed with `error` in the pass under way, and is tried again in `wait_s`."""
        self._pass.setdefault(cause, []).append((pod, result, wait_s, error))

    def clear(self, pod: PodId) -> None:
        """`pod` no longer holds a failure open (written, gone or forgotten): a cause whose pods are all cleared
        is said to be over (`report`)."""
        for pods in self._failing.values():
            pods.discard(pod)

    def carried(self, pod: PodId) -> None:
        """`pod` carries the cost wanted without a write (`DuePatches.settle_carried`): its failure is over, and
        the line that says its cause is over names it."""
        for cause, pods in self._failing.items():
            if pod in pods:
                pods.discard(pod)
                self._carried.setdefault(cause, []).append(pod)

    def open_pods(self) -> frozenset[PodId]:
        """The pods whose failure a warned cause still holds open (empty: nothing to look for)."""
        return frozenset().union(*self._failing.values()) if self._failing else frozenset()

    def forget(self) -> None:
        """Leadership lost: a cause still failing in the next term is news again."""
        self._failing.clear()
        self._carried.clear()

    def report(self) -> None:
        """One line per cause for the pass just done; one when a cause's pods are all written again."""
        failures, self._pass = self._pass, {}
        for cause, failed in failures.items():
            pods = {pod for pod, *_ in failed}
            for other in self._failing.values():  # a pod fails for one cause at a time
                other -= pods
            for carried in self._carried.values():  # failing again: no longer one that needed no write
                carried[:] = [pod for pod in carried if pod not in pods]
            level = logging.DEBUG if cause in self._failing else logging.WARNING
            self._failing.setdefault(cause, set()).update(pods)
            status, namespace = cause
            (_, result, _, example), waits = failed[0], [wait for *_, wait, _ in failed]
            how = "retried with backoff" if result == "retried" else "refused; tried again at the 5-minute refresh"
            where = f" in namespace {namespace}" if namespace is not None else ""
            soonest, latest = round(min(waits)), round(max(waits))
            wait = f"{soonest} s" if soonest == latest else f"{soonest}-{latest} s"
            log.log(level, "deletion costs of %d pods%s not written (%s, %s; next try in %s): %s; e.g. %s",
                    len(failed), where, status, how, wait, few([f"{ns}/{name}" for (ns, name), *_ in failed]),
                    example)
        for cause in [cause for cause, pods in self._failing.items() if not pods]:
            del self._failing[cause]
            status, namespace = cause
            carried = self._carried.pop(cause, [])
            how = "is written" if not carried else (
                f"is written or carries the cost wanted ({len(carried)} needed no write, the cost on them wanted "
                f"again: {few([f'{ns}/{name}' for ns, name in carried])})")
            log.info("deletion costs are written again%s: every pod that failed with %s %s",
                     f" in namespace {namespace}" if namespace is not None else "", status, how)
