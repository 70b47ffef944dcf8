"""What the parts of a cluster the fake does not run would write into pods and Deployments.

There is no kubelet, no Deployment controller and no pod validation webhook here, yet clients read their
results: pod Ready conditions and container statuses (`set_pod_ready`), a Deployment's `status` counted
from the pods its selector matches (`deployment_status`), and pod validation of the deletion-cost
annotation (`check_pod_deletion_cost`). Pure functions over plain JSON; the store and the test controls call
them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

from tests.fakes.kube.wire import JSON, ApiError, rfc3339

POD_DELETION_COST: Final = "controller.kubernetes.io/pod-deletion-cost"


def pod_ready(pod: JSON) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def set_pod_ready(pod: JSON, ready: bool, moment: float) -> None:
    """Set Ready / ContainersReady the way the kubelet reports them, moving lastTransitionTime on change."""
    status = pod.setdefault("status", {})
    conditions: list[JSON] = status.setdefault("conditions", [])
    if not conditions:
        created = pod.get("metadata", {}).get("creationTimestamp") or rfc3339(moment)
        for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"):
            conditions.append({"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": created})
    value = "True" if ready else "False"
    for condition in conditions:
        if condition["type"] in ("Ready", "ContainersReady") and condition["status"] != value:
            condition["status"] = value
            condition["lastTransitionTime"] = rfc3339(moment)
            if ready:
                condition.pop("reason", None)
            else:
                condition["reason"] = "ContainersNotReady"
    status["containerStatuses"] = [
        {
            "name": container["name"],
            "ready": ready,
            "started": True,
            "restartCount": 0,
            "image": container.get("image", ""),
            "imageID": "",
            "containerID": "containerd://" + "0" * 64,
            "state": {"running": {"startedAt": status.get("startTime", rfc3339(moment))}},
        }
        for container in (pod.get("spec") or {}).get("containers") or []
    ]


def deployment_status(deployment: JSON, namespace_pods: Iterable[JSON]) -> JSON:
    """The Deployment's `status` as its controller would keep it, counted from `namespace_pods` (the pods of
    its namespace) that its `matchLabels` select and that are not terminating. Zero counts are omitted, as
    Go's `omitempty` drops them."""
    match_labels = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    pods = [
        pod
        for pod in namespace_pods
        if match_labels
        and all((pod["metadata"].get("labels") or {}).get(k) == v for k, v in match_labels.items())
        and "deletionTimestamp" not in pod["metadata"]
    ]
    ready = sum(1 for pod in pods if pod_ready(pod))
    status: JSON = {"observedGeneration": deployment["metadata"].get("generation", 1)}
    counts = {
        "replicas": len(pods),
        "updatedReplicas": len(pods),
        "readyReplicas": ready,
        "availableReplicas": ready,
        "unavailableReplicas": max(0, deployment["spec"].get("replicas", 1) - ready),
    }
    status.update({key: value for key, value in counts.items() if value})
    return status


def _is_int32(value: Any) -> bool:
    if not isinstance(value, str) or not re.fullmatch(r"[+-]?\d+", value):
        return False
    return -(2**31) <= int(value) <= 2**31 - 1


def check_pod_deletion_cost(pod: JSON, old: JSON | None) -> None:
    """Pod validation: a new or changed deletion cost must parse as a 32-bit integer (422). An object that
    already held an invalid cost may keep it, as the server's ratcheting validation allows."""
    metadata = pod.get("metadata") or {}
    cost = (metadata.get("annotations") or {}).get(POD_DELETION_COST)
    previous = ((old or {}).get("metadata") or {}).get("annotations") or {}
    if cost is not None and not _is_int32(cost) and _is_int32(previous.get(POD_DELETION_COST, "0")):
        raise ApiError.invalid(
            "Pod",
            "",
            metadata.get("name", ""),
            [(f"metadata.annotations[{POD_DELETION_COST}]", cost, "must be a 32bit integer")],
        )
