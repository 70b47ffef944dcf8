"""With `--tls-client-ca-file`, /metrics answers only clients whose certificate chains to the CA (mTLS, as
node-exporter's `client_ca_file`), while /healthz stays reachable for the kubelet's HTTPS probes, which send no
client certificate. Checked with the real exporter process and curl."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from tests.exporter.test_exporter_serving_tls import Pki, curl, exporter_env, pki, start_refused
from tests.support.certificates import issue_cert
from tests.support.processes import free_port, running

__all__ = ["pki"]  # the fixture, taken from its module


@pytest.fixture
def exporter(tmp_path: Path, pki: Pki) -> Iterator[str]:
    """The exporter's base URL as curl reaches it, serving with client certificates asked."""
    port = free_port()
    env = exporter_env(port, EXPORTER_TLS_CERT_FILE=str(pki.secret / "tls.crt"),
                       EXPORTER_TLS_KEY_FILE=str(pki.secret / "tls.key"), EXPORTER_TLS_CLIENT_CA_FILE=str(pki.ca_file))
    with running(["exporter.cli"], f"https://127.0.0.1:{port}/healthz", tmp_path / "exporter.log", env=env):
        yield f"https://localhost:{port}"


def client_certificate(tmp_path: Path, authority: trustme.CA, name: str) -> list[str]:
    """curl's options presenting a client certificate `authority` issued."""
    leaf = issue_cert(authority, f"{name}@example.com", common_name=name)
    leaf.cert_chain_pems[0].write_to_path(str(tmp_path / f"{name}.crt"))
    leaf.private_key_pem.write_to_path(str(tmp_path / f"{name}.key"))
    return ["--cert", str(tmp_path / f"{name}.crt"), "--key", str(tmp_path / f"{name}.key")]


def to_exporter(url: str, pki: Pki, *options: str) -> subprocess.CompletedProcess[str]:
    port = url.rpartition(":")[2].partition("/")[0]
    return curl(url, "--cacert", str(pki.ca_file), "--resolve", f"localhost:{port}:127.0.0.1", *options)


def test_a_client_with_a_certificate_of_the_ca_reads_metrics(tmp_path: Path, pki: Pki, exporter: str) -> None:
    answer = to_exporter(f"{exporter}/metrics", pki, *client_certificate(tmp_path, pki.authority, "prometheus"))
    assert answer.stdout.endswith("\n200"), answer
    assert "modelmesh_exporter_collector_success" in answer.stdout


def test_a_client_without_a_certificate_is_refused_metrics_but_not_healthz(pki: Pki, exporter: str) -> None:
    metrics = to_exporter(f"{exporter}/metrics", pki)
    assert metrics.stdout.endswith("\n401"), metrics
    assert "--tls-client-ca-file (EXPORTER_TLS_CLIENT_CA_FILE)" in metrics.stdout
    assert "modelmesh_" not in metrics.stdout
    healthz = to_exporter(f"{exporter}/healthz", pki)
    assert healthz.stdout == "ok\n\n200", healthz  # the kubelet's probe sends no client certificate


def test_a_certificate_of_another_ca_is_refused_in_the_handshake(tmp_path: Path, pki: Pki, exporter: str) -> None:
    answer = to_exporter(f"{exporter}/metrics", pki, *client_certificate(tmp_path, trustme.CA(), "stranger"))
    assert answer.returncode != 0, answer  # no HTTP at all: the TLS connection is refused
    assert "modelmesh_" not in answer.stdout


def test_a_client_ca_without_a_serving_certificate_is_refused(pki: Pki) -> None:
    refused = start_refused(exporter_env(free_port(), EXPORTER_TLS_CLIENT_CA_FILE=str(pki.ca_file)))
    assert refused.returncode == 2, refused
    assert ("--tls-client-ca-file (EXPORTER_TLS_CLIENT_CA_FILE) needs --tls-cert-file (EXPORTER_TLS_CERT_FILE)"
            in refused.stderr), refused.stderr
