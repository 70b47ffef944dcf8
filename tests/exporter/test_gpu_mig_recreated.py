"""A MIG device destroyed and created again at the same slot (`nvidia-smi mig -dgi`, then `-cgi`; the GPU operator's
mig-manager applying a profile again) has a new UUID. Its slot answers through the handle enumerated before, so no
read fails: only the MIG re-listing (every `MIG_RECHECK_S`) tells it from the device it replaced. Until then its
memory series carry the old UUID (up to `MIG_RECHECK_S`, the collector's own window; the adapter reads no MIG
device's series); from then on, the new one alone.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from exporter import names
from exporter.collectors.gpu import GpuCollector
from exporter.gpu_mig_watch import MIG_RECHECK_S
from tests.exporter import gpu_rig
from tests.exporter.gpu_rig import Clock
from tests.exporter.test_gpu_collector import scrape
from tests.fakes.nvml import GIB, FakeNvml

clock, health, collector = gpu_rig.clock, gpu_rig.health, gpu_rig.collector  # the rig's fixtures, found by name


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    """GPU 0 whole and 40% busy; GPU 1 in MIG mode with one MIG device, 1/0."""
    fake = FakeNvml.create(tmp_path, gpus=2)
    fake.set(sample_period_us=1_000_000, sample_buffer=30)
    fake.set_gpu(0, util=40)
    fake.set_gpu(1, mig=1, mem_used=30 * GIB, mem_total=90 * GIB)
    fake.install(monkeypatch)
    return fake


def mig_uuids(collector: GpuCollector) -> set[str]:
    """The `uuid` labels of MIG device 1/0's memory series on a scrape."""
    _, series = scrape(collector)
    return {dict(labels)["uuid"] for (name, labels) in series
            if name == names.GPU_MEMORY_TOTAL_BYTES and dict(labels)["gpu"] == "1/0"}


def test_a_mig_device_created_again_at_its_slot_is_served_under_its_new_uuid_within_the_recheck(
    fake: FakeNvml, clock: Clock, collector: GpuCollector, caplog: pytest.LogCaptureFixture,
) -> None:
    collector.sample_once()
    old = mig_uuids(collector)
    assert len(old) == 1

    fake.set_gpu(1, mig_generation=1)  # destroyed and created again: the same slot, a new UUID
    with caplog.at_level(logging.INFO, logger="exporter"):
        for _ in range(int(MIG_RECHECK_S)):
            clock.advance(1.0)
            collector.sample_once()
    new = mig_uuids(collector)
    assert len(new) == 1 and not new & old, (old, new)
    said = [r.getMessage() for r in caplog.records]
    assert any("MIG devices changed" in line and f"destroyed GPU 1/0 {old.pop()}" in line for line in said), said
