"""A rotated client CA (`--tls-client-ca-file`) is honoured without restarting the runtime's pods: before, the
exporter read the bundle once, so the adapter's and Prometheus's certificates of a new CA were refused in the
handshake until every pod was restarted, and a CA dropped from the bundle kept reading /metrics. Checked with
the real exporter process and curl, the bundle replaced as the kubelet replaces a Secret's files."""

from __future__ import annotations

import os
from pathlib import Path

import trustme

from tests.exporter.test_exporter_client_certificates import client_certificate, to_exporter
from tests.exporter.test_exporter_serving_tls import Pki, curl, exporter_env, pki, served_subject
from tests.support.processes import free_port, poll, running

__all__ = ["pki"]  # the fixture, taken from its module


def replace_bundle(path: Path, authority: trustme.CA) -> None:
    """Write the CA bundle in one step, as the kubelet's swap of a mounted Secret or ConfigMap makes it appear."""
    written = path.with_name(f".{path.name}.new")
    authority.cert_pem.write_to_path(str(written))
    os.replace(written, path)


def test_a_rotated_client_ca_is_honoured_and_the_old_one_refused_without_a_restart(tmp_path: Path, pki: Pki) -> None:
    port = free_port()
    bundle = tmp_path / "client-ca.pem"
    replace_bundle(bundle, pki.authority)
    env = exporter_env(port, EXPORTER_TLS_CERT_FILE=str(pki.secret / "tls.crt"),
                       EXPORTER_TLS_KEY_FILE=str(pki.secret / "tls.key"), EXPORTER_TLS_CLIENT_CA_FILE=str(bundle))
    rotated = trustme.CA()
    old_client = client_certificate(tmp_path, pki.authority, "adapter-old")
    new_client = client_certificate(tmp_path, rotated, "adapter-new")
    url = f"https://localhost:{port}/metrics"
    log = tmp_path / "exporter.log"
    with running(["exporter.cli"], f"https://127.0.0.1:{port}/healthz", log, env=env):
        assert to_exporter(url, pki, *old_client).stdout.endswith("\n200")
        assert to_exporter(url, pki, *new_client).returncode != 0  # not trusted yet: refused in the handshake

        replace_bundle(bundle, rotated)

        poll(lambda: to_exporter(url, pki, *new_client).stdout.endswith("\n200"), timeout=60)
        answer = to_exporter(url, pki, *new_client)
        assert "modelmesh_exporter_collector_success" in answer.stdout, answer
        refused = to_exporter(url, pki, *old_client)
        assert refused.returncode != 0 and "modelmesh_" not in refused.stdout, refused  # the dropped CA
        by_address = curl(f"https://127.0.0.1:{port}/metrics", "--insecure", *new_client)  # no server name sent
        assert by_address.stdout.endswith("\n200"), by_address
        assert to_exporter(f"https://localhost:{port}/healthz", pki).stdout == "ok\n\n200"  # the kubelet's probe
    assert f"client CA reloaded from {bundle}" in log.read_text()


def test_a_bundle_that_does_not_load_keeps_the_current_ca_and_names_the_setting(tmp_path: Path, pki: Pki) -> None:
    port = free_port()
    bundle = tmp_path / "client-ca.pem"
    replace_bundle(bundle, pki.authority)
    env = exporter_env(port, EXPORTER_TLS_CERT_FILE=str(pki.secret / "tls.crt"),
                       EXPORTER_TLS_KEY_FILE=str(pki.secret / "tls.key"), EXPORTER_TLS_CLIENT_CA_FILE=str(bundle))
    client = client_certificate(tmp_path, pki.authority, "adapter")
    url = f"https://localhost:{port}/metrics"
    log = tmp_path / "exporter.log"
    with running(["exporter.cli"], f"https://127.0.0.1:{port}/healthz", log, env=env):
        half = bundle.with_name(".half")
        half.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n")  # a bundle cut short
        os.replace(half, bundle)
        said = f"--tls-client-ca-file (EXPORTER_TLS_CLIENT_CA_FILE) {bundle} changed but does not load"
        poll(lambda: said in log.read_text(), timeout=60)
        assert to_exporter(url, pki, *client).stdout.endswith("\n200")  # the CA loaded before still applies
    assert "client CA reloaded" not in log.read_text()


def test_a_renewed_serving_certificate_is_served_with_client_certificates_asked(tmp_path: Path, pki: Pki) -> None:
    port = free_port()
    env = exporter_env(port, EXPORTER_TLS_CERT_FILE=str(pki.secret / "tls.crt"),
                       EXPORTER_TLS_KEY_FILE=str(pki.secret / "tls.key"), EXPORTER_TLS_CLIENT_CA_FILE=str(pki.ca_file))
    log = tmp_path / "exporter.log"
    client = client_certificate(tmp_path, pki.authority, "adapter")
    with running(["exporter.cli"], f"https://127.0.0.1:{port}/healthz", log, env=env):
        assert served_subject(port, pki.ca_file) == "first"
        pki.issue("renewed", "v2")
        poll(lambda: served_subject(port, pki.ca_file) == "renewed", timeout=60)
        assert to_exporter(f"https://localhost:{port}/metrics", pki, *client).stdout.endswith("\n200")
    assert f"serving certificate reloaded from {pki.secret / 'tls.crt'}" in log.read_text()
