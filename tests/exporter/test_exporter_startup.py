"""The exporter process at start: a busy port is one line and nothing else (no "serving" before the port is
bound, no collection, no traceback unless at DEBUG), and `--no-gpu` publishes no GPU collector at all."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from exporter import names
from tests.exporter.test_exporter_process import exporter_command
from tests.support.processes import free_port, http_get, running


def start_on_busy_port(*args: str, variables: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORTER_")} | (variables or {})
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        # each flag once: a flag given twice with different values is warned about (a line more)
        modelmesh_url = [] if "--modelmesh-url" in args else ["--modelmesh-url", "http://127.0.0.1:1/metrics"]
        return subprocess.run(
            [*exporter_command(), "--listen", f"127.0.0.1:{port}", "--no-gpu", *modelmesh_url, *args],
            capture_output=True, text=True, timeout=30, env=env)


def test_a_busy_port_is_one_line_and_no_serving_line() -> None:
    result = start_on_busy_port()
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr  # nothing collected, nothing said to be served
    assert "cannot start: cannot listen on 127.0.0.1:" in lines[0]
    assert "Address already in use" in lines[0] and "--listen" in lines[0]
    assert "serving" not in result.stderr and "Traceback" not in result.stderr


def test_a_misspelt_variable_is_named_with_the_one_meant() -> None:
    """A typo in the pod spec was ignored without a word (and showed later as the `tls` failures the setting was
    to prevent). The variables the kubelet makes for a Service named `exporter` share the prefix: not ours."""
    result = start_on_busy_port(variables={
        "EXPORTER_MODELMESH_INSECRUE": "true", "EXPORTER_SERVICE_HOST": "10.0.0.7",
        "EXPORTER_PORT": "tcp://10.0.0.7:9187", "EXPORTER_PORT_9187_TCP_ADDR": "10.0.0.7",
        "EXPORTER_SERVICE_PORT_METRICS": "9187"})
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 2, result.stderr  # the warning, then the busy port
    assert ("WARNING exporter: environment variable EXPORTER_MODELMESH_INSECRUE is not a setting (did you mean "
            "EXPORTER_MODELMESH_INSECURE?); ignored") in lines[0], lines[0]


def test_the_traceback_of_a_busy_port_only_at_debug_level() -> None:
    result = start_on_busy_port("--log-level", "DEBUG")
    assert result.returncode == 2
    assert "cannot start: cannot listen on 127.0.0.1:" in result.stderr
    assert "Traceback" in result.stderr
    assert "serving on" not in result.stderr


def test_serving_is_said_once_bound_with_the_port_it_got(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "exporter.log"
    with running(["exporter.cli", "--listen", f"127.0.0.1:{port}", "--no-gpu",
                  "--modelmesh-url", "http://127.0.0.1:1/metrics"], f"http://127.0.0.1:{port}/healthz", log):
        pass
    said = log.read_text()
    assert f"serving on 127.0.0.1:{port};" in said
    # An http:// ModelMesh involves no certificate: the line said "trusting the system CAs", sending an
    # operator after a CA that plays no part.
    assert "(plain HTTP;" in said and "system CAs" not in said


def test_no_gpu_publishes_no_gpu_collector_and_passes_promtool(tmp_path: Path) -> None:
    port = free_port()
    with running(["exporter.cli", "--listen", f"127.0.0.1:{port}", "--no-gpu",
                  "--modelmesh-url", "http://127.0.0.1:1/metrics"],
                 f"http://127.0.0.1:{port}/healthz", tmp_path / "exporter.log"):
        status, body = http_get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200
    assert 'collector="gpu"' not in body, body
    assert names.GPU_BUSY_RATIO not in body
    assert f'{names.COLLECTOR_SUCCESS}{{collector="modelmesh"}} 0.0' in body  # the other collector still reports
    check = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stderr


@pytest.mark.parametrize(("host", "says"), [("203.0.113.5", "Cannot assign requested address"),
                                            ("no-such-host.invalid", "")])
def test_a_listen_host_that_is_not_this_machine_is_named_with_its_fix(host: str, says: str) -> None:
    """Not "choose a free port": the port was never the problem."""
    result = subprocess.run([*exporter_command(), "--listen", f"{host}:{free_port()}", "--no-gpu"],
                            capture_output=True, text=True, timeout=60)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert f"cannot start: cannot listen on {host}:" in lines[0] and says in lines[0]
    assert ("give an address of this machine, or no host (:PORT) for all of them, IPv4 and IPv6 with --listen"
            in lines[0])
    assert "free port" not in lines[0]


def test_a_misspelt_variable_ending_in_port_is_named_but_a_service_link_is_not() -> None:
    """`EXPORTER_LISTEN_PORT=43013` was taken for the kubelet's link of a Service named `exporter-listen` and
    ignored without a word: the exporter kept port 9187. The kubelet's `<NAME>_PORT` always holds a URL."""
    result = start_on_busy_port(variables={
        "EXPORTER_LISTEN_PORT": "43013", "EXPORTER_METRICS_PORT": "tcp://10.0.0.8:9187",
        "EXPORTER_PORT": "tcp://10.0.0.7:9187", "EXPORTER_PORT_9187_TCP": "tcp://10.0.0.7:9187",
        "EXPORTER_PORT_9187_TCP_PORT": "9187", "EXPORTER_SERVICE_PORT": "9187"})
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 2, result.stderr  # the warning, then the busy port
    assert ("WARNING exporter: environment variable EXPORTER_LISTEN_PORT is not a setting (did you mean "
            "EXPORTER_LISTEN?); ignored") in lines[0], lines[0]


@pytest.mark.parametrize(("args", "variables", "named"), [
    ([], {"EXPORTER_GPU_POD_RESOURCES_SOCKET": ""}, "environment variable EXPORTER_GPU_POD_RESOURCES_SOCKET"),
    ([], {"EXPORTER_MODELMESH_CA_FILE": " "}, "environment variable EXPORTER_MODELMESH_CA_FILE"),
    (["--gpu-pod-resources-socket", ""], {}, "argument --gpu-pod-resources-socket"),
    (["--modelmesh-ca-file", ""], {}, "argument --modelmesh-ca-file"),
], ids=["socket-variable", "ca-variable", "socket-flag", "ca-flag"])
def test_an_empty_path_is_one_line_saying_so(args: list[str], variables: dict[str, str], named: str) -> None:
    """A templated variable left empty was taken as the path `.`: the socket's error was about two other settings
    (--gpu-pod-name and --gpu-pod-namespace), the CA file's "[Errno 21] Is a directory"."""
    result = start_on_busy_port(*args, variables=variables)
    assert result.returncode == 2, result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.strip()]
    assert line == f"modelmesh-exporter: error: {named}: expected a file path, got an empty value", line


@pytest.mark.parametrize(("args", "variables", "named"), [
    (["--gpu-pod-namespace", "N_bad"], {}, "argument --gpu-pod-namespace"),
    ([], {"EXPORTER_GPU_POD_NAMESPACE": "Team_A"}, "environment variable EXPORTER_GPU_POD_NAMESPACE"),
], ids=["flag", "variable"])
def test_a_pod_namespace_that_no_namespace_can_have_is_refused(args: list[str], variables: dict[str, str],
                                                               named: str) -> None:
    """configuration.md says NAMESPACE values are Kubernetes names; the exporter took `N_bad`, and the kubelet then
    found no such pod, with nothing said about the setting."""
    result = start_on_busy_port(*args, variables=variables)
    assert result.returncode == 2, result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.strip()]
    assert line.startswith(f"modelmesh-exporter: error: {named}: expected a namespace name"), line


@pytest.mark.parametrize(("variables", "older", "newer"), [
    ({"EXPORTER_POD_NAME": "triton-7d9f8-x2x4q", "EXPORTER_GPU_POD_NAME": "triton-7d9f8-zzzzz"},
     "--gpu-pod-name (EXPORTER_GPU_POD_NAME)", "--pod-name (EXPORTER_POD_NAME)"),
    ({"EXPORTER_POD_NAMESPACE": "modelmesh-serving", "EXPORTER_GPU_POD_NAMESPACE": "team-a"},
     "--gpu-pod-namespace (EXPORTER_GPU_POD_NAMESPACE)", "--pod-namespace (EXPORTER_POD_NAMESPACE)"),
], ids=["name", "namespace"])
def test_two_pods_named_by_the_older_and_the_newer_setting_are_one_line_refusing_them(
    variables: dict[str, str], older: str, newer: str,
) -> None:
    """`--gpu-pod-name` and `--gpu-pod-namespace` default to `--pod-name` and `--pod-namespace`: given both, and
    different, the kubelet would be asked about one pod while the adapter is told of another."""
    result = start_on_busy_port(variables=variables)
    assert result.returncode == 2, result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.strip()]
    assert line.startswith("modelmesh-exporter: error: "), line
    assert older in line and newer in line and "leave out" in line, line
    assert all(value in line for value in variables.values()), line


def test_the_same_pod_named_by_both_settings_is_taken() -> None:
    result = start_on_busy_port(variables={"EXPORTER_POD_NAME": "triton-0", "EXPORTER_GPU_POD_NAME": "triton-0",
                                           "EXPORTER_POD_NAMESPACE": "ml", "EXPORTER_GPU_POD_NAMESPACE": "ml"})
    assert "cannot start: cannot listen" in result.stderr and "error:" not in result.stderr, result.stderr
