"""`--exporter-server-name` and `--exporter-client-cert-file` apply only to an https scrape: given while every
exporter is scraped over plain http (`--exporter-scheme http`, the default, or a targets file of http:// URLs
only), they were taken without a word, and the user believed the exporters' port was behind TLS. A WARNING at
start names them and what makes them apply; nothing is said where an https scrape uses them.

The real `serve` with a targets file (no Kubernetes API), as `test_serve_unused_settings` starts it."""

from __future__ import annotations

from pathlib import Path

import pytest
import trustme

from autoscaler.unused_settings import unused_settings
from tests.support.certificates import issue_cert
from tests.test_serve_settings import settings as parse
from tests.test_serve_unused_settings import start_log, warnings

HTTPS_TARGETS = """
runtimes:
  - namespace: default
    deployment: modelmesh-serving-demo
    pods: [{name: demo-0, url: "https://127.0.0.1:9/metrics"}]
"""


def client_pair(tmp_path: Path) -> list[str]:
    leaf = issue_cert(trustme.CA(), "modelmesh-autoscaler")
    cert, key = tmp_path / "client.crt", tmp_path / "client.key"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    return ["--exporter-client-cert-file", str(cert), "--exporter-client-key-file", str(key)]


@pytest.mark.parametrize("given", ["server-name", "client-certificate", "both"])
def test_exporter_tls_settings_with_plain_http_targets_are_named(tmp_path: Path, given: str) -> None:
    flags = {"server-name": ["--exporter-server-name", "modelmesh-exporter"],
             "client-certificate": client_pair(tmp_path),
             "both": ["--exporter-server-name", "modelmesh-exporter", *client_pair(tmp_path)]}[given]
    log = start_log(tmp_path, *flags)
    named = [flag for flag in flags if flag.startswith("--")]
    said = [line for line in warnings(log) if all(flag in line for flag in named) and "plain http" in line]
    assert len(said) == 1, log
    assert "https:// URLs in the targets file" in said[0], said


def test_they_are_named_where_discovered_exporters_are_forced_to_plain_http() -> None:
    """Without a targets file the fix is --exporter-scheme https or auto (what the warning says needs no
    cluster); under `auto`, the default, a pod whose port is named https-... is scraped over https: nothing to
    say before the pods are seen."""
    settings = parse(["--exporter-server-name", "modelmesh-exporter", "--exporter-scheme", "http"], {})
    [said] = [line for line in unused_settings(settings) if "--exporter-server-name" in line]
    assert "--exporter-scheme http" in said and "--exporter-scheme https" in said, said
    default = parse(["--exporter-server-name", "modelmesh-exporter"], {})
    assert not [line for line in unused_settings(default) if "--exporter-server-name" in line]


def test_nothing_is_said_where_a_target_is_scraped_over_https(tmp_path: Path) -> None:
    log = start_log(tmp_path, "--exporter-server-name", "modelmesh-exporter", *client_pair(tmp_path),
                    targets=HTTPS_TARGETS)
    assert not [line for line in warnings(log) if "--exporter-server-name" in line], log
