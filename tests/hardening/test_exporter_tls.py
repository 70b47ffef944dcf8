"""An exporter behind https with a certificate from the cluster's own CA: without `--exporter-ca-file` every
scrape fails with reason `tls` (the exporter's word for the same failure against ModelMesh) and nothing is
served; with the CA trusted, through the flag or its variable, the scrape works and the value is served."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from tests.hardening.adapter import DEPLOYMENT, adapter_running
from tests.support.certificates import issue_cert
from tests.support.processes import free_port, http_get, poll, running

LOAD = ("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/modelmesh_request_load"
        f"?labelSelector=deployment%3D{DEPLOYMENT}")
TLS_ERRORS = re.compile(r'modelmesh_autoscaler_source_errors_total\{(?=[^}]*reason="tls")(?=[^}]*source="scrape")'
                        r'[^}]*\} (\S+)')
FAST = ["--refresh-interval", "1", "--deletion-cost", "off"]


@pytest.fixture
def ca(tmp_path: Path) -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def https_exporter(tmp_path: Path, ca: trustme.CA) -> Iterator[str]:
    leaf = issue_cert(ca, "127.0.0.1")
    cert, key = tmp_path / "exporter.crt", tmp_path / "exporter.key"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    port = free_port()
    with running(["tests.hardening.https_exporter", "--port", str(port), "--cert", str(cert), "--key", str(key)],
                 f"https://127.0.0.1:{port}/healthz", tmp_path / "exporter.log"):
        yield f"https://127.0.0.1:{port}/metrics"


def tls_errors(url: str) -> float:
    _, text = http_get(url + "/metrics")
    found = TLS_ERRORS.search(text)
    return float(found.group(1)) if found else 0.0


def test_an_exporter_certificate_from_an_unknown_ca_fails_with_reason_tls(tmp_path: Path, https_exporter: str) -> None:
    with adapter_running(tmp_path, [https_exporter], FAST) as adapter:
        poll(lambda: tls_errors(adapter.url) >= 1, timeout=20)
        status, _ = http_get(adapter.url + LOAD)
        log = adapter.log_text()
    assert status == 503  # nothing read, nothing served: the HPA holds
    assert "failed (tls)" in log and "certificate verify failed" in log, log


@pytest.mark.parametrize("how", ["flag", "variable"])
def test_with_the_exporters_ca_trusted_the_scrape_works(tmp_path: Path, https_exporter: str, ca: trustme.CA,
                                                        how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    bundle = tmp_path / "exporters-ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    args = FAST
    if how == "flag":
        args = [*FAST, "--exporter-ca-file", str(bundle)]
    else:
        monkeypatch.setenv("AUTOSCALER_EXPORTER_CA_FILE", str(bundle))
    with adapter_running(tmp_path, [https_exporter], args) as adapter:
        def served_body() -> str | None:
            status, text = http_get(adapter.url + LOAD)
            return text if status == 200 else None

        body = poll(served_body, timeout=20)
        errors = tls_errors(adapter.url)
    assert json.loads(body)["items"][0]["value"] == "42000m"  # one pod at 42 requests/s
    assert errors == 0


def test_a_ca_file_that_is_not_a_certificate_is_refused_at_start(tmp_path: Path) -> None:
    junk = tmp_path / "ca.pem"
    junk.write_text("not a certificate\n")
    result = subprocess.run(
        [sys.executable, "-m", "autoscaler.cli", "serve", "--insecure-dev", "--exporter-ca-file", str(junk)],
        capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert "--exporter-ca-file" in result.stderr and "cannot use" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
