"""Start-up mistakes of `modelmesh-autoscaler serve`, as a new user makes them: each is one "cannot start: ..."
line naming the fix, exit status 2, no traceback (unless `--log-level DEBUG`), and nothing served or said to be
served first.

Each mistake here is refused by argparse or by `autoscaler.preflight.check_startup`, which `autoscaler.cli` runs
before it imports `autoscaler.server`, whose `serve` is the first code that tells the serving modes apart (the
default: a refresh process and serving workers; `--workers 0`); nothing before it reads `--workers` but
`unused_settings` (for `--refresh-nice` alone). So a case runs in the default mode, as a user starts it. The
first check a new user meets (no Kubernetes connection settings) and the last (the port) run in both modes:
`check_startup` moved behind the modes' split fails one of them.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.hardening.adapter import write_targets
from tests.support.kubectl import write_kubeconfig
from tests.support.processes import free_port

MODES = [pytest.param([], id="workers-default"), pytest.param(["--workers", "0"], id="workers-0")]
POLICY_FILES = {
    "missing": None,
    "not-yaml": "defaults: [skew_order: 2\n",
    "unknown-key": "defaults:\n  skew_ordre: 2\n",
    "wrong-type": "defaults:\n  target_gpu_busy: high\n",
}


def serve(tmp_path: Path, args: Sequence[str], python: Sequence[str] = (sys.executable,),
          kubeconfig_variable: str | None = None) -> subprocess.CompletedProcess[str]:
    """`serve` on a machine with no Kubernetes at all: no cluster, no `~/.kube/config`, no `$KUBECONFIG` (unless
    `kubeconfig_variable` is given)."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env["HOME"] = str(tmp_path)
    if kubeconfig_variable is not None:
        env["KUBECONFIG"] = kubeconfig_variable
    listen = [] if "--listen" in args else ["--listen", f"127.0.0.1:{free_port()}"]  # given twice: a warning
    return subprocess.run(
        [*python, "-m", "autoscaler.cli", "serve", *listen, *args],
        capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)


REFUSED_AFTER_THE_WARNINGS = ["--insecure-dev", "--tls-cert-file", "tls.crt", "--workers", "0"]
"""A start refused by its first check, after the variables' warnings are logged: the tests of those warnings
need no more of a start (a Kubernetes connection's settings, loaded with their library, cost 0.5 CPU-s)."""


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The only line the process wrote, after checking it stopped the way a start-up mistake must."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr and "serving" not in result.stderr, result.stderr
    assert result.stdout == ""
    return lines[0]


def targets(tmp_path: Path) -> str:
    return str(write_targets(tmp_path / "targets.yaml", ["http://127.0.0.1:1/metrics"]))


@pytest.mark.parametrize("mode", MODES)
def test_serve_with_no_kubeconfig_names_kubeconfig_and_the_local_demo(tmp_path: Path, mode: list[str]) -> None:
    line = one_line(serve(tmp_path, mode))
    assert "cannot start: no Kubernetes connection settings" in line
    assert f"Config not found: {tmp_path}/.kube/config" in line
    assert "pass --kubeconfig FILE or run in a cluster" in line and "--insecure-dev --targets FILE" in line


def test_serve_with_targets_but_no_kubeconfig_says_authentication_needs_kubernetes(
        tmp_path: Path) -> None:
    line = one_line(serve(tmp_path, ["--targets", targets(tmp_path)]))
    assert "cannot start:" in line
    assert "authentication and authorization need the Kubernetes API" in line and "--insecure-dev" in line


def test_insecure_dev_without_targets_still_needs_kubernetes_and_says_so(tmp_path: Path) -> None:
    line = one_line(serve(tmp_path, ["--insecure-dev"]))
    assert "cannot start:" in line
    assert "--insecure-dev still discovers runtime pods in Kubernetes" in line and "--targets FILE" in line


def test_a_kubeconfig_that_is_not_there_is_named(tmp_path: Path) -> None:
    line = one_line(serve(tmp_path, ["--kubeconfig", str(tmp_path / "nowhere.yaml")]))
    assert "cannot start:" in line and str(tmp_path / "nowhere.yaml") in line
    assert "fix or replace the file given with --kubeconfig" in line


def test_a_broken_kubeconfig_is_named_even_where_only_deletion_costs_would_use_it(
        tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig.yaml"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    line = one_line(serve(tmp_path, ["--insecure-dev", "--targets", targets(tmp_path), "--kubeconfig",
                                     str(kubeconfig)]))
    assert f"cannot start: cannot load Kubernetes connection settings from {kubeconfig}" in line
    assert "fix or replace the file given with --kubeconfig" in line


@pytest.mark.parametrize(("case", "says"), [
    ("missing", "cannot read config file: No such file or directory"),
    ("not-yaml", "not valid YAML"),
    ("unknown-key", "defaults: unknown key 'skew_ordre'"),
    ("wrong-type", "defaults: target_gpu_busy must be a number, got 'high'"),
])
def test_a_policy_file_with_a_mistake_is_one_line_naming_the_file_and_the_fix(
        tmp_path: Path, case: str, says: str) -> None:
    policy = tmp_path / f"{case}.yaml"
    if (content := POLICY_FILES[case]) is not None:
        policy.write_text(content)
    line = one_line(serve(tmp_path, ["--insecure-dev", "--targets", targets(tmp_path), "--config", str(policy)]))
    assert f"cannot start: --config {policy}:" in line and says in line
    assert "fix the file (docs/configuration.md, Policy) or leave --config out" in line


@pytest.mark.parametrize("mode", MODES)
def test_a_port_in_use_is_one_line_before_anything_starts(tmp_path: Path, mode: list[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        line = one_line(serve(tmp_path, ["--insecure-dev", "--targets", targets(tmp_path), *mode,
                                         "--listen", f"127.0.0.1:{port}"]))
    assert f"cannot start: cannot listen on 127.0.0.1:{port}: Address already in use" in line
    assert "choose another port with --listen" in line


def test_the_traceback_is_shown_only_at_debug_level(tmp_path: Path) -> None:
    result = serve(tmp_path, ["--insecure-dev", "--targets", targets(tmp_path), "--config",
                              str(tmp_path / "missing.yaml"), "--log-level", "DEBUG"])
    assert result.returncode == 2
    assert "cannot start: --config" in result.stderr
    assert "Traceback" in result.stderr and "FileNotFoundError" in result.stderr
    assert "serving external.metrics" not in result.stderr


def test_a_scrape_concurrency_of_zero_is_refused_before_anything_starts(tmp_path: Path) -> None:
    result = serve(tmp_path, ["--insecure-dev", "--targets", targets(tmp_path), "--scrape-concurrency", "0"])
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert "--scrape-concurrency" in lines[-1] and "must be at least 1" in lines[-1], result.stderr
    assert "Traceback" not in result.stderr and "serving" not in result.stderr


@pytest.mark.parametrize(("args", "says"), [
    (["--source", "prometheus"], "--source prometheus needs --prometheus-url"),
    (["--gpu-source", "dcgm"], "--gpu-source dcgm reads DCGM_FI_DEV_GPU_UTIL from Prometheus"),
    (["--tls-cert-file", "/tls/tls.crt"], "--tls-cert-file and --tls-private-key-file go together"),
])
def test_contradictory_flags_are_refused_before_anything_is_served(
        tmp_path: Path, args: list[str], says: str) -> None:
    line = one_line(serve(tmp_path, ["--insecure-dev", "--targets", targets(tmp_path), *args]))
    assert f"cannot start: {says}" in line


@pytest.mark.parametrize("paths", ["/healthz,/livez,/read*yz", "/apis/*/v1beta1"])
def test_an_open_path_with_a_star_before_its_end_is_refused_naming_the_flag(
        tmp_path: Path, paths: str) -> None:
    """k8s.io/apiserver refuses it (only a trailing `*` matches a prefix); accepted, it matched nothing, and a
    probe of `/readyz` got 401 with nothing said."""
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", "https://127.0.0.1:1")
    line = one_line(serve(tmp_path, ["--kubeconfig", str(kubeconfig), "--targets", targets(tmp_path),
                                     "--authorization-always-allow-paths", paths]))
    bad = paths.rpartition(",")[2]
    assert (f'cannot start: --authorization-always-allow-paths: only a trailing * is allowed (it matches a '
            f'prefix), not "{bad}"') in line, line


@pytest.mark.parametrize("broken", ["cert-missing", "key-missing", "cert-not-pem", "key-of-another-cert"])
def test_a_tls_certificate_that_cannot_be_loaded_names_its_flag_and_file(
        tmp_path: Path, broken: str) -> None:
    import trustme

    from tests.support.certificates import issue_cert

    ca = trustme.CA()
    leaf, other = issue_cert(ca, "localhost"), issue_cert(ca, "localhost")
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    (other if broken == "key-of-another-cert" else leaf).private_key_pem.write_to_path(str(key))
    if broken == "cert-missing":
        cert = tmp_path / "nowhere.crt"
    elif broken == "key-missing":
        key = tmp_path / "nowhere.key"
    elif broken == "cert-not-pem":
        cert.write_text("not a certificate\n")
    line = one_line(serve(tmp_path, ["--insecure-dev", "--targets", targets(tmp_path), "--tls-cert-file", str(cert),
                                     "--tls-private-key-file", str(key)]))
    assert "cannot start: " in line
    if broken == "cert-missing":
        assert f"--tls-cert-file {cert}: cannot read it: No such file or directory" in line
    elif broken == "key-missing":
        assert f"--tls-private-key-file {key}: cannot read it: No such file or directory" in line
    else:
        assert f"--tls-cert-file {cert} and --tls-private-key-file {key}" in line
        assert "a PEM certificate and its private key" in line


@pytest.mark.parametrize("flag", ["--config", "--targets"])
def test_a_file_that_is_not_text_is_named(tmp_path: Path, flag: str) -> None:
    """A binary file given by mistake (a .gz, a certificate in DER) is one line naming it, as any other mistake in
    it, not Python's bare UnicodeDecodeError."""
    binary = tmp_path / "policy.yaml.gz"
    binary.write_bytes(b"\x1f\x8b\x08\x00\xff\xfe")
    args = {"--config": ["--targets", targets(tmp_path), "--config", str(binary)],
            "--targets": ["--targets", str(binary)]}
    line = one_line(serve(tmp_path, ["--insecure-dev", "--workers", "0", *args[flag]]))
    assert str(binary) in line and "not UTF-8 text" in line, line


@pytest.mark.parametrize(("variables", "misspelt", "meant"), [
    # `AUTOSCALER_REFRESH_INTERVALL` was ignored without a word: the adapter ran on the default interval.
    ({"AUTOSCALER_REFRESH_INTERVALL": "5", "AUTOSCALER_SERVICE_HOST": "10.0.0.9"},  # a Service `autoscaler`'s
     "AUTOSCALER_REFRESH_INTERVALL", "AUTOSCALER_REFRESH_INTERVAL"),
    # `AUTOSCALER_EXPORTR_PORT=9188` was taken for a Service link and ignored: the scraper kept port 9187.
    ({"AUTOSCALER_EXPORTR_PORT": "9188", "AUTOSCALER_PORT": "tcp://10.0.0.9:443",  # a Service's links: not settings
      "AUTOSCALER_PORT_443_TCP": "tcp://10.0.0.9:443"}, "AUTOSCALER_EXPORTR_PORT", "AUTOSCALER_EXPORTER_PORT"),
], ids=["misspelt", "misspelt-ending-in-port"])
def test_a_misspelt_variable_is_named_with_the_one_meant_but_a_service_link_is_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], misspelt: str, meant: str) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    result = serve(tmp_path, REFUSED_AFTER_THE_WARNINGS)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 2, result.stderr  # the warning, then the refusal
    assert (f"environment variable {misspelt} is not a setting (did you mean {meant}?); ignored") in lines[0], lines[0]


@pytest.mark.parametrize("host", ["203.0.113.5", "no-such-host.invalid"])
def test_a_listen_host_that_is_not_this_machine_is_told_to_change_the_address(tmp_path: Path, host: str) -> None:
    """Not "choose another port": the port was never the problem."""
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", "https://127.0.0.1:1")
    line = one_line(serve(tmp_path, ["--kubeconfig", str(kubeconfig), "--targets", targets(tmp_path), "--workers",
                                     "0", "--listen", f"{host}:6443"]))
    assert f"cannot start: cannot listen on {host}:6443" in line
    assert "give an address of this machine, or no host (:PORT) for all of them, IPv4 and IPv6 with --listen" in line
    assert "port" not in line.split(f"{host}:6443", 1)[1], line


@pytest.mark.parametrize("content", [b"", b"[]\n", b"\x1f\x8b\x08\x00\xff"], ids=["empty", "a-list", "binary"])
def test_a_kubeconfig_that_is_no_kubeconfig_says_so(tmp_path: Path, content: bytes) -> None:
    """Not the library's "'NoneType' object does not support item assignment"."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_bytes(content)
    line = one_line(serve(tmp_path, ["--kubeconfig", str(kubeconfig), "--workers", "0"]))
    assert f"cannot load Kubernetes connection settings from {kubeconfig}: not a kubeconfig" in line, line
    assert "fix or replace the file given with --kubeconfig" in line


@pytest.mark.parametrize("broken", ["missing", "empty"])
def test_a_prometheus_token_file_that_cannot_be_used_is_named_at_start(tmp_path: Path, broken: str) -> None:
    """A wrong --prometheus-token-file path started the adapter, which then failed every refresh with the same
    error while the HPA held; --prometheus-ca-file was already checked at start. An empty file (a Secret key
    that is not set) sends `Authorization: Bearer ` and gets 401s the same way."""
    token = tmp_path / "token"
    if broken == "empty":
        token.write_text("\n")
    result = serve(tmp_path, ["--insecure-dev", "--targets", targets(tmp_path), "--source", "prometheus",
                              "--prometheus-url", "http://127.0.0.1:1", "--prometheus-token-file", str(token)])
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "serving" not in result.stderr, result.stderr
    says = "No such file or directory" if broken == "missing" else "the file is empty"
    assert f"argument --prometheus-token-file: cannot read a token from '{token}': {says}" in result.stderr


@pytest.mark.parametrize(("text", "says"), [
    ("runtimes:\n  - namespace: default\n    deployment: d\n    annotatons: {}\n    pods: []\n",
     "{path}: runtimes[0]: unknown key 'annotatons' (did you mean 'annotations'?)"),
    ("runtimes:\n  - namespace: default\n    namespace: x\n    deployment: d\n    pods: []\n",
     "{path}:3:5: not valid YAML: found duplicate key 'namespace' (first at line 2)"),
], ids=["misspelt-key", "duplicate-key"])
def test_a_targets_file_mistake_is_one_line_naming_the_file_where_and_what(
        tmp_path: Path, text: str, says: str) -> None:
    """A misspelt key was ignored without a word, and a YAML mistake ran over several lines naming
    "<unicode string>"."""
    path = tmp_path / "bad-targets.yaml"
    path.write_text(text)
    line = one_line(serve(tmp_path, ["--insecure-dev", "--workers", "0", "--targets", str(path)]))
    assert f"cannot start: --targets: {says.format(path=path)}" in line, line


def test_a_variable_close_to_no_setting_gets_no_hint_naming_an_unrelated_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`AUTOSCALER_PORT=443` (a port meant for --listen) was told "did you mean AUTOSCALER_SOURCE?": the shared
    `AUTOSCALER_` made the two look alike."""
    monkeypatch.setenv("AUTOSCALER_PORT", "443")
    result = serve(tmp_path, REFUSED_AFTER_THE_WARNINGS)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert "environment variable AUTOSCALER_PORT is not a setting; ignored" in lines[0], lines[0]


@pytest.mark.parametrize("mistake", ["policy-file", "tls-file", "open-path"])
def test_a_mistake_in_a_flag_or_a_file_is_refused_before_the_serving_libraries_load(
        tmp_path: Path, mistake: str) -> None:
    """A mistyped flag or file was refused only after `serve` had imported aiohttp, cryptography and the server's
    modules (0.45 of the 0.7 CPU-seconds such a refusal took on a small machine), and built the simulator's
    flags: later than it had to, for the user and for every CI run of these tests. `-X importtime` lists every
    module the process loaded."""
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", "https://127.0.0.1:1")
    policy = tmp_path / "policy.yaml"
    policy.write_text("defaults:\n  skew_ordre: 2\n")
    (cert := tmp_path / "tls.crt").write_text("not a certificate\n")
    (key := tmp_path / "tls.key").write_text("not a key\n")
    args = {"policy-file": ["--insecure-dev", "--targets", targets(tmp_path), "--config", str(policy)],
            "tls-file": ["--insecure-dev", "--targets", targets(tmp_path), "--tls-cert-file", str(cert),
                         "--tls-private-key-file", str(key)],
            "open-path": ["--kubeconfig", str(kubeconfig), "--authorization-always-allow-paths", "/a*/b"]}
    result = serve(tmp_path, args[mistake], python=[sys.executable, "-X", "importtime"])
    refusals = [line for line in result.stderr.splitlines() if "cannot start: " in line]
    assert result.returncode == 2 and len(refusals) == 1, result.stderr
    loaded = {line.rpartition("|")[2].strip() for line in result.stderr.splitlines()
              if line.startswith("import time:")}
    assert "autoscaler.preflight" in loaded, result.stderr  # what the refusal needed was listed
    assert not (heavy := loaded & {"aiohttp", "kubernetes", "cryptography", "autoscaler.server"}), heavy
    # Nor the other commands' flags, nor the version `--version` prints, nor the decision's arithmetic (for the
    # limit of min/max_replicas alone): 90 ms of every start, refused or not.
    assert not (unused := loaded & {"autoscaler.simulation", "autoscaler.demo", "exporter.build_info",
                                    "autoscaler.policies.recommendation"}), unused


@pytest.mark.parametrize(("given", "refusal"), [
    ("nothing", "no Kubernetes connection settings (Config not found: {home}/.kube/config); pod discovery, "
     "authentication and authorization need the Kubernetes API: pass --kubeconfig FILE or run in a cluster (a "
     "local demo without Kubernetes: --insecure-dev --targets FILE)"),
    ("--kubeconfig", "no Kubernetes connection settings (Config not found: {home}/nowhere.yaml); fix or replace "
     "the file given with --kubeconfig"),
    ("KUBECONFIG", "no Kubernetes connection settings (Config not found: {home}/a.yaml:{home}/b.yaml); "
     "--insecure-dev still discovers runtime pods in Kubernetes: pass --kubeconfig FILE, or list the runtimes and "
     "their exporter URLs with --targets FILE"),
])
def test_no_kubeconfig_file_is_refused_in_the_same_words_before_the_kubernetes_library_loads(
        tmp_path: Path, given: str, refusal: str) -> None:
    """The commonest first mistake (no kubeconfig where one was looked for) was refused only after `serve` had
    imported the Kubernetes library (0.35 of the 0.5 CPU-seconds of the refusal), which then found no file. The
    refusal, word for word as the library's loading phrased it, comes before; a kubeconfig that is there but
    broken is still the library's to judge (the tests above)."""
    args = {"nothing": [], "--kubeconfig": ["--kubeconfig", str(tmp_path / "nowhere.yaml")],
            "KUBECONFIG": ["--insecure-dev"]}[given]
    variable = f"{tmp_path}/a.yaml:{tmp_path}/b.yaml" if given == "KUBECONFIG" else None
    result = serve(tmp_path, args, python=[sys.executable, "-X", "importtime"], kubeconfig_variable=variable)
    assert result.returncode == 2, result.stderr
    refusals = [line.partition("ERROR autoscaler: ")[2] for line in result.stderr.splitlines()
                if "cannot start: " in line]
    assert refusals == ["cannot start: " + refusal.format(home=tmp_path)], result.stderr
    loaded = {line.rpartition("|")[2].strip() for line in result.stderr.splitlines()
              if line.startswith("import time:")}
    assert "autoscaler.preflight" in loaded, result.stderr
    assert "kubernetes" not in loaded
