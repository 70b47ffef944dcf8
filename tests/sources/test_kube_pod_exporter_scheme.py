"""Discovered exporters are scraped with `--exporter-scheme`: `https://IP:PORT/metrics` for sidecars given a
certificate, whatever the pod's address family, and `http://` as before by default."""

from __future__ import annotations

import ipaddress
import urllib.parse

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import RuntimeKey
from autoscaler.sources.kube_objects import RuntimeRecord, build_inventory, parse_pod

KEY = RuntimeKey("modelmesh-serving", "modelmesh-serving-triton")
SELECTOR = {"name": KEY.deployment}
ADDRESSES = st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)).map(str)


def url_of(ip: str, port: int, *scheme: str) -> str | None:
    parsed = parse_pod({"metadata": {"name": "triton-0", "namespace": KEY.namespace, "labels": SELECTOR},
                        "spec": {"containers": [{"name": "mm", "image": "x"}]},
                        "status": {"podIP": ip, "conditions": [{"type": "Ready", "status": "True"}]}})
    assert parsed is not None
    (target,) = build_inventory({KEY: RuntimeRecord(KEY, SELECTOR)}, [parsed], port, *scheme)[KEY].pods
    return target.url


@given(ip=ADDRESSES, port=st.integers(1, 65535), scheme=st.sampled_from(["http", "https"]))
def test_the_pod_is_scraped_at_its_address_with_the_scheme_given(ip: str, port: int, scheme: str) -> None:
    url = url_of(ip, port, scheme)
    assert url is not None
    parsed = urllib.parse.urlsplit(url)
    assert (parsed.scheme, parsed.port, parsed.path) == (scheme, port, "/metrics")
    assert parsed.hostname is not None and ipaddress.ip_address(parsed.hostname) == ipaddress.ip_address(ip)


def test_plain_http_stays_the_default() -> None:
    assert url_of("10.0.0.7", 9187) == "http://10.0.0.7:9187/metrics"
