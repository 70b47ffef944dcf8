"""What `manifests/base` lets the HPA controller read from the adapter, judged with the attributes the adapter
itself puts in its SubjectAccessReviews (`autoscaler.api.identity.request_attributes`) and RBAC's matching
rules: every served metric in any namespace, and nothing more of the group. Before, the ClusterRole granted
`external.metrics.k8s.io/*`, which also named the KEDA endpoint (`runtimes`) and the per-pod explanation
(`runtimes/debug`), to the HPA and to whoever else an operator bound the role to for reading metrics."""

from __future__ import annotations

from typing import Any

import pytest

from autoscaler.api.identity import ResourceAttributes, request_attributes
from autoscaler.names import ServedMetric
from tests.manifests.support import BASE, kustomize

HPA = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
NAMESPACE, DEPLOYMENT = "modelmesh-serving", "modelmesh-serving-triton"


def hpa_rules() -> list[dict[str, Any]]:
    """The rules of the project's cluster roles bound to the HPA controller's ServiceAccount."""
    objects = kustomize(BASE)
    roles = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ClusterRole"}
    rules: list[dict[str, Any]] = []
    for binding in (o for o in objects if o["kind"] == "ClusterRoleBinding"):
        subjects = {f"system:serviceaccount:{s['namespace']}:{s['name']}" for s in binding["subjects"]
                    if s["kind"] == "ServiceAccount"}
        if HPA in subjects and binding["roleRef"]["name"] in roles:
            rules.extend(roles[binding["roleRef"]["name"]]["rules"])
    return rules


def granted(path: str, method: str = "GET") -> bool:
    """RBAC's answer for the adapter's review of `path` (`rbac.RuleAllows`: `*` or the exact resource, with
    its subresource after a slash)."""
    attributes = request_attributes(method, path)
    assert isinstance(attributes, ResourceAttributes)
    resource = attributes.resource + (f"/{attributes.subresource}" if attributes.subresource else "")
    return any(attributes.group in rule["apiGroups"]
               and ("*" in rule["resources"] or resource in rule["resources"])
               and ("*" in rule["verbs"] or attributes.verb in rule["verbs"])
               for rule in hpa_rules())


@pytest.mark.parametrize("metric", list(ServedMetric))
def test_the_hpa_may_read_every_served_metric(metric: ServedMetric) -> None:
    assert granted(f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{NAMESPACE}/{metric.value}")


@pytest.mark.parametrize("path", [f"/keda/v1/namespaces/{NAMESPACE}/runtimes/{DEPLOYMENT}",
                                  f"/debug/runtimes/{NAMESPACE}/{DEPLOYMENT}"])
def test_the_metrics_grant_does_not_open_the_keda_endpoint_or_the_debug_explanation(path: str) -> None:
    assert not granted(path)
