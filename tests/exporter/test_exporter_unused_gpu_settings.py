"""GPU settings that `--no-gpu` makes meaningless are named at start, not dropped in silence.

A sidecar given `EXPORTER_GPU_UUIDS=GPU-...` and `EXPORTER_NO_GPU=true` (the second added later, following the
DCGM advice in the sidecar patch) reported no GPU and said nothing about the UUIDs it was told to report."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.processes import free_port, running


def start_log(tmp_path: Path, env: dict[str, str]) -> str:
    port = free_port()
    log = tmp_path / "exporter.log"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("EXPORTER_")}
    environ.update(EXPORTER_LISTEN=f"127.0.0.1:{port}", EXPORTER_MODELMESH_URL="http://127.0.0.1:1/metrics", **env)
    with running(["exporter.cli"], f"http://127.0.0.1:{port}/healthz", log, env=environ):
        pass
    return log.read_text()


@pytest.mark.parametrize(("env", "says"), [
    ({"EXPORTER_NO_GPU": "true", "EXPORTER_GPU_UUIDS": "GPU-1234"},
     "--gpu-uuids (EXPORTER_GPU_UUIDS) is not used: --no-gpu (EXPORTER_NO_GPU) turns the GPU collector off"),
    ({"EXPORTER_NO_GPU": "true", "EXPORTER_GPU_POD_RESOURCES_SOCKET": "/nonexistent/kubelet.sock",
      "EXPORTER_GPU_POD_NAME": "p", "EXPORTER_GPU_POD_NAMESPACE": "ns"},
     "--gpu-pod-resources-socket (EXPORTER_GPU_POD_RESOURCES_SOCKET) is not used: --no-gpu (EXPORTER_NO_GPU) "
     "turns the GPU collector off"),
    # Without the pod's name and namespace, which the socket alone needs: it stopped the start (exit 2) and a
    # CPU-only pod from a template that sets the socket crash-looped.
    ({"EXPORTER_NO_GPU": "true", "EXPORTER_GPU_POD_RESOURCES_SOCKET": "/var/lib/kubelet/pod-resources/kubelet.sock"},
     "--gpu-pod-resources-socket (EXPORTER_GPU_POD_RESOURCES_SOCKET) is not used: --no-gpu (EXPORTER_NO_GPU) "
     "turns the GPU collector off"),
])
def test_a_gpu_setting_beside_no_gpu_is_named(tmp_path: Path, env: dict[str, str], says: str) -> None:
    log = start_log(tmp_path, env)
    assert says in log, log


def test_no_gpu_alone_says_nothing_of_the_kind(tmp_path: Path) -> None:
    """The shipped patch's empty EXPORTER_GPU_UUIDS with EXPORTER_NO_GPU=true, as the docs advise on CPU runtimes."""
    log = start_log(tmp_path, {"EXPORTER_NO_GPU": "true", "EXPORTER_GPU_UUIDS": ""})
    assert "is not used" not in log, log
