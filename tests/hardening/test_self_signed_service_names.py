"""The certificate the adapter generates when given no --tls-cert-file names the Service the aggregator reaches
it through, so that an APIService can verify it (`caBundle` set to that very certificate, no
`insecureSkipTLSVerify`). It named only 127.0.0.1, localhost and the pod's host name, which no client reaching the
Service asks for: pinning it failed with a host-name mismatch. Read from the served certificate, in both serving
modes, as a client sees it."""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from pathlib import Path

import pytest
from cryptography import x509

from tests.hardening.adapter import adapter_running


def served_dns_names(tmp_path: Path, args: Sequence[str]) -> list[str]:
    with adapter_running(tmp_path, ["http://127.0.0.1:1/metrics"], ["--deletion-cost", "off", *args]) as adapter:
        pem = ssl.get_server_certificate(("127.0.0.1", adapter.port), timeout=30)
    names = x509.load_pem_x509_certificate(pem.encode()).extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value
    return names.get_values_for_type(x509.DNSName)


@pytest.mark.parametrize("mode", [pytest.param([], id="workers"), pytest.param(["--workers", "0"], id="workers-0")])
def test_the_generated_certificate_names_the_shipped_service(tmp_path: Path, mode: list[str]) -> None:
    names = served_dns_names(tmp_path, mode)
    for name in ("modelmesh-autoscaler.modelmesh-autoscaler.svc",
                 "modelmesh-autoscaler.modelmesh-autoscaler.svc.cluster.local", "localhost"):
        assert name in names, names


def test_the_generated_certificate_names_the_service_it_is_told(tmp_path: Path) -> None:
    names = served_dns_names(tmp_path, ["--tls-service", "metrics-adapter.team-ops"])
    assert {"metrics-adapter.team-ops.svc", "metrics-adapter.team-ops.svc.cluster.local"} <= set(names), names
    assert not any(name.startswith("modelmesh-autoscaler.") for name in names), names
