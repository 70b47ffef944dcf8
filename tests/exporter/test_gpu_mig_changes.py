"""MIG devices created or destroyed while their GPU stays in MIG mode (`nvidia-smi mig -cgi/-cci`, `-dci/-dgi`, or
the GPU operator's mig-manager applying another profile without toggling MIG mode), as /metrics shows them.

The GPUs were enumerated at NVML's initialisation only, and the exporter initialises NVML again only while
something is wrong: a MIG device created beside the ones it samples was never served, and a destroyed one read as a
GPU lost (a failure, a warning, the pod's GPU signal stale) until the next re-initialisation.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from exporter import names
from exporter.collectors.gpu import GpuCollector
from exporter.collectors.health import CollectorHealth
from exporter.gpu_mig_watch import MIG_RECHECK_S
from tests.exporter import gpu_rig
from tests.exporter.gpu_rig import Clock
from tests.exporter.test_gpu_collector import gpu_series, health_of, passes, scrape
from tests.fakes.nvml import GIB, FakeNvml, default_uuid
from tests.support.processes import free_port, http_get, poll, running, wait_until_logged

clock, health, collector = gpu_rig.clock, gpu_rig.health, gpu_rig.collector  # the rig's fixtures, found by name


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    """GPU 0 whole and 40% busy; GPU 1 in MIG mode with 3 slots, MIG device 1/0 alone created yet."""
    fake = FakeNvml.create(tmp_path, gpus=2)
    fake.set(sample_period_us=1_000_000, sample_buffer=30)
    fake.set_gpu(0, util=40)
    fake.set_gpu(1, mig=3, mig_created=1, mem_used=30 * GIB, mem_total=90 * GIB)
    fake.install(monkeypatch)
    return fake


def test_a_mig_device_created_beside_the_sampled_ones_is_served_within_the_recheck_period(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector, caplog: pytest.LogCaptureFixture,
) -> None:
    collector.sample_once()
    assert set(gpu_series(scrape(collector)[1], names.GPU_MEMORY_TOTAL_BYTES)) == {"0", "1/0"}

    fake.set_gpu(1, mig_created=3)  # `nvidia-smi mig -cgi 9,9 -C`: two more MIG devices, MIG mode on throughout
    with caplog.at_level(logging.INFO, logger="exporter"):
        passes(collector, clock, int(MIG_RECHECK_S))
    _, series = scrape(collector, health)
    assert gpu_series(series, names.GPU_MEMORY_TOTAL_BYTES) == {"0": 80 * GIB, "1/0": 30 * GIB, "1/1": 30 * GIB,
                                                                "1/2": 30 * GIB}
    assert gpu_series(series, names.GPU_BUSY_RATIO) == {"0": pytest.approx(0.4)}
    assert health_of(series) == (1.0, 0.0)
    said = [r.getMessage() for r in caplog.records]
    assert any("MIG devices changed" in line and "created GPU 1/1" in line and "1/2" in line for line in said), said
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], said


def test_a_destroyed_mig_device_leaves_at_the_pass_that_meets_it_not_as_a_lost_gpu(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector, caplog: pytest.LogCaptureFixture,
) -> None:
    fake.set_gpu(1, mig_created=3)
    collector.sample_once()
    assert set(gpu_series(scrape(collector)[1], names.GPU_MEMORY_TOTAL_BYTES)) == {"0", "1/0", "1/1", "1/2"}

    fake.set_gpu(1, mig_created=1)  # `nvidia-smi mig -dci -ci 0 -gi 1,2 && nvidia-smi mig -dgi -gi 1,2`
    with caplog.at_level(logging.INFO, logger="exporter"):
        clock.advance(1)
        collector.sample_once()
    _, series = scrape(collector, health)
    assert set(gpu_series(series, names.GPU_MEMORY_TOTAL_BYTES)) == {"0", "1/0"}
    assert gpu_series(series, names.GPU_BUSY_RATIO) == {"0": pytest.approx(0.4)}
    assert health_of(series) == (1.0, 0.0)
    assert series[(names.LAST_SUCCESS_TIMESTAMP, (("collector", names.COLLECTOR_GPU),))] == clock.now
    said = [r.getMessage() for r in caplog.records]
    assert any("MIG devices changed" in line and "destroyed GPU 1/1" in line for line in said), said
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], said


def memory_labels(text: str) -> set[str]:
    return set(re.findall(rf'{names.GPU_MEMORY_TOTAL_BYTES}{{gpu="([^"]+)"', text))


def served_with(url: str, labels: set[str]) -> str | None:
    """The exporter's /metrics once it serves memory series for exactly the GPUs and MIG devices `labels`."""
    text = http_get(url)[1]
    return text if memory_labels(text) == labels else None


def gpu_failures(text: str) -> float:
    found = re.findall(rf'{names.SCRAPE_ERRORS_TOTAL}{{collector="gpu",reason="nvml"}} (\S+)', text)
    return float(found[0]) if found else 0.0


@pytest.mark.slow
def test_the_running_exporter_serves_mig_devices_created_and_destroyed_under_it(tmp_path: Path) -> None:
    """The real exporter process on the fake NVML, as a Prometheus scrape of its /metrics sees it."""
    fake = FakeNvml.create(tmp_path, gpus=2)
    fake.set_gpu(0, util=40)
    fake.set_gpu(1, mig=3, mig_created=1)
    port = free_port()
    log = tmp_path / "exporter.log"
    url = f"http://127.0.0.1:{port}/metrics"
    with running(["exporter.cli", "--listen", f"127.0.0.1:{port}", "--modelmesh-url", "http://127.0.0.1:9/metrics"],
                 f"http://127.0.0.1:{port}/healthz", log, env=fake.env()) as process:
        wait_until_logged(process, log, "NVML initialised")
        poll(lambda: served_with(url, {"0", "1/0"}), timeout=30)

        fake.set_gpu(1, mig_created=2)
        poll(lambda: served_with(url, {"0", "1/0", "1/1"}), timeout=60)

        fake.set_gpu(1, mig_created=1)
        text = poll(lambda: served_with(url, {"0", "1/0"}), timeout=60)
    assert gpu_failures(text) == 0, log.read_text()
    assert f'{names.COLLECTOR_SUCCESS}{{collector="gpu"}} 1.0' in text
    assert "dropped" not in log.read_text()
    assert f"MIG-{default_uuid(1).removeprefix('GPU-')}-1" in log.read_text()
