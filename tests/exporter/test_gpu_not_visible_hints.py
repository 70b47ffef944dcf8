"""A sidecar that sees no GPU says what to change, in the one log line its outage gets.

The example sidecar runs with the GPU collector on. On a CPU-only runtime, or where the NVIDIA container runtime
did not give the sidecar the driver or the GPUs (it requests none), NVML's own words ("NVML Shared Library Not
Found", or no GPU at all) are all the operator had: the line names the two ways out, `EXPORTER_NO_GPU=true` for
a runtime without GPUs and `NVIDIA_VISIBLE_DEVICES=all` under the NVIDIA container runtime for one with them.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pynvml
import pytest

from exporter.collectors.gpu import GpuCollector
from exporter.collectors.health import CollectorHealth
from tests.fakes.nvml import DRIVER_NOT_LOADED, NO_PERMISSION, FakeNvml, hide_nvml_library

LIB_RM_VERSION_MISMATCH = pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH


def warning_after_one_pass(collector: GpuCollector, caplog: pytest.LogCaptureFixture) -> str:
    with caplog.at_level(logging.WARNING):
        collector.sample_once()
    collector.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    return warnings[0]


def assert_names_both_fixes(message: str) -> None:
    assert "EXPORTER_NO_GPU=true" in message, message
    assert "NVIDIA_VISIBLE_DEVICES=all" in message, message


def test_no_nvml_library_says_how_to_turn_the_collector_off_or_see_the_gpu(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    hide_nvml_library(monkeypatch)
    message = warning_after_one_pass(GpuCollector(CollectorHealth()), caplog)
    assert "Library Not Found" in message  # NVML's own words stay
    assert_names_both_fixes(message)


def test_driver_not_loaded_says_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeNvml.create(tmp_path, gpus=1)
    fake.install(monkeypatch)
    fake.set(init_error=DRIVER_NOT_LOADED)
    assert_names_both_fixes(warning_after_one_pass(GpuCollector(CollectorHealth()), caplog))


def test_no_gpu_visible_says_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeNvml.create(tmp_path, gpus=0)
    fake.install(monkeypatch)
    message = warning_after_one_pass(GpuCollector(CollectorHealth()), caplog)
    assert "NVML sees no GPU" in message
    assert_names_both_fixes(message)


@pytest.mark.parametrize("configured", [False, True], ids=["every-gpu", "gpu-uuids"])
def test_mig_devices_all_of_other_containers_are_said_as_such_not_as_no_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, configured: bool,
) -> None:
    """A GPU in MIG mode whose every MIG device NVML gives this container no permission on (other containers'):
    the line said "NVML sees no GPU" and sent the operator to NVIDIA_VISIBLE_DEVICES, which is right (NVML sees
    the GPU and its MIG devices). It says whose they are, and that MIG pods read GPU busy from DCGM. With the GPU
    named in --gpu-uuids it said "configured GPU ... is not visible", and "this container sees none"."""
    fake = FakeNvml.create(tmp_path, gpus=1)
    fake.install(monkeypatch)
    fake.set_gpu(0, mig=3, mig_handle_error=NO_PERMISSION)
    uuids = [fake.gpus[0].uuid] if configured else None
    message = warning_after_one_pass(GpuCollector(CollectorHealth(), uuids=uuids), caplog)
    assert "NVML sees no GPU" not in message and "NVIDIA_VISIBLE_DEVICES" not in message, message
    assert "not visible" not in message, message
    assert "GPU 0/0, GPU 0/1, GPU 0/2" in message and "other containers" in message, message
    assert "DCGM" in message and "--gpu-source=dcgm" in message and "EXPORTER_NO_GPU=true" in message, message


def test_a_configured_gpu_not_seen_is_said_with_the_gpus_that_are_and_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    """EXPORTER_GPU_UUIDS with a UUID mistyped (or a GPU of another node): the line said only "configured GPU ...
    is not visible"; the operator had to exec into the pod to learn which UUIDs it does see."""
    fake = FakeNvml.create(tmp_path, gpus=2)
    fake.install(monkeypatch)
    message = warning_after_one_pass(GpuCollector(CollectorHealth(), uuids=["GPU-fa4e0000-typo"]), caplog)
    assert "GPU-fa4e0000-typo" in message
    assert all(gpu.uuid in message for gpu in fake.gpus), message
    assert "EXPORTER_GPU_UUIDS" in message and "NVIDIA_VISIBLE_DEVICES=all" in message, message


@pytest.mark.parametrize("when", ["at start", "mid-run"])
def test_a_driver_and_library_of_different_versions_say_what_makes_them_match(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, when: str,
) -> None:
    """NVML_ERROR_LIB_RM_VERSION_MISMATCH: the node's driver was upgraded without a reboot, or reloaded under a
    running container. No retry of this exporter's ever fixes it (its library is what it is), and NVML's words
    ("RM has detected an NVML/RM version mismatch.") name neither cause nor what to do about it."""
    fake = FakeNvml.create(tmp_path, gpus=1)
    fake.install(monkeypatch)
    collector = GpuCollector(CollectorHealth())
    if when == "at start":
        fake.set(init_error=LIB_RM_VERSION_MISMATCH)
    else:
        collector.sample_once()
        fake.set_gpu(0, error=LIB_RM_VERSION_MISMATCH)
    message = warning_after_one_pass(collector, caplog)
    assert "NVML/RM version mismatch" in message  # NVML's own words stay
    assert "reboot the node" in message and "delete this pod" in message, message
