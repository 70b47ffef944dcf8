"""`modelmesh-autoscaler serve` settings: every flag has an `AUTOSCALER_*` twin, checked like the flag."""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import certifi
import pytest

from autoscaler import cli
from autoscaler.serve_args import SettingsError, env_variables, settings_from_args
from autoscaler.settings import ServeSettings

TOKEN = Path(__file__).resolve().parent / "support" / "bearer-token"  # a token file as the kubelet mounts one

# (flag, value, field, expected): each changes a default, so each proves its flag and its variable work.
FLAG_CASES: list[tuple[str, str, str, Any]] = [
    ("--listen", "127.0.0.1:7443", "listen_port", 7443),
    ("--insecure-dev", "true", "insecure_dev", True),
    ("--log-level", "debug", "log_level", "DEBUG"),
    ("--tls-cert-file", "/tls/tls.crt", "tls_cert_file", Path("/tls/tls.crt")),
    ("--tls-private-key-file", "/tls/tls.key", "tls_private_key_file", Path("/tls/tls.key")),
    ("--requestheader-client-ca-file", "/ca/front.crt", "requestheader_client_ca_file", Path("/ca/front.crt")),
    ("--requestheader-allowed-names", "front-proxy-client, aggregator", "requestheader_allowed_names",
     ("front-proxy-client", "aggregator")),
    ("--requestheader-username-headers", "X-User", "requestheader_username_headers", ("X-User",)),
    ("--requestheader-group-headers", "X-Group,X-Team", "requestheader_group_headers", ("X-Group", "X-Team")),
    ("--requestheader-extra-headers-prefix", "X-Extra-", "requestheader_extra_headers_prefix", ("X-Extra-",)),
    ("--client-ca-file", "/ca/client.crt", "client_ca_file", Path("/ca/client.crt")),
    ("--authorization-always-allow-paths", "/healthz", "authorization_always_allow_paths", ("/healthz",)),
    ("--kubeconfig", "/home/me/.kube/config", "kubeconfig", Path("/home/me/.kube/config")),
    ("--source", "prometheus", "source", "prometheus"),
    ("--targets", "targets.yaml", "targets", Path("targets.yaml")),
    ("--prometheus-url", "http://prometheus:9090", "prometheus_url", "http://prometheus:9090"),
    ("--gpu-source", "dcgm", "gpu_source", "dcgm"),
    ("--exporter-port", "9188", "exporter_port", 9188),
    ("--scrape-timeout", "2.5", "scrape_timeout_s", 2.5),
    ("--scrape-concurrency", "16", "scrape_concurrency", 16),
    ("--exporter-ca-file", certifi.where(), "exporter_ca_file", Path(certifi.where())),  # checked: a real bundle
    ("--exporter-scheme", "HTTPS", "exporter_scheme", "https"),
    ("--exporter-server-name", "modelmesh-exporter", "exporter_server_name", "modelmesh-exporter"),
    ("--exporter-client-cert-file", "/tls/client.crt", "exporter_client_cert_file", Path("/tls/client.crt")),
    ("--exporter-client-key-file", "/tls/client.key", "exporter_client_key_file", Path("/tls/client.key")),
    ("--namespaces", "a, b", "namespaces", ("a", "b")),
    ("--refresh-interval", "30", "refresh_interval_s", 30.0),
    ("--window", "60", "window_s", 60.0),
    ("--config", "/etc/policy.yaml", "config", Path("/etc/policy.yaml")),
    ("--skew-order", "3", "skew_order", 3.0),
    ("--scale-down-tau", "120", "scale_down_tau_s", 120.0),
    ("--max-staleness", "90", "max_staleness_s", 90.0),
    ("--min-coverage", "0.75", "min_coverage", 0.75),
    ("--deletion-cost", "off", "deletion_cost", False),
    ("--leader-elect", "false", "leader_elect", False),
    ("--leader-elect-lease-duration", "30", "leader_elect_lease_duration_s", 30.0),
    ("--leader-elect-renew-deadline", "20", "leader_elect_renew_deadline_s", 20.0),
    ("--leader-elect-retry-period", "4", "leader_elect_retry_period_s", 4.0),
    ("--leader-elect-namespace", "ops", "leader_elect_namespace", "ops"),
    ("--tls-service", "metrics-adapter.ops", "tls_service", "metrics-adapter.ops"),
    ("--leader-elect-lease-name", "my-lease", "leader_elect_lease_name", "my-lease"),
    ("--bridge", "off", "bridge", False),
    ("--per-runtime-metrics", "off", "per_runtime_metrics", False),
    ("--prometheus-ca-file", certifi.where(), "prometheus_ca_file", Path(certifi.where())),  # checked: a bundle
    ("--prometheus-token-file", str(TOKEN), "prometheus_token_file", TOKEN),  # checked: readable, not empty
    ("--prometheus-headers", "X-Scope-OrgID=a, X-B=c=d", "prometheus_headers",
     (("X-Scope-OrgID", "a"), ("X-B", "c=d"))),
    ("--prometheus-timeout", "12s", "prometheus_timeout_s", 12.0),
    ("--prometheus-namespace-label", "kubernetes_namespace", "prometheus_namespace_label", "kubernetes_namespace"),
    ("--prometheus-pod-label", "kubernetes_pod_name", "prometheus_pod_label", "kubernetes_pod_name"),
    ("--prometheus-series-selector", '{job="modelmesh-exporter", cluster=~"east|west",}', "prometheus_series_selector",
     ('job="modelmesh-exporter"', 'cluster=~"east|west"')),
    ("--dcgm-pod-label", "exported_pod", "dcgm_pod_label", "exported_pod"),
    ("--dcgm-namespace-label", "exported_namespace", "dcgm_namespace_label", "exported_namespace"),
    ("--workers", "4", "workers", 4),
    ("--refresh-nice", "5", "refresh_nice", 5),
    ("--max-connections", "500", "max_connections", 500),
    ("--header-read-timeout", "5s", "header_read_timeout_s", 5.0),
    ("--keepalive-timeout", "2m", "keepalive_timeout_s", 120.0),
    ("--shutdown-delay", "5s", "shutdown_delay_s", 5.0),
    ("--authentication-token-webhook-cache-ttl", "30s", "token_cache_ttl_s", 30.0),
    ("--authorization-webhook-cache-authorized-ttl", "500ms", "authorized_cache_ttl_s", 0.5),
    ("--authorization-webhook-cache-unauthorized-ttl", "20", "unauthorized_cache_ttl_s", 20.0),
    ("--max-in-flight-reviews", "8", "max_in_flight_reviews", 8),
]
SWITCHES = {"--insecure-dev"}


def env_name(flag: str) -> str:
    return "AUTOSCALER_" + flag.removeprefix("--").replace("-", "_").upper()


def serve_parser() -> argparse.ArgumentParser:
    parser = cli.build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    serve: argparse.ArgumentParser = subparsers.choices["serve"]
    return serve


def settings(argv: list[str], environ: dict[str, str]) -> ServeSettings:
    return settings_from_args(cli.build_parser().parse_args(["serve", *argv]), environ)


def test_every_flag_is_covered_here_and_its_help_names_its_variable() -> None:
    parser = serve_parser()
    flags = {action.option_strings[0] for action in parser._actions} - {"-h"}  # not a switch's off form
    assert flags == {case[0] for case in FLAG_CASES}
    assert set(env_variables()) == {env_name(flag) for flag in flags}
    help_text = "".join(parser.format_help().split())  # unwrapped: argparse breaks variable names too long
    for flag in flags:                                      # for its column (kube's review-cache flags)
        assert f"env{env_name(flag)}" in help_text
    for action in parser._actions:
        if action.option_strings[0] != "-h":
            assert "(default: " in (action.help or ""), action.option_strings


def test_no_flags_and_no_variables_give_the_defaults() -> None:
    assert settings([], environ={}) == ServeSettings()


@pytest.mark.parametrize(("flag", "value", "field", "expected"), FLAG_CASES, ids=[c[0] for c in FLAG_CASES])
def test_each_flag_and_its_variable_set_the_same_field(flag: str, value: str, field: str, expected: Any) -> None:
    from_flag = settings([flag] if flag in SWITCHES else [flag, value], environ={})
    from_env = settings([], environ={env_name(flag): value})
    assert getattr(from_flag, field) == expected
    assert getattr(from_env, field) == expected
    assert getattr(ServeSettings(), field) != expected  # the case changes a default


def test_a_scale_down_tau_of_0_falls_at_once_as_its_policy_key_allows() -> None:
    """`scale_down_tau_s: 0` is a documented policy value (no slow fall); its flag refused 0."""
    assert settings(["--scale-down-tau", "0"], environ={}).scale_down_tau_s == 0.0
    assert settings([], environ={"AUTOSCALER_SCALE_DOWN_TAU": "0"}).scale_down_tau_s == 0.0


def test_a_flag_wins_over_its_variable() -> None:
    environ = {"AUTOSCALER_LISTEN": "127.0.0.1:1111", "AUTOSCALER_REFRESH_INTERVAL": "60",
               "AUTOSCALER_DELETION_COST": "off", "AUTOSCALER_LEADER_ELECT": "true"}
    result = settings(["--listen", "127.0.0.1:2222", "--refresh-interval", "5", "--deletion-cost", "on",
                       "--leader-elect", "false"], environ)
    assert (result.listen_host, result.listen_port) == ("127.0.0.1", 2222)
    assert result.refresh_interval_s == 5.0
    assert result.deletion_cost is True
    assert result.leader_elect is False


def test_variables_and_flags_mix() -> None:
    result = settings(["--source", "prometheus"], {"AUTOSCALER_PROMETHEUS_URL": "https://thanos.example:443"})
    assert result.source == "prometheus"
    assert result.prometheus_url == "https://thanos.example:443"


def test_the_insecure_dev_variable_takes_false_too() -> None:
    assert settings([], {"AUTOSCALER_INSECURE_DEV": "false"}).insecure_dev is False
    assert settings([], {"AUTOSCALER_INSECURE_DEV": "1"}).insecure_dev is True


def test_an_empty_list_variable_means_an_empty_list() -> None:
    assert settings([], {"AUTOSCALER_NAMESPACES": ""}).namespaces == ()


def test_variables_of_other_programs_are_ignored() -> None:
    assert settings([], {"EXPORTER_LISTEN": "nonsense", "AUTOSCALER": "x", "LISTEN": "y"}) == ServeSettings()


BAD_VARIABLES = [
    ("AUTOSCALER_LISTEN", "6443", "HOST:PORT"),
    # "expected HOST:PORT, got ':99999'", which it was: the port was what was wrong.
    ("AUTOSCALER_LISTEN", ":99999", "port must be 0 to 65535"),
    ("AUTOSCALER_REFRESH_INTERVAL", "soon", "number"),
    ("AUTOSCALER_SCRAPE_TIMEOUT", "-1", "must be 0.1 to 3600 seconds"),
    ("AUTOSCALER_MIN_COVERAGE", "1.5", "(0, 1]"),
    ("AUTOSCALER_SKEW_ORDER", "0.5", "at least 1"),
    ("AUTOSCALER_SCRAPE_CONCURRENCY", "0", "at least 1"),
    ("AUTOSCALER_EXPORTER_PORT", "70000", "1..65535"),
    ("AUTOSCALER_SOURCE", "graphite", "scrape, prometheus"),
    ("AUTOSCALER_PROMETHEUS_URL", "prometheus:9090", "http"),
    ("AUTOSCALER_DELETION_COST", "maybe", "on, off"),
    ("AUTOSCALER_INSECURE_DEV", "sometimes", "true or false"),
    ("AUTOSCALER_CONFIG", "", "file path"),
    ("AUTOSCALER_EXPORTER_CA_FILE", "", "expected a file path, got an empty value"),
    ("AUTOSCALER_PROMETHEUS_CA_FILE", " ", "expected a file path, got an empty value"),
    ("AUTOSCALER_LOG_LEVEL", "LOUD", "DEBUG"),
    ("AUTOSCALER_REFRESH_NICE", "20", "0 to 19"),
    # Accepted, 100000 forked serving processes until memory ran out.
    ("AUTOSCALER_WORKERS", "100000", "0 to 64"),
    ("AUTOSCALER_REFRESH_INTERVAL", "1e20", "0.1 to 3600"),
    # Accepted, and waited on for ever (a shutdown delay: served on until the kubelet's SIGKILL).
    ("AUTOSCALER_SCRAPE_TIMEOUT", "1e9", "must be 0.1 to 3600 seconds"),
    ("AUTOSCALER_KEEPALIVE_TIMEOUT", "1e12", "must be 0.1 to 3600 seconds"),
    ("AUTOSCALER_HEADER_READ_TIMEOUT", "2h", "must be 0.1 to 3600 seconds"),
    ("AUTOSCALER_SHUTDOWN_DELAY", "1e12", "must be 0 to 300 seconds"),
    # Accepted: a revoked token or RoleBinding honoured for ever, a dead Prometheus waited on for ever, a window no
    # int64 holds in every answer, a dead exporter's pod counted fresh for ever.
    ("AUTOSCALER_AUTHENTICATION_TOKEN_WEBHOOK_CACHE_TTL", "1e12", "must be 0.1 to 3600 seconds"),
    ("AUTOSCALER_AUTHORIZATION_WEBHOOK_CACHE_AUTHORIZED_TTL", "2h", "must be 0.1 to 3600 seconds"),
    ("AUTOSCALER_AUTHORIZATION_WEBHOOK_CACHE_UNAUTHORIZED_TTL", "1e12", "must be 0.1 to 3600 seconds"),
    ("AUTOSCALER_PROMETHEUS_TIMEOUT", "1e12", "must be 0.1 to 3600 seconds"),
    ("AUTOSCALER_WINDOW", "1e300", "must be 0.1 to 3600 seconds"),
    ("AUTOSCALER_MAX_STALENESS", "1e12", "must be 0.1 to 10800 seconds"),
    ("AUTOSCALER_MAX_STALENESS", "-1", "must be 0.1 to 10800 seconds"),
]


@pytest.mark.parametrize(("variable", "value", "says"), BAD_VARIABLES, ids=[c[0] for c in BAD_VARIABLES])
def test_a_bad_variable_is_a_settings_error_naming_it(variable: str, value: str, says: str) -> None:
    with pytest.raises(SettingsError) as caught:
        settings([], {variable: value})
    assert variable in str(caught.value)
    assert says in str(caught.value)


def test_a_flag_hides_its_bad_variable() -> None:
    assert settings(["--listen", "127.0.0.1:7443"], {"AUTOSCALER_LISTEN": "garbage"}).listen_port == 7443


def test_the_cli_reports_a_bad_variable_in_one_line_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AUTOSCALER_REFRESH_INTERVAL", "fast")
    with pytest.raises(SystemExit) as exited:
        cli.main(["serve", "--insecure-dev"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("modelmesh-autoscaler serve: error: environment variable AUTOSCALER_REFRESH_INTERVAL: ")
    assert "'fast'" in err
    assert "Traceback" not in err


def test_a_bad_flag_is_still_argparse_s_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["serve", "--min-coverage", "2"])
    assert exited.value.code == 2
    assert "argument --min-coverage: must be in (0, 1]" in capsys.readouterr().err


@pytest.mark.parametrize(("command", "required"), [
    ("serve", []), ("demo", []), ("simulate", ["--synthetic", "--out", "report"])])
def test_an_unknown_flag_is_reported_with_its_commands_usage(
        command: str, required: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """`serve --refresh-intervall 5` must show serve's usage, not the top level's `COMMAND ...` one."""
    with pytest.raises(SystemExit) as exited:
        cli.main([command, *required, "--no-such-flag"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"usage: modelmesh-autoscaler {command} " in err
    assert f"modelmesh-autoscaler {command}: error: unrecognized arguments: --no-such-flag" in err


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--skew-order", "0.5", "must be at least 1"),
    ("--refresh-interval", "15 sec", "expected a number of seconds, got '15 sec' (a number of seconds, or one with "
                                     "a unit: 500ms, 30s, 5m, 1h)"),
    ("--window", "80%", "expected a number of seconds, got '80%'"),
    ("--min-coverage", "80%", "expected a ratio, got '80%': write 0.8"),
    # Accepted: 100000 forked serving processes, 20 a second, until memory ran out, and nothing said so.
    ("--workers", "100000", "must be 0 to 64"),
    ("--workers", "65", "must be 0 to 64"),
    # Accepted: a refresh every millisecond (a log line each that blamed CPU starvation), or never.
    ("--refresh-interval", "0.001", "must be 0.1 to 3600 seconds"),
    ("--refresh-interval", "1e-9", "must be 0.1 to 3600 seconds"),
    ("--refresh-interval", "1e20", "must be 0.1 to 3600 seconds"),
    # Accepted, and waited on for ever: `--shutdown-delay 1e12` took the first SIGTERM and served on for minutes,
    # until the kubelet's SIGKILL at terminationGracePeriodSeconds, and nothing said so.
    ("--scrape-timeout", "1e9", "must be 0.1 to 3600 seconds"),
    ("--scrape-timeout", "1ms", "must be 0.1 to 3600 seconds"),
    ("--keepalive-timeout", "1e12", "must be 0.1 to 3600 seconds"),
    ("--header-read-timeout", "1e12", "must be 0.1 to 3600 seconds"),
    ("--shutdown-delay", "1e12", "must be 0 to 300 seconds"),
    ("--shutdown-delay", "301s", "must be 0 to 300 seconds"),
    # Accepted: a revoked token or a removed RoleBinding kept reading metrics until the adapter restarted.
    ("--authentication-token-webhook-cache-ttl", "1e12", "must be 0.1 to 3600 seconds"),
    ("--authorization-webhook-cache-authorized-ttl", "1e12", "must be 0.1 to 3600 seconds"),
    ("--authorization-webhook-cache-unauthorized-ttl", "1e12", "must be 0.1 to 3600 seconds"),
    # Accepted: a Prometheus that stopped answering was waited on for ever, the /healthz stall check put off as long.
    ("--prometheus-timeout", "1e12", "must be 0.1 to 3600 seconds"),
    # Accepted, and served in every item as a `window` of 301 digits, which no int64 holds.
    ("--window", "1e300", "must be 0.1 to 3600 seconds"),
    ("--window", "2h", "must be 0.1 to 3600 seconds"),
    # Accepted: a pod whose exporter died counted fresh, with its last values, for ever.
    ("--max-staleness", "1e12", "must be 0.1 to 10800 seconds"),
    ("--max-staleness", "-5", "must be 0.1 to 10800 seconds"),
    # Accepted, these failed every refresh with Prometheus's 400 "parse error", which names no flag.
    ("--prometheus-namespace-label", "kubernetes-namespace", "expected a Prometheus label name"),
    ("--prometheus-pod-label", "pod name", "expected a Prometheus label name"),
    ("--dcgm-pod-label", "0pod", "expected a Prometheus label name"),
    ("--prometheus-series-selector", "job=modelmesh-exporter", "expected PromQL label matchers, got "
     "'job=modelmesh-exporter': no label matcher at 'job=modelmesh-exporter' (character 1): write label=\"value\""),
    ("--prometheus-series-selector", 'job="a" cluster="b"', "expected PromQL label matchers"),
    ("--prometheus-series-selector", 'job=~"exporter-\\d+"', "expected PromQL label matchers, got "
     "'job=~\"exporter-\\\\d+\"': no label matcher at 'job=~\"exporter-\\\\d+\"' (character 1): write "
     "label=\"value\" (or !=, =~, !~), separated by commas, as job=\"modelmesh-exporter\"; a backslash in a quoted "
     "value is written twice (\\\\d), or write the value in backticks"),
    ("--prometheus-series-selector", 'job=~"exporter-("', "expected PromQL label matchers, got 'job=~\"exporter-(\"': "
     "job=~\"exporter-(\" is not a valid regular expression"),
    # Accepted, Prometheus refuses an escaped quote of the other kind ("unknown escape sequence"): every query failed.
    ("--prometheus-series-selector", r'''job="a\'b"''', "expected PromQL label matchers, got "),
    ("--prometheus-series-selector", "job='a\\\"b'", "expected PromQL label matchers, got "),
    # Accepted, every query went to .../api/v1/api/v1/query: a 404 on every refresh.
    ("--prometheus-url", "http://prometheus:9090/api/v1", "give Prometheus's base URL, without /api/v1: "
                                                           "http://prometheus:9090"),
    # Accepted, the Kubernetes API listed no pods in a namespace that cannot exist: every runtime was a 404
    # "not known to the adapter", with nothing naming the flag.
    ("--namespaces", "modelmesh_serving", "expected namespace names (lower-case letters, digits and '-'"),
    ("--namespaces", "modelmesh-serving,Team-A", "expected namespace names (lower-case letters, digits and '-'"),
    ("--leader-elect-namespace", "Ops", "expected a namespace name (lower-case letters, digits and '-'"),
    # A Service name alone would make certificate names no client in the cluster asks for.
    ("--tls-service", "modelmesh-autoscaler", "expected NAME.NAMESPACE, a Service's name and namespace"),
    ("--tls-service", "adapter.ops.svc", "expected NAME.NAMESPACE, a Service's name and namespace"),
    # Accepted, every attempt to create the Lease was refused (422), so no replica ever led.
    ("--leader-elect-lease-name", "My_Lease", "expected an object name (lower-case letters, digits, '-' and '.'"),
])
def test_a_bad_flag_value_is_one_line_naming_the_flag_and_exit_status_2(
        flag: str, value: str, says: str, tmp_path: Path) -> None:
    """As the user runs it: the 50 lines of usage before the error buried the one line that matters."""
    done = subprocess.run([sys.executable, "-m", "autoscaler.cli", "serve", "--insecure-dev", flag, value],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)})
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"modelmesh-autoscaler serve: error: argument {flag}: {says}")
    assert repr(value) in line


@pytest.mark.parametrize("url", ["https://admin:S3cret@prometheus:9090/api/v1", "htps://admin:S3cret@prometheus:9090",
                                 "https://admin:S3cret@prometheus:90x90", "https://admin:S3cret@[::1/"])
def test_a_mistyped_prometheus_url_is_told_without_its_password(url: str, tmp_path: Path) -> None:
    """configuration.md: the password of a basic-auth URL is never logged, and `AUTOSCALER_PROMETHEUS_URL` from a
    Secret keeps it out of the Deployment. A typo (a trailing /api/v1, a scheme, a port) put it, in clear, in
    the one line `kubectl logs` shows."""
    for args, env in ((["--prometheus-url", url], {}), ([], {"AUTOSCALER_PROMETHEUS_URL": url})):
        done = subprocess.run([sys.executable, "-m", "autoscaler.cli", "serve", "--insecure-dev", "--source",
                               "prometheus", *args], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                              env={**os.environ, **env, "PYTHONPATH": str(Path(__file__).parent.parent)})
        assert done.returncode == 2
        assert "S3cret" not in done.stderr + done.stdout
        assert "admin:***@" in done.stderr


@pytest.mark.parametrize("value", ["Authorization: Bearer S3cret", "X-Scope-OrgID=t,Authorization Bearer S3cret",
                                   "Bad Name=S3cret"])
def test_a_malformed_prometheus_header_is_told_without_its_value(value: str, tmp_path: Path) -> None:
    """A header written as `Name: Value` (a token, from a Secret) was quoted whole in the start-up error."""
    done = subprocess.run([sys.executable, "-m", "autoscaler.cli", "serve", "--insecure-dev", "--source",
                           "prometheus", "--prometheus-url", "http://prometheus:9090"], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, env={**os.environ, "AUTOSCALER_PROMETHEUS_HEADERS": value,
                                                         "PYTHONPATH": str(Path(__file__).parent.parent)})
    assert done.returncode == 2
    assert "S3cret" not in done.stderr + done.stdout
    assert "expected Name=Value pairs separated by commas" in done.stderr


@pytest.mark.parametrize("zero", ["0", "0.0", "00", "0s", "0ms", "0m", "0h", " 0.0s "])
def test_every_spelling_of_a_zero_shutdown_delay_closes_at_once(zero: str) -> None:
    """`0` is documented ("0 closes at once"), yet `0.0` and `0m` were refused with "must be greater than 0"."""
    assert settings(["--shutdown-delay", zero], environ={}).shutdown_delay_s == 0.0
    assert settings([], environ={"AUTOSCALER_SHUTDOWN_DELAY": zero}).shutdown_delay_s == 0.0


@pytest.mark.parametrize("value", ["-1", "-1s", "-0.5m"])
def test_a_negative_shutdown_delay_is_told_0_or_more(value: str, tmp_path: Path) -> None:
    """"must be greater than 0" told the user 0 was refused too, which it is not."""
    variable = "AUTOSCALER_SHUTDOWN_DELAY"
    for args, env, named in (([f"--shutdown-delay={value}"], {}, "argument --shutdown-delay"),
                             ([], {variable: value}, f"environment variable {variable}")):
        done = subprocess.run([sys.executable, "-m", "autoscaler.cli", "serve", "--insecure-dev", *args],
                              capture_output=True, text=True, timeout=60, cwd=tmp_path,
                              env={**os.environ, **env, "PYTHONPATH": str(Path(__file__).parent.parent)})
        assert done.returncode == 2
        [line] = done.stderr.splitlines()
        assert line == f"modelmesh-autoscaler serve: error: {named}: must be 0 or more, got {value!r}", line


def replaced_flag_warnings(argv: list[str], environ: dict[str, str], policy: str, tmp_path: Path,
                           caplog: pytest.LogCaptureFixture) -> list[str]:
    """The warnings `serve` logs at start that the policy file replaces a flag, for these flags and variables."""
    from autoscaler.server import policy_book

    path = tmp_path / "policy.yaml"
    path.write_text(policy)
    with caplog.at_level(logging.WARNING, logger="autoscaler.policies.config"):
        policy_book(settings([*argv, "--config", str(path)], environ))
    return [r.getMessage() for r in caplog.records if "which wins" in r.getMessage()]


def test_the_policy_file_replacing_a_variable_names_the_variable_not_its_flag(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`--skew-order` appeared nowhere in the Deployment's arguments: AUTOSCALER_SKEW_ORDER set the value."""
    [warning] = replaced_flag_warnings([], {"AUTOSCALER_SKEW_ORDER": "3"}, "defaults:\n  skew_order: 2\n",
                                       tmp_path, caplog)
    assert warning.startswith("variable AUTOSCALER_SKEW_ORDER gives skew_order=3, but "), warning
    assert "--skew-order" not in warning and "for the variable to apply" in warning, warning


def test_the_policy_file_replacing_a_flag_still_names_the_flag(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    [warning] = replaced_flag_warnings(["--skew-order", "3"], {"AUTOSCALER_SKEW_ORDER": "4"},
                                       "defaults:\n  skew_order: 2\n", tmp_path, caplog)
    assert warning.startswith("flag --skew-order gives skew_order=3, but "), warning


def test_a_staleness_derived_from_the_refresh_interval_is_not_a_flag_the_file_replaces(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`--refresh-interval 5` with the file's `max_staleness_s: 45`: the file's key is what the user asked for,
    and no `--max-staleness` was given to be replaced."""
    for argv, environ in ((["--refresh-interval", "5"], {}), ([], {"AUTOSCALER_REFRESH_INTERVAL": "5"})):
        assert replaced_flag_warnings(argv, environ, "defaults:\n  max_staleness_s: 45\n", tmp_path, caplog) == []


@pytest.mark.parametrize("matcher", [
    'pod=~"\\\\pL+-\\\\p{Greek}\\\\PN\\\\z"', 'job=~"\\\\Qmodelmesh.exporter\\\\E"', 'job=~"[[:alpha:]-]+"',
])
def test_a_series_selector_regex_of_re2_that_python_lacks_is_taken(matcher: str) -> None:
    """Prometheus's regular expressions are RE2's: Unicode classes (`\\pL`, `\\p{Greek}`), `\\z`, `\\Q...\\E` and
    POSIX classes, which Python's `re` refuses or warns about ("bad escape", a FutureWarning). They were refused
    at start, though Prometheus takes them (promtool agrees)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert settings(["--prometheus-series-selector", matcher], environ={}).prometheus_series_selector == (
            matcher,)
