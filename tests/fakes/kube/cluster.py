"""Test controls that stand in for the kubelet and the controllers: Deployments, pods and ModelMesh runtimes.

Objects made here go through the store like any write, so watching clients see the same events they would
see from a cluster. What the missing components would fill in (pod conditions, container statuses, a
Deployment's status) comes from `workloads.py`.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Final

from tests.fakes.kube.patches import merge_patch
from tests.fakes.kube.resources import DEPLOYMENTS, HORIZONTAL_POD_AUTOSCALERS, PODS
from tests.fakes.kube.store import ObjectStore
from tests.fakes.kube.wire import JSON, rfc3339, timestamp
from tests.fakes.kube.workloads import set_pod_ready

RUNTIME_SERVICE_LABEL: Final = "modelmesh-service"


class ClusterControls(ObjectStore):
    """Synchronous test controls for workloads; call them from the loop the server runs on."""

    def __init__(self) -> None:
        super().__init__()
        self._ip_counter = itertools.count(10)
        self.node_clock_off_s = 0.0
        """How far the kubelet's clock is off the API server's (negative: behind): the times a kubelet writes
        (`status.startTime`, a condition's `lastTransitionTime`) read `clock() + node_clock_off_s`, the
        `creationTimestamp` the API server writes reads `clock()`, as on a node whose time sync broke."""

    # ---- Deployments -----------------------------------------------------------------------------------------

    def add_deployment(
        self,
        namespace: str,
        name: str,
        replicas: int = 1,
        labels: Mapping[str, str] | None = None,
        selector: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> JSON:
        """An apps/v1 Deployment; `selector` (matchLabels) defaults to `{"app": name}`, `labels` to the selector.

        Its `status` is computed from the pods its selector matches whenever it is read.
        """
        match_labels = dict(selector) if selector is not None else {"app": name}
        obj: JSON = {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "generation": 1,
                "labels": dict(labels) if labels is not None else dict(match_labels),
                "annotations": {"deployment.kubernetes.io/revision": "1", **(annotations or {})},
            },
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": match_labels},
                "template": {
                    "metadata": {"creationTimestamp": None, "labels": dict(match_labels)},
                    "spec": {"containers": [{"name": "main", "image": "registry.example/fake:latest"}]},
                },
                "strategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
                },
                "revisionHistoryLimit": 10,
                "progressDeadlineSeconds": 600,
            },
        }
        return self._create(DEPLOYMENTS, obj)

    def set_replicas(self, namespace: str, name: str, replicas: int) -> JSON:
        def change(obj: JSON) -> None:
            obj["spec"]["replicas"] = replicas

        return self.update_object("deployments", namespace, name, change)

    def set_deployment_annotations(self, namespace: str, name: str, annotations: Mapping[str, str | None]) -> JSON:
        """Merge annotations into a Deployment (None removes one)."""

        def change(obj: JSON) -> None:
            merged = merge_patch(obj["metadata"].get("annotations") or {}, dict(annotations))
            obj["metadata"]["annotations"] = merged

        return self.update_object("deployments", namespace, name, change)

    def delete_deployment(self, namespace: str, name: str, propagation: str = "Background") -> JSON:
        """Delete a Deployment (DELETED event), as `propagationPolicy: Background` (kubectl's default) does: its
        dependents go after it. `Foreground` (`kubectl delete --cascade=foreground`, Argo CD, Flux): as
        kube-apiserver does, only mark it (`metadata.deletionTimestamp`, `finalizers: [foregroundDeletion]`,
        MODIFIED); it stays readable while the garbage collector deletes its pods (the test deletes them), and a
        second call removes it, as the garbage collector does once they are gone."""
        key = (namespace, name)
        existing = self._objects[DEPLOYMENTS].get(key)
        if propagation == "Foreground" and existing is not None and "deletionTimestamp" not in existing["metadata"]:
            moment = self.clock()

            def mark(obj: JSON) -> None:
                obj["metadata"]["deletionTimestamp"] = rfc3339(moment)
                obj["metadata"]["deletionGracePeriodSeconds"] = 0
                obj["metadata"]["finalizers"] = [*obj["metadata"].get("finalizers", []), "foregroundDeletion"]

            return self.update_object("deployments", namespace, name, mark)
        return self._delete(DEPLOYMENTS, key)

    # ---- HorizontalPodAutoscalers ----------------------------------------------------------------------------

    def add_hpa(
        self,
        namespace: str,
        name: str,
        *,
        max_replicas: int,
        min_replicas: int | None = None,
        target: tuple[str, str] | None = None,
        metric_selector: Mapping[str, str] | None = None,
    ) -> JSON:
        """An autoscaling/v2 HPA as `kubectl apply` stores it. `target` is the scaleTargetRef (kind, name):
        a Deployment (`apps/v1`) or a RuntimeScale (`autoscaler.modelmesh.io/v1alpha1`); `metric_selector` the
        matchLabels of one External `modelmesh_desired_replicas` metric. `min_replicas` None leaves the field
        out, as the API's default of 1 means."""
        kind, target_name = target if target is not None else ("Deployment", name)
        api_version = "apps/v1" if kind == "Deployment" else "autoscaler.modelmesh.io/v1alpha1"
        spec: JSON = {
            "scaleTargetRef": {"apiVersion": api_version, "kind": kind, "name": target_name},
            "maxReplicas": max_replicas,
        }
        if min_replicas is not None:
            spec["minReplicas"] = min_replicas
        if metric_selector is not None:
            spec["metrics"] = [{
                "type": "External",
                "external": {
                    "metric": {
                        "name": "modelmesh_desired_replicas",
                        "selector": {"matchLabels": dict(metric_selector)},
                    },
                    "target": {"type": "AverageValue", "averageValue": "1"},
                },
            }]
        return self._create(HORIZONTAL_POD_AUTOSCALERS, {"metadata": {"name": name, "namespace": namespace},
                                                         "spec": spec})

    def set_hpa_bounds(self, namespace: str, name: str, *, max_replicas: int, min_replicas: int | None = None) -> JSON:
        def change(obj: JSON) -> None:
            obj["spec"]["maxReplicas"] = max_replicas
            if min_replicas is not None:
                obj["spec"]["minReplicas"] = min_replicas

        return self.update_object("horizontalpodautoscalers", namespace, name, change)

    # ---- pods ------------------------------------------------------------------------------------------------

    def add_pod(
        self,
        namespace: str,
        name: str,
        labels: Mapping[str, str] | None = None,
        ip: str | None = None,
        ready: bool = True,
        created: float | datetime | None = None,
        annotations: Mapping[str, str] | None = None,
        phase: str = "Running",
        node: str = "node-1",
        owner_replica_set: str | None = None,
        ports: Sequence[tuple[str, int]] = (),
    ) -> JSON:
        """A pod as the kubelet reports it. A Running pod with no `ip` gets the next 10.244.0.x; a Pending one
        has no IP. `created` is a Unix time or datetime (default: now). `owner_replica_set` names the ReplicaSet
        that controls it (`metadata.ownerReferences`, as a Deployment's pods have: `<deployment>-<hash>`).
        `ports`: (name, containerPort) its container declares (none by default, as declaring is optional)."""
        now = self.clock()
        created_at = timestamp(created, now)
        if ip is None and phase == "Running":
            number = next(self._ip_counter)
            ip = f"10.244.{number // 250}.{number % 250 + 2}"
        started_at = created_at + self.node_clock_off_s  # the kubelet's clock: it sets startTime
        status: JSON = {"phase": phase, "hostIP": "192.168.0.10", "startTime": rfc3339(started_at)}
        if ip:
            status["podIP"] = ip
            status["podIPs"] = [{"ip": ip}]
        obj: JSON = {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": dict(labels or {}),
                "annotations": dict(annotations or {}),
            },
            "spec": {
                "containers": [{"name": "main", "image": "registry.example/fake:latest", **({"ports": [
                    {"name": name, "containerPort": number, "protocol": "TCP"} for name, number in ports]}
                    if ports else {})}],
                "nodeName": node,
                "restartPolicy": "Always",
                "schedulerName": "default-scheduler",
            },
            "status": status,
        }
        if owner_replica_set is not None:
            obj["metadata"]["ownerReferences"] = [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner_replica_set,
                "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{namespace}/{owner_replica_set}")),
                "controller": True, "blockOwnerDeletion": True,
            }]
        set_pod_ready(obj, ready and phase == "Running", started_at)
        return self._create(PODS, obj, created_at=created_at)

    def set_ready(self, namespace: str, name: str, ready: bool) -> JSON:
        """Flip the pod's Ready and ContainersReady conditions (a readiness probe passing or failing), at the
        time the kubelet's clock reads (`node_clock_off_s`)."""
        now = self.clock() + self.node_clock_off_s
        return self.update_object("pods", namespace, name, lambda obj: set_pod_ready(obj, ready, now))

    def set_pod_ip(self, namespace: str, name: str, ip: str | None) -> JSON:
        def change(obj: JSON) -> None:
            if ip:
                obj["status"]["podIP"] = ip
                obj["status"]["podIPs"] = [{"ip": ip}]
            else:
                obj["status"].pop("podIP", None)
                obj["status"].pop("podIPs", None)

        return self.update_object("pods", namespace, name, change)

    def set_pod_phase(self, namespace: str, name: str, phase: str) -> JSON:
        def change(obj: JSON) -> None:
            obj["status"]["phase"] = phase
            if phase in ("Succeeded", "Failed"):
                set_pod_ready(obj, False, self.clock() + self.node_clock_off_s)

        return self.update_object("pods", namespace, name, change)

    def delete_pod(self, namespace: str, name: str, graceful: bool = False) -> JSON:
        """Remove a pod (DELETED event). `graceful`: only mark it terminating (deletionTimestamp set, MODIFIED),
        as the API does while the kubelet stops it; a second call removes it."""
        key = (namespace, name)
        existing = self._objects[PODS].get(key)
        if existing is None:
            raise KeyError(f"pods {namespace}/{name}")
        if graceful and "deletionTimestamp" not in existing["metadata"]:
            moment = self.clock() + 30

            def terminate(obj: JSON) -> None:
                obj["metadata"]["deletionTimestamp"] = rfc3339(moment)
                obj["metadata"]["deletionGracePeriodSeconds"] = 30

            return self.update_object("pods", namespace, name, terminate)
        return self._delete(PODS, key)

    def pod_annotations(self, namespace: str, name: str) -> dict[str, str]:
        pod = self._objects[PODS].get((namespace, name))
        if pod is None:
            raise KeyError(f"pods {namespace}/{name}")
        return dict(pod["metadata"].get("annotations") or {})

    # ---- ModelMesh runtimes ----------------------------------------------------------------------------------

    def add_modelmesh_runtime(
        self,
        namespace: str,
        deployment: str,
        replicas: int = 2,
        ready_pods: int | None = None,
        annotations: Mapping[str, str] | None = None,
        service: str = "modelmesh-serving",
    ) -> list[str]:
        """A ModelMesh runtime as modelmesh-controller lays it out: a Deployment selecting
        `modelmesh-service=<service>, name=<deployment>` and `replicas` pods, the first `ready_pods` Ready.
        Returns the pod names (ReplicaSet-style `<deployment>-<hash>-<suffix>`)."""
        selector = {RUNTIME_SERVICE_LABEL: service, "name": deployment}
        labels = {**selector, "app.kubernetes.io/managed-by": "modelmesh-controller"}
        self.add_deployment(namespace, deployment, replicas, labels=labels, selector=selector, annotations=annotations)
        ready = replicas if ready_pods is None else ready_pods
        names = []
        for index in range(replicas):
            pod_name = f"{deployment}-5d9c8b7f6-{self._suffix()}"
            self.add_pod(
                namespace,
                pod_name,
                labels={**selector, "pod-template-hash": "5d9c8b7f6"},
                ready=index < ready,
            )
            names.append(pod_name)
        return names
