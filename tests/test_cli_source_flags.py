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


def start_log(tmp_path: Path, *flags: str, env: dict[str, str] | None = None) -> str:
    """What `serve` logs by the time it answers (with the variables `env` set)."""
    targets, log, port = tmp_path / "targets.yaml", tmp_path / "serve.log", free_port()
    targets.write_text(TARGETS)
    args = ["autoscaler.cli", "serve", "--insecure-dev", "--workers", "0", "--listen", f"127.0.0.1:{port}",
            "--targets", str(targets), *flags]
    with running(args, f"https://127.0.0.1:{port}/healthz", log, env):
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


PROMETHEUS_URL = "http://127.0.0.1:9/"


def test_a_source_given_twice_is_named_as_the_last_one_given_not_as_the_default(tmp_path: Path) -> None:
    """A user who added `--source=prometheus` above the Deployment's `--source=scrape` read
    '--prometheus-url is not used with --source scrape (the default): add --source prometheus': both false, as
    they had given it; argparse keeps the last of a flag given twice, without a word (s64 reviewer)."""
    log = start_log(tmp_path, "--source", "prometheus", "--prometheus-url", PROMETHEUS_URL, "--source", "scrape")
    assert "source scrape" in log and "(the default)" not in log, log
    assert ("--prometheus-url is not used with --source scrape, the last --source given (a flag given twice keeps "
            "its last value: --source prometheus before it did nothing): give --source once, as --source "
            "prometheus, to read Prometheus") in log, log
    assert ("--source is given more than once, with different values: only the last one is used, the earlier ones "
            "do nothing; give it once") in log, log


def test_a_source_flag_over_its_variable_is_named_as_the_flag_that_won(tmp_path: Path) -> None:
    """`AUTOSCALER_SOURCE=prometheus` in the pod spec, under the Deployment's `--source=scrape`: the flag wins
    over its variable, and the warning called the flag's value the default and asked for what was set."""
    log = start_log(tmp_path, "--source", "scrape",
                    env={"AUTOSCALER_SOURCE": "prometheus", "AUTOSCALER_PROMETHEUS_URL": PROMETHEUS_URL})
    assert "(the default)" not in log, log
    assert ("AUTOSCALER_PROMETHEUS_URL is not used with --source scrape, given on the command line, which wins "
            "over AUTOSCALER_SOURCE=prometheus: drop the flag, or make it --source prometheus, to read Prometheus"
            ) in log, log
    assert ("AUTOSCALER_SOURCE does nothing: --source is given too, with another value, and a flag wins over its "
            "variable; drop one of them") in log, log


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
