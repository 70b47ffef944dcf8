"""The KEDA overlay and the exporter's NetworkPolicy, checked against the code that serves and scrapes:
the path KEDA reads is one the adapter serves and authorizes as the overlay grants, the value it reads is a key
of that document, and the policy admits the port the adapter and Prometheus scrape, from their pods only."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from autoscaler.api.identity import ResourceAttributes, request_attributes
from autoscaler.api.runtimes import KEDA_ROUTE
from autoscaler.names import ServedMetric
from tests.manifests.support import BASE, EXAMPLES, KEDA, REPO, Object, container, find, installed, kustomize
from tests.manifests.test_manifests import adapter_deployment, serve_settings


def trigger() -> Object:
    scaled = find(installed(KEDA), "ScaledObject")
    [metrics_api] = scaled["spec"]["triggers"]
    assert metrics_api["type"] == "metrics-api"
    return metrics_api  # type: ignore[no-any-return]


def test_keda_overlay_is_the_base_without_the_api_service() -> None:
    """KEDA serves external.metrics.k8s.io: the base's APIService goes, and with it the HPA controller's grant of
    the four modelmesh_* metrics, which KEDA's server never serves (a grant nothing can use)."""
    base = {(o["kind"], o["metadata"]["name"]) for o in kustomize(BASE)}
    overlay = {(o["kind"], o["metadata"]["name"]) for o in kustomize(KEDA)}

    assert base - overlay == {("APIService", "v1beta1.external.metrics.k8s.io"),
                              ("ClusterRole", "modelmesh-autoscaler-external-metrics-reader"),
                              ("ClusterRoleBinding", "modelmesh-autoscaler:hpa-external-metrics")}
    assert not [o for o in kustomize(KEDA) if o["kind"] == "APIService"]


def test_scaled_object_scales_the_runtime_scale_of_the_example_runtime() -> None:
    scaled = find(installed(KEDA), "ScaledObject")
    runtime_scale = find(kustomize(EXAMPLES), "RuntimeScale")

    assert scaled["spec"]["scaleTargetRef"] == {"apiVersion": "autoscaler.modelmesh.io/v1alpha1",
                                                "kind": "RuntimeScale", "name": runtime_scale["metadata"]["name"]}
    assert scaled["metadata"]["namespace"] == runtime_scale["metadata"]["namespace"]
    assert scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["name"] != "modelmesh-serving-triton"


def test_the_hpa_keda_makes_scales_down_like_the_shipped_hpa() -> None:
    """One slow scale-down rail, the adapter's (docs/design.md, Slow scale-down): the HPA KEDA creates adds
    none of its own, as manifests/examples/hpa-triton.yaml does not."""
    scaled = find(installed(KEDA), "ScaledObject")
    hpa = find(kustomize(EXAMPLES), "HorizontalPodAutoscaler")
    behavior = scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"].get("behavior", {})
    assert behavior.get("scaleDown") == hpa["spec"]["behavior"]["scaleDown"]


KEDA_RUNTIME_COMMAND = re.compile(r"kubectl apply -k manifests/examples -l ([\w./!=-]+)")


def selects(selector: str, labels: dict[str, str]) -> bool:
    """`kubectl -l` on an object's labels, for `key=value` and `key!=value` terms (`!=` matches a missing key)."""
    for term in selector.split(","):
        key, negated, value = re.fullmatch(r"([\w./-]+)(!?)=([\w.-]*)", term).groups()  # type: ignore[union-attr]
        if (labels.get(key) == value) == bool(negated):
            return False
    return True


def test_keda_users_install_the_example_runtime_without_its_hpa() -> None:
    """KEDA makes the HPA: a second one on the RuntimeScale (manifests/examples' own) would leave both
    `AmbiguousSelector`, neither scaling. Every install guide that offers the KEDA overlay gives KEDA users the
    command that applies manifests/examples without its HPA, and that command selects exactly that."""
    objects = kustomize(EXAMPLES)
    hpa = find(objects, "HorizontalPodAutoscaler")
    for guide in KEDA_GUIDES:
        commands = KEDA_RUNTIME_COMMAND.findall((REPO / guide).read_text())
        assert commands, f"{guide} does not say how KEDA users install the example runtime"
        for selector in commands:
            left_out = [o for o in objects if not selects(selector, o["metadata"].get("labels", {}))]
            assert left_out == [hpa], f"{guide}: -l {selector} leaves out {[o['kind'] for o in left_out]}"


SCALED_OBJECT_COMMAND = "kubectl apply -f manifests/examples/keda/scaled-object-triton.yaml"
KEDA_GUIDES = ("README.md", "docs/operations.md", "manifests/README.md", "manifests/examples/keda/kustomization.yaml")


def test_the_scaled_object_is_applied_once_the_runtime_scale_has_its_replicas() -> None:
    """KEDA reads the RuntimeScale's scale first, is refused until the adapter has adopted the runtime's replicas,
    and retries with a delay that doubles to 1,000 s without watching the RuntimeScale. The overlay applied the
    ScaledObject with the adapter, before the runtime it scales existed, so a runtime started by its first
    InferenceService could go unscaled for some 17 minutes. Every guide now applies it once `Desired` shows."""
    assert not [o for o in kustomize(KEDA) if o["kind"] == "ScaledObject"]
    for guide in KEDA_GUIDES:
        text = (REPO / guide).read_text()
        assert SCALED_OBJECT_COMMAND in text, f"{guide} does not say when to apply the ScaledObject"
        before = text[:text.index(SCALED_OBJECT_COMMAND)]
        assert "Desired" in before[-600:], f"{guide}: the ScaledObject is not applied after `Desired` shows"


def test_trigger_reads_the_adapters_keda_document_through_its_service() -> None:
    metadata = trigger()["metadata"]
    url = urlsplit(metadata["url"])
    service = find(kustomize(BASE), "Service", "modelmesh-autoscaler")

    assert url.scheme == "https"
    assert url.hostname == f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc"
    assert url.port in [p["port"] for p in service["spec"]["ports"]]
    namespace, deployment = url.path.split("/")[4], url.path.split("/")[6]
    assert url.path == KEDA_ROUTE.format(namespace=namespace, deployment=deployment)
    assert metadata["valueLocation"] == ServedMetric.DESIRED_REPLICAS  # a key of the flat document
    assert (trigger()["metricType"], metadata["targetValue"]) == ("AverageValue", "1")


def test_kedas_token_is_authorized_for_exactly_what_the_adapter_checks() -> None:
    objects = installed(KEDA)
    url = urlsplit(trigger()["metadata"]["url"])
    attributes = request_attributes("GET", url.path)
    assert isinstance(attributes, ResourceAttributes)

    auth = find(objects, "TriggerAuthentication", trigger()["authenticationRef"]["name"])
    [token] = auth["spec"]["secretTargetRef"]
    secret = find(objects, "Secret", token["name"])
    assert (token["parameter"], token["key"]) == ("token", "token")
    assert secret["type"] == "kubernetes.io/service-account-token"
    account = secret["metadata"]["annotations"]["kubernetes.io/service-account.name"]
    binding = find(objects, "RoleBinding", "modelmesh-autoscaler-keda-reader")
    assert binding["metadata"]["namespace"] == attributes.namespace == auth["metadata"]["namespace"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account,
                                    "namespace": secret["metadata"]["namespace"]}]
    role = find(objects, "ClusterRole", binding["roleRef"]["name"])
    assert role["rules"] == [{"apiGroups": [attributes.group], "resources": [attributes.resource],
                              "verbs": [attributes.verb]}]


def test_network_policy_admits_the_exporter_port_from_the_adapter_and_prometheus_only() -> None:
    examples = kustomize(EXAMPLES)
    policy = find(examples, "NetworkPolicy")
    runtime = find(examples, "ServingRuntime")
    sidecar = container(runtime["spec"], "autoscaler-exporter")
    adapter = adapter_deployment()
    [rule] = policy["spec"]["ingress"]

    exporter_port = serve_settings(adapter).exporter_port
    assert [p["containerPort"] for p in sidecar["ports"]] == [exporter_port] == [p["port"] for p in rule["ports"]]
    assert policy["metadata"]["namespace"] == runtime["metadata"]["namespace"]
    # It selects the pods modelmesh-serving's own `modelmesh-runtimes` policy selects (its runtime pod labels).
    assert policy["spec"]["podSelector"] == {
        "matchLabels": {"app.kubernetes.io/managed-by": "modelmesh-controller"},
        "matchExpressions": [{"key": "modelmesh-service", "operator": "Exists"}],
    }
    adapter_peer, prometheus_peer = rule["from"]
    pod_labels = adapter["spec"]["template"]["metadata"]["labels"]
    assert adapter_peer["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert adapter_peer["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": adapter["metadata"]["namespace"]}
    assert prometheus_peer["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}
