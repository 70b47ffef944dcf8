"""The PodMonitors' pod discovery is granted to the Prometheus that kube-prometheus installs.

prometheus-operator turns a PodMonitor into Kubernetes pod discovery: Prometheus lists and watches pods in the
namespaces the PodMonitor selects (`any: true`: the whole cluster). kube-prometheus's `prometheus-k8s` account
may list pods only in `default`, `kube-system` and `monitoring` (its prometheus-roleSpecificNamespaces.yaml),
so without a grant of ours Prometheus logs `pods is forbidden ... at the cluster scope`, no exporter or adapter
series exist, the dashboard is empty and, `up` being absent rather than 0, no alert fires.
"""

from __future__ import annotations

from typing import Any

from tests.manifests.support import PROMETHEUS, kustomize

KUBE_PROMETHEUS = "system:serviceaccount:monitoring:prometheus-k8s"
KUBE_PROMETHEUS_OWN = {"default", "kube-system", "monitoring"}  # where its own Roles already grant pods


def pod_grants(objects: list[dict[str, Any]], subject: str) -> list[str | None]:
    """The namespaces (None: every namespace) where `subject` may list and watch pods by what is rendered."""
    roles = {(o["kind"], o["metadata"]["name"]): o for o in objects if o["kind"] in ("Role", "ClusterRole")}
    scopes: list[str | None] = []
    for binding in (o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        names = {f"system:serviceaccount:{s['namespace']}:{s['name']}" for s in binding["subjects"]
                 if s["kind"] == "ServiceAccount"}
        role = roles.get((binding["roleRef"]["kind"], binding["roleRef"]["name"]))
        if subject not in names or role is None:
            continue
        if any("" in rule.get("apiGroups", []) and "pods" in rule.get("resources", [])
               and {"list", "watch"} <= set(rule.get("verbs", [])) and not rule.get("resourceNames")
               for rule in role["rules"]):
            scopes.append(binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None)
    return scopes


def test_kube_prometheus_may_discover_the_pods_every_pod_monitor_selects() -> None:
    objects = kustomize(PROMETHEUS)
    granted = pod_grants(objects, KUBE_PROMETHEUS)
    missing = []
    for monitor in (o for o in objects if o["kind"] == "PodMonitor"):
        selector = monitor["spec"].get("namespaceSelector", {})
        wanted = [None] if selector.get("any") else selector.get("matchNames", [monitor["metadata"]["namespace"]])
        missing += [(monitor["metadata"]["name"], scope) for scope in wanted
                    if None not in granted and scope not in granted and scope not in KUBE_PROMETHEUS_OWN]

    assert missing == []
