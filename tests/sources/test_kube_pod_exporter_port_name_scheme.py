"""Each discovered exporter is scraped over the scheme its declared port's name says (`--exporter-scheme auto`, the
default): `https` or `https-*` over https, any other name over http, as Istio reads port names; `http` and
`https` force one scheme whatever the names. A pod declaring the plain sidecar's `exporter` stays on http."""

from __future__ import annotations

import urllib.parse

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import RuntimeKey
from autoscaler.sources.kube_objects import RuntimeRecord, build_inventory, parse_pod

KEY = RuntimeKey("modelmesh-serving", "modelmesh-serving-triton")
SELECTOR = {"name": KEY.deployment}
EXPORTER_PORT = 9187

PORT_NAMES = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?", fullmatch=True) | st.sampled_from(
    ["https", "https-exporter", "https-metrics", "http", "http-exporter", "exporter", "httpsexporter", "xhttps"])
"""Port names as the API takes them (IANA_SVC_NAME: lower case, at most 15), and the ones that matter."""


def scheme_scraped(ports: list[tuple[str, int]], *forced: str) -> str | None:
    """The scheme of the URL discovery gives the pod's exporter, the sidecar declaring `ports` (none: no container
    declares any)."""
    containers: list[dict[str, object]] = [{"name": "mm", "image": "x"}, {"name": "autoscaler-exporter", "image": "x"}]
    if ports:
        containers[0]["ports"] = [{"name": "grpc", "containerPort": 8033}]
        containers[1]["ports"] = [{"name": name, "containerPort": number} for name, number in ports]
    pod = parse_pod({"metadata": {"name": "triton-0", "namespace": KEY.namespace, "labels": SELECTOR},
                     "spec": {"containers": containers},
                     "status": {"podIP": "10.1.2.3", "conditions": [{"type": "Ready", "status": "True"}]}})
    assert pod is not None
    (target,) = build_inventory({KEY: RuntimeRecord(KEY, SELECTOR)}, [pod], EXPORTER_PORT, *forced)[KEY].pods
    return None if target.url is None else urllib.parse.urlsplit(target.url).scheme


@given(name=PORT_NAMES)
def test_the_exporter_ports_name_says_the_scheme(name: str) -> None:
    expected = "https" if name == "https" or name.startswith("https-") else "http"
    assert scheme_scraped([(name, EXPORTER_PORT)]) == expected
    assert scheme_scraped([(name, EXPORTER_PORT)], "auto") == expected


@given(name=PORT_NAMES, other=st.integers(1, 65535).filter(lambda number: number != EXPORTER_PORT))
def test_only_the_exporter_ports_own_name_counts(name: str, other: int) -> None:
    """An HTTPS port of another container (a proxy, the model server's) does not move the exporter to https."""
    assert scheme_scraped([("https", other), (name, EXPORTER_PORT)]) == (
        "https" if name == "https" or name.startswith("https-") else "http")


@given(name=PORT_NAMES, forced=st.sampled_from(["http", "https"]))
def test_a_forced_scheme_applies_whatever_the_name(name: str, forced: str) -> None:
    assert scheme_scraped([(name, EXPORTER_PORT)], forced) == forced
    assert scheme_scraped([], forced) == forced  # pods that declare no ports: the reason to force one


def test_existing_installs_stay_on_http() -> None:
    assert scheme_scraped([("exporter", EXPORTER_PORT)]) == "http"  # the plain sidecar patch's port
    assert scheme_scraped([]) == "http"  # a pod that declares no ports
