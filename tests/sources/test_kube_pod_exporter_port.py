"""Which pods run the exporter sidecar, as discovery reads their declared container ports: a pod that declares
ports and not the exporter's runs no sidecar and is not scraped (a runtime modelmesh-serving runs that nobody
gave one); a pod that declares no port at all is scraped, since declaring a port is optional in Kubernetes. No
`spec`, however malformed, makes discovery fail."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import RuntimeKey
from autoscaler.sources.kube_objects import RuntimeRecord, build_inventory, parse_pod
from tests.sources.test_kube_pod_owner import JSONISH

KEY = RuntimeKey("modelmesh-serving", "modelmesh-serving-mlserver-1.x")
SELECTOR = {"name": KEY.deployment}
EXPORTER_PORT = 9187


def pod(spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "mlserver-0", "namespace": KEY.namespace, "labels": SELECTOR}, "spec": spec,
            "status": {"podIP": "10.0.0.7", "conditions": [{"type": "Ready", "status": "True"}]}}


def container(name: str, *ports: int) -> dict[str, Any]:
    return {"name": name, "image": "x", "ports": [{"containerPort": p, "protocol": "TCP"} for p in ports]}


def target_of(spec: Any) -> Any:
    parsed = parse_pod(pod(spec))
    assert parsed is not None
    inventory = build_inventory({KEY: RuntimeRecord(KEY, SELECTOR)}, [parsed], EXPORTER_PORT)
    (target,) = inventory[KEY].pods
    return target


def test_a_pod_declaring_modelmeshs_ports_and_not_the_exporters_is_not_scraped() -> None:
    target = target_of({"containers": [container("mlserver"), container("mm", 8033, 2112),
                                       container("rest-proxy", 8008)]})
    assert target.url is None and target.undeclared_exporter_port == EXPORTER_PORT


def test_a_pod_with_the_sidecar_is_scraped_on_its_port() -> None:
    target = target_of({"containers": [container("mm", 8033, 2112), container("autoscaler-exporter", 9187)]})
    assert target.url == "http://10.0.0.7:9187/metrics" and target.undeclared_exporter_port is None


def test_a_pod_declaring_no_port_at_all_is_scraped() -> None:
    target = target_of({"containers": [{"name": "mm", "image": "x"}, {"name": "exporter", "image": "y"}]})
    assert target.url == "http://10.0.0.7:9187/metrics"


@given(spec=JSONISH)
def test_no_spec_breaks_discovery(spec: Any) -> None:
    target_of(spec)


@given(ports=st.lists(st.lists(st.integers(1, 65535), max_size=3), min_size=1, max_size=4))
def test_only_declared_ports_without_the_exporters_stop_the_scrape(ports: list[list[int]]) -> None:
    target = target_of({"containers": [container(f"c{i}", *numbers) for i, numbers in enumerate(ports)]})
    everything = [number for numbers in ports for number in numbers]
    assert (target.url is None) == (everything != [] and EXPORTER_PORT not in everything)
