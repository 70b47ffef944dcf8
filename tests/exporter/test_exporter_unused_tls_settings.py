"""The settings that verify ModelMesh's https certificate are named at start when `--modelmesh-url` is http://.

`EXPORTER_MODELMESH_CA_FILE` (or `--modelmesh-insecure`) with an `http://` URL did nothing, silently: there is no
certificate to verify on plain HTTP, and the operator believed the reads were verified (or needed the switch)."""

from __future__ import annotations

import os
from pathlib import Path

import certifi
import pytest

from tests.support.processes import free_port, running


def start_log(tmp_path: Path, url: str, env: dict[str, str]) -> str:
    port = free_port()
    log = tmp_path / "exporter.log"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("EXPORTER_")}
    environ.update(EXPORTER_LISTEN=f"127.0.0.1:{port}", EXPORTER_MODELMESH_URL=url, EXPORTER_NO_GPU="true", **env)
    with running(["exporter.cli"], f"http://127.0.0.1:{port}/healthz", log, env=environ):
        pass
    return log.read_text()


@pytest.mark.parametrize(("env", "flag"), [
    ({"EXPORTER_MODELMESH_CA_FILE": certifi.where()}, "--modelmesh-ca-file (EXPORTER_MODELMESH_CA_FILE)"),
    ({"EXPORTER_MODELMESH_INSECURE": "true"}, "--modelmesh-insecure (EXPORTER_MODELMESH_INSECURE)"),
])
def test_a_tls_setting_with_an_http_modelmesh_url_is_named(tmp_path: Path, env: dict[str, str], flag: str) -> None:
    log = start_log(tmp_path, "http://127.0.0.1:1/metrics", env)
    says = (f"WARNING exporter: {flag} is not used: --modelmesh-url (EXPORTER_MODELMESH_URL) is plain http://, "
            "with no certificate to verify; leave it out, or give an https:// URL")
    assert log.count(says) == 1, log


def test_the_same_settings_with_an_https_url_say_nothing_of_the_kind(tmp_path: Path) -> None:
    log = start_log(tmp_path, "https://127.0.0.1:1/metrics", {"EXPORTER_MODELMESH_CA_FILE": certifi.where()})
    assert "is not used" not in log, log
