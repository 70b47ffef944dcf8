"""Settings of the metric source `serve` does not use are said at start, not dropped in silence.

`serve --prometheus-url http://prometheus:9090` looked like a switch to Prometheus: the adapter started, logged
"source scrape", and scraped the exporters as before; the URL, a token file or headers for Prometheus did
nothing, and nothing said so. The same the other way: `--scrape-timeout` under `--source prometheus`.
A warning, not a refusal: an adapter that starts today with a leftover variable keeps starting after an upgrade.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from autoscaler.api.certs import generate_self_signed
from tests.support.ports import free_port
from tests.support.processes import running

TARGETS = """
runtimes:
  - namespace: default
    deployment: modelmesh-serving-demo
    pods: [{name: demo-0, url: "http://127.0.0.1:9/metrics"}]
"""


def start_log(tmp_path: Path, *flags: str) -> str:
    """What `serve` logs by the time it answers."""
    targets, log, port = tmp_path / "targets.yaml", tmp_path / "serve.log", free_port()
    targets.write_text(TARGETS)
    args = ["autoscaler.cli", "serve", "--insecure-dev", "--workers", "0", "--listen", f"127.0.0.1:{port}",
            "--targets", str(targets), *flags]
    with running(args, f"https://127.0.0.1:{port}/healthz", log):
        pass
    return log.read_text()


@pytest.mark.parametrize(("flags", "says"), [
    (["--prometheus-url", "http://127.0.0.1:9/"],
     "--prometheus-url is not used with --source scrape (the default): add --source prometheus to read Prometheus"),
    (["--prometheus-url", "http://127.0.0.1:9/", "--prometheus-timeout", "9", "--prometheus-pod-label",
      "kubernetes_pod_name"],
     "--prometheus-url, --prometheus-timeout and --prometheus-pod-label are not used with --source scrape"),
    (["--source", "prometheus", "--prometheus-url", "http://127.0.0.1:9/", "--scrape-timeout", "2"],
     "--scrape-timeout is not used with --source prometheus: the adapter reads Prometheus, not the exporters"),
])
def test_a_setting_of_the_other_source_is_named_at_start(tmp_path: Path, flags: list[str], says: str) -> None:
    log = start_log(tmp_path, *flags)
    assert says in log, log


@pytest.mark.parametrize(("flags", "says"), [
    (["--namespaces", "foo"], "--namespaces does nothing with --targets"),
    (["--namespaces", "foo", "--exporter-port", "1234", "--bridge", "on"],
     "--namespaces, --exporter-port and --bridge on do nothing with --targets"),
])
def test_a_kubernetes_discovery_setting_with_a_targets_file_is_named_at_start(
        tmp_path: Path, flags: list[str], says: str) -> None:
    """The runtime in namespace `default` was served under `--namespaces foo`, and an explicit `--bridge on` did
    nothing, without a word: the targets file names the runtimes and their pods."""
    log = start_log(tmp_path, *flags)
    assert says in log, log


def test_the_settings_of_the_source_in_use_say_nothing(tmp_path: Path) -> None:
    log = start_log(tmp_path, "--scrape-timeout", "2", "--exporter-port", "9187")
    assert "is not used with" not in log and "are not used with" not in log, log


def test_every_setting_the_warning_can_name_is_a_flag_of_serve() -> None:
    """The warning builds flag names from the settings' names: a renamed flag would be named wrong."""
    import argparse

    from autoscaler.cli import build_parser
    from autoscaler.preflight import _PROMETHEUS_ONLY, _SCRAPE_ONLY, _flag

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    flags = {s for action in commands.choices["serve"]._actions for s in action.option_strings}
    assert {_flag(name) for name in (*_PROMETHEUS_ONLY, *_SCRAPE_ONLY)} <= flags


@pytest.mark.parametrize(("flags", "says"), [
    (["--prometheus-ca-file", "{missing}"], "argument --prometheus-ca-file: cannot use '{missing}' as a CA bundle"),
    (["--prometheus-token-file", "{missing}"], "argument --prometheus-token-file: cannot read a token from"),
    (["--source", "prometheus", "--prometheus-url", "http://127.0.0.1:9/", "--exporter-ca-file", "{missing}"],
     "argument --exporter-ca-file: cannot use '{missing}' as a CA bundle"),
])
def test_a_file_setting_of_the_other_source_must_still_name_a_file(tmp_path: Path, flags: list[str],
                                                                   says: str) -> None:
    """Unused, it only warns; a path that does not exist is a mistake either way, and the docs said both (that
    the adapter still starts, and that the file is checked at start): it is refused at start, naming the flag."""
    missing = str(tmp_path / "nothere.pem")
    args = [sys.executable, "-m", "autoscaler.cli", "serve", "--insecure-dev", "--listen", "127.0.0.1:9",
            "--targets", str(tmp_path / "targets.yaml"), *(flag.format(missing=missing) for flag in flags)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert says.format(missing=missing) in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_tls_service_with_a_certificate_of_ones_own_is_named_at_start(tmp_path: Path) -> None:
    """`--tls-service` names the Service in the certificate the adapter generates; given beside a certificate of
    the user's own (`--tls-cert-file`) it did nothing, without a word (s58 security review)."""
    certs = generate_self_signed(tmp_path / "certs", "modelmesh-autoscaler", ["127.0.0.1"])
    log = start_log(tmp_path, "--tls-cert-file", str(certs.cert_file), "--tls-private-key-file", str(certs.key_file),
                    "--tls-service", "autoscaler.monitoring")
    assert "--tls-service does nothing with --tls-cert-file" in log, log
    alone = tmp_path / "alone"
    alone.mkdir()
    assert "--tls-service does nothing" not in start_log(alone, "--tls-service", "autoscaler.monitoring")
