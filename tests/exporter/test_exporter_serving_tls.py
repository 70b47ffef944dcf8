"""The exporter serves /metrics and /healthz over HTTPS when given a certificate, as node-exporter's web config
does: its /metrics names the pod and the models it served, which plain HTTP gave to anyone who could reach the
port. Checked with the real exporter process and curl, as a platform engineer checks it; a renewed certificate
(the kubelet's symlink swap of a Secret volume) is served without a restart."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme

from tests.api.test_cert_reload import write_secret_volume
from tests.support.certificates import issue_cert
from tests.support.processes import free_port, poll, running


def exporter_env(port: int, **variables: str) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("EXPORTER_")}
    environ.update(EXPORTER_LISTEN=f"127.0.0.1:{port}", EXPORTER_MODELMESH_URL="http://127.0.0.1:1/metrics",
                   EXPORTER_NO_GPU="true", **variables)
    return environ


def curl(url: str, *options: str) -> subprocess.CompletedProcess[str]:
    """curl as an operator runs it: the status code on the last line, the body before it."""
    return subprocess.run(["curl", "--silent", "--show-error", "--max-time", "20", "--write-out", "\n%{http_code}",
                           *options, url], capture_output=True, text=True, check=False)


def served_subject(port: int, ca: Path) -> str:
    """The common name of the certificate the exporter presents, as openssl s_client prints it."""
    shown = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-servername", "localhost",
                            "-CAfile", str(ca)], input="", capture_output=True, text=True, timeout=20, check=False)
    return next((line.rpartition("CN = ")[2] for line in shown.stdout.splitlines() if line.startswith("subject=")),
                shown.stdout)


def start_refused(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "exporter.cli"], env=env, capture_output=True, text=True,
                          timeout=60, check=False)


@dataclass(frozen=True)
class Pki:
    """A CA, its PEM file, and a Secret volume (`tls.crt`, `tls.key`) holding a certificate it issued."""

    authority: trustme.CA
    ca_file: Path
    secret: Path

    def issue(self, common_name: str, version: str) -> None:
        """Renew the Secret as the kubelet writes it (cert-manager's renewal, then the `..data` swap)."""
        write_secret_volume(self.secret, issue_cert(self.authority, "localhost", "127.0.0.1",
                                                                   common_name=common_name), version)


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    made = Pki(trustme.CA(), tmp_path / "ca.pem", tmp_path / "secret")
    made.authority.cert_pem.write_to_path(str(made.ca_file))
    made.secret.mkdir()
    made.issue("first", "v1")
    return made


def test_metrics_and_healthz_are_served_over_https_with_the_given_certificate(tmp_path: Path, pki: Pki) -> None:
    port = free_port()
    secret = pki.secret
    env = exporter_env(port, EXPORTER_TLS_CERT_FILE=str(secret / "tls.crt"),
                       EXPORTER_TLS_KEY_FILE=str(secret / "tls.key"))
    log = tmp_path / "exporter.log"
    with running(["exporter.cli"], f"https://127.0.0.1:{port}/healthz", log, env=env):
        metrics = curl(f"https://localhost:{port}/metrics", "--cacert", str(pki.ca_file), "--resolve",
                       f"localhost:{port}:127.0.0.1")
        assert metrics.stdout.endswith("\n200"), metrics
        assert "modelmesh_exporter_collector_success" in metrics.stdout
        healthz = curl(f"https://localhost:{port}/healthz", "--cacert", str(pki.ca_file), "--resolve",
                       f"localhost:{port}:127.0.0.1")
        assert healthz.stdout == "ok\n\n200", healthz
        plain = curl(f"http://127.0.0.1:{port}/metrics")
        assert not plain.stdout.endswith("\n200"), plain  # plain HTTP gets nothing from an HTTPS port
    said = log.read_text()
    assert f"over HTTPS with the certificate {secret / 'tls.crt'}" in said, said


def test_a_renewed_certificate_is_served_without_a_restart(tmp_path: Path, pki: Pki) -> None:
    port = free_port()
    secret = pki.secret
    env = exporter_env(port, EXPORTER_TLS_CERT_FILE=str(secret / "tls.crt"),
                       EXPORTER_TLS_KEY_FILE=str(secret / "tls.key"))
    log = tmp_path / "exporter.log"
    with running(["exporter.cli"], f"https://127.0.0.1:{port}/healthz", log, env=env):
        assert served_subject(port, pki.ca_file) == "first"
        pki.issue("renewed", "v2")
        poll(lambda: served_subject(port, pki.ca_file) == "renewed", timeout=60)
    assert f"serving certificate reloaded from {secret / 'tls.crt'}" in log.read_text()


@pytest.mark.parametrize(("given", "missing"), [
    ("EXPORTER_TLS_CERT_FILE", "--tls-key-file (EXPORTER_TLS_KEY_FILE)"),
    ("EXPORTER_TLS_KEY_FILE", "--tls-cert-file (EXPORTER_TLS_CERT_FILE)"),
])
def test_a_certificate_without_its_key_is_refused(tmp_path: Path, pki: Pki, given: str, missing: str) -> None:
    refused = start_refused(exporter_env(free_port(), **{given: str(pki.secret / "tls.crt")}))
    assert refused.returncode == 2, refused
    assert f"needs {missing}" in refused.stderr, refused.stderr


def test_a_key_of_another_certificate_is_refused_naming_both_files(tmp_path: Path, pki: Pki) -> None:
    other = issue_cert(trustme.CA(), "localhost")
    key = tmp_path / "other.key"
    other.private_key_pem.write_to_path(str(key))
    cert = pki.secret / "tls.crt"
    refused = start_refused(exporter_env(free_port(), EXPORTER_TLS_CERT_FILE=str(cert),
                                         EXPORTER_TLS_KEY_FILE=str(key)))
    assert refused.returncode == 2, refused
    assert (f"modelmesh-exporter: error: --tls-cert-file (EXPORTER_TLS_CERT_FILE) {cert} and --tls-key-file "
            f"(EXPORTER_TLS_KEY_FILE) {key} are not a PEM certificate and its private key") in refused.stderr, \
        refused.stderr


def test_a_missing_key_file_is_named(tmp_path: Path, pki: Pki) -> None:
    key = tmp_path / "nowhere.key"
    refused = start_refused(exporter_env(free_port(), EXPORTER_TLS_CERT_FILE=str(pki.secret / "tls.crt"),
                                         EXPORTER_TLS_KEY_FILE=str(key)))
    assert refused.returncode == 2, refused
    assert f"--tls-key-file (EXPORTER_TLS_KEY_FILE) {key}: cannot read it: No such file or directory" in \
        refused.stderr, refused.stderr
