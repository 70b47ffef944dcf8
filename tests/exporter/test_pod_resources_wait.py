"""How long the exporter waits at start for the kubelet's PodResources socket is a setting: a flag and its
`EXPORTER_*` variable like every other, 30 s by default. It was a constant: a node whose kubelet takes longer
to come back (a slow node, a big restart) could only crash-loop the sidecar, and a test could not show the exit
without waiting 30 s. When the wait runs out the start stops with status 2 and one line that names the socket
and the setting (the container's restart asks the kubelet again)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from exporter.settings import parse_settings
from tests.exporter.test_exporter_process import exporter_command
from tests.support.processes import free_port

NAMESPACE, POD = "modelmesh-serving", "modelmesh-serving-triton-0"


def start_without_kubelet(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The exporter started on a node whose kubelet is away: its socket's directory is mounted, no socket in it
    (the kubelet unlinks it while it restarts), which is worth waiting for."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("EXPORTER_")}
    environ.update(EXPORTER_GPU_POD_RESOURCES_SOCKET=str(tmp_path / "kubelet.sock"),
                   EXPORTER_GPU_POD_NAME=POD, EXPORTER_GPU_POD_NAMESPACE=NAMESPACE, **env)
    return subprocess.run(
        [*exporter_command(), "--listen", f"127.0.0.1:{free_port()}", "--modelmesh-url",
         "http://127.0.0.1:9/metrics", *args], capture_output=True, text=True, timeout=60, env=environ)


@pytest.mark.parametrize("how", ["variable", "flag"])
def test_a_kubelet_that_does_not_come_back_within_the_wait_stops_the_start_in_one_line(
    tmp_path: Path, how: str
) -> None:
    if how == "variable":
        done = start_without_kubelet(tmp_path, EXPORTER_GPU_POD_RESOURCES_WAIT="1")
    else:
        done = start_without_kubelet(tmp_path, "--gpu-pod-resources-wait", "1")

    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1, done.stderr
    [error] = errors
    assert "cannot start" in error
    assert str(tmp_path / "kubelet.sock") in error
    assert "within 1 s" in error
    assert "--gpu-pod-resources-wait (EXPORTER_GPU_POD_RESOURCES_WAIT)" in error
    assert "serving on" not in done.stderr


def test_the_wait_is_30_seconds_unless_set() -> None:
    assert parse_settings([], environ={}).pod_resources_wait_s == 30.0
    assert parse_settings([], environ={"EXPORTER_GPU_POD_RESOURCES_WAIT": "90"}).pod_resources_wait_s == 90.0
    assert parse_settings(["--gpu-pod-resources-wait", "5"],
                          environ={"EXPORTER_GPU_POD_RESOURCES_WAIT": "90"}).pod_resources_wait_s == 5.0


@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan"])
def test_a_wait_that_is_no_number_of_seconds_is_refused_by_its_name(value: str) -> None:
    done = subprocess.run([*exporter_command(), "--gpu-pod-resources-wait", value], capture_output=True,
                          text=True, timeout=30, env={k: v for k, v in os.environ.items()
                                                      if not k.startswith("EXPORTER_")})
    assert done.returncode == 2
    assert "--gpu-pod-resources-wait" in done.stderr


def test_help_names_the_wait_its_variable_and_its_default() -> None:
    done = subprocess.run([*exporter_command(), "--help"], capture_output=True, text=True, timeout=30)
    text = " ".join(done.stdout.split())
    assert "--gpu-pod-resources-wait SECONDS" in text
    assert "(default: 30 s; env EXPORTER_GPU_POD_RESOURCES_WAIT)" in text
