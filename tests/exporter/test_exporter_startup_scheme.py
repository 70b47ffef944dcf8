"""The exporter's line that says where it listens says whether it serves HTTP or HTTPS: before, only a second
line said HTTPS, and a plain exporter said nothing of it, so an operator reading the first line of a sidecar's
log (or a log search for "serving on") could not tell which scheme the adapter and Prometheus must scrape.
The real exporter process, plain and with a certificate."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.exporter.test_exporter_serving_tls import Pki, exporter_env, pki
from tests.support.processes import free_port, running

__all__ = ["pki"]  # the fixture, taken from its module


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_the_listening_line_says_the_scheme(tmp_path: Path, pki: Pki, scheme: str) -> None:
    port = free_port()
    tls = ({"EXPORTER_TLS_CERT_FILE": str(pki.secret / "tls.crt"), "EXPORTER_TLS_KEY_FILE": str(pki.secret / "tls.key")}
           if scheme == "https" else {})
    log = tmp_path / "exporter.log"
    with running(["exporter.cli"], f"{scheme}://127.0.0.1:{port}/healthz", log, env=exporter_env(port, **tls)):
        pass
    [listening] = [line for line in log.read_text().splitlines() if "serving on" in line]
    said = {"http": f"serving on 127.0.0.1:{port}; /metrics and /healthz over plain HTTP (no --tls-cert-file "
                    "(EXPORTER_TLS_CERT_FILE));",
            "https": f"serving on 127.0.0.1:{port}; /metrics and /healthz over HTTPS;"}[scheme]
    assert said in listening, listening
