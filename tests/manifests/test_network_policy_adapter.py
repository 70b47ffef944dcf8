"""The adapter's NetworkPolicy (manifests/examples/network-policy-adapter/), checked against the Deployment, Service
and the other policies it must agree with: it admits the port the adapter serves on, to its pods only, from the
aggregator's network and from the Prometheus the exporter's policy admits; and an unedited copy cannot be applied,
since a wrong CIDR would cut every HPA off its metrics."""

from __future__ import annotations

import ipaddress

import kubernetes_validate  # type: ignore[import-untyped]
import pytest

from tests.manifests.support import EXAMPLES, Object, commented_yaml, container, find, kustomize
from tests.manifests.test_manifests import KUBERNETES_VERSIONS, adapter_deployment, serve_settings

FOLDER = EXAMPLES / "network-policy-adapter"
PLACEHOLDER = "NODE-NETWORK-CIDR"


def policy() -> Object:
    return find(kustomize(FOLDER), "NetworkPolicy", "modelmesh-autoscaler-adapter")


def peers() -> tuple[Object, Object]:
    [rule] = policy()["spec"]["ingress"]
    aggregator, prometheus = rule["from"]
    return aggregator, prometheus


def test_it_admits_only_the_port_the_adapter_serves_on_to_the_adapters_pods() -> None:
    adapter = adapter_deployment()
    pod = adapter["spec"]["template"]
    [port] = container(pod["spec"], "adapter")["ports"]
    listen_port = serve_settings(adapter).listen_port
    [rule] = policy()["spec"]["ingress"]

    assert [p["port"] for p in rule["ports"]] == [port["containerPort"]] == [listen_port]
    assert policy()["metadata"]["namespace"] == adapter["metadata"]["namespace"]
    assert policy()["spec"]["podSelector"]["matchLabels"] == adapter["spec"]["selector"]["matchLabels"]
    assert policy()["spec"]["policyTypes"] == ["Ingress"]


def test_the_service_the_aggregator_calls_forwards_to_that_port() -> None:
    service = find(kustomize(EXAMPLES.parent / "base"), "Service", "modelmesh-autoscaler")
    pod_spec = adapter_deployment()["spec"]["template"]["spec"]
    named = {p["name"]: p["containerPort"] for p in container(pod_spec, "adapter")["ports"]}
    [rule] = policy()["spec"]["ingress"]

    assert [named[p["targetPort"]] for p in service["spec"]["ports"]] == [p["port"] for p in rule["ports"]]


def test_prometheus_is_admitted_as_the_exporters_policy_admits_it() -> None:
    """The adapter's /metrics is on its serving port: the Prometheus that scrapes the exporters scrapes it too."""
    exporter_policy = find(kustomize(EXAMPLES), "NetworkPolicy", "modelmesh-autoscaler-exporter")
    [exporter_rule] = exporter_policy["spec"]["ingress"]
    _, prometheus = peers()

    assert prometheus in exporter_rule["from"]


def test_an_unedited_copy_is_refused_until_the_aggregators_network_is_filled_in() -> None:
    """The aggregator connects from the control plane's addresses, which no selector reaches: a CIDR the user
    must find. The placeholder is no CIDR, so the API server refuses it instead of admitting a wrong network."""
    aggregator, _ = peers()

    assert aggregator == {"ipBlock": {"cidr": PLACEHOLDER}}
    with pytest.raises(ValueError):
        ipaddress.ip_network(aggregator["ipBlock"]["cidr"])


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_filled_in_it_is_a_valid_network_policy(version: str) -> None:
    filled = policy()
    filled["spec"]["ingress"][0]["from"][0]["ipBlock"]["cidr"] = "10.0.0.0/16"

    kubernetes_validate.validate(filled, version, strict=True)


def test_the_commented_keda_peer_is_a_valid_peer_to_add() -> None:
    [keda] = commented_yaml(FOLDER / "network-policy-adapter.yaml", "KEDA's operator reads the adapter too")
    extended = policy()
    extended["spec"]["ingress"][0]["from"][0]["ipBlock"]["cidr"] = "10.0.0.0/16"
    extended["spec"]["ingress"][0]["from"].append(keda)

    kubernetes_validate.validate(extended, KUBERNETES_VERSIONS[-1], strict=True)
    assert keda["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "keda"}
