"""What the adapter reads from an exporter whose GPU collector fails on one of the pod's GPUs.

The exporter drops the failing GPU's series, keeps the others and says its GPU collector failed
(`modelmesh_exporter_collector_success{collector="gpu"} 0`). The adapter averaged the GPUs left, with the
collector's success time of the pass before, still fresh: a pod whose 90%-busy GPU fell off the bus read as 5%
busy for up to `max_staleness_s`, lowering the runtime's GPU busy and the pod's need. Missing data never
lowers a value: while the exporter says its GPU collector fails, the pod's GPU signal is missing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscaler.sources.exposition import read_exporter_text
from exporter.collectors.gpu import GpuCollector
from exporter.collectors.health import CollectorHealth
from tests.exporter.test_gpu_collector import Clock, scrape
from tests.fakes.nvml import GPU_IS_LOST, FakeNvml


def test_a_pod_whose_gpu_collector_fails_on_one_gpu_reads_as_missing_gpu_not_the_others_mean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeNvml.create(tmp_path, gpus=2)
    fake.set(sample_period_us=1_000_000, sample_buffer=30)
    fake.install(monkeypatch)
    clock = Clock(fake)
    health = CollectorHealth(clock=clock)
    collector = GpuCollector(health, window_s=10.0, clock=clock)
    try:
        fake.set_gpu(0, util=5)
        fake.set_gpu(1, util=90)
        for _ in range(3):
            clock.advance(1)
            collector.sample_once()
        text, _ = scrape(collector, health)
        before = read_exporter_text(text, "pod-a", True, clock.now).sample
        assert before.gpu_busy == pytest.approx(0.475)  # (0.05 + 0.90) / 2

        fake.set_gpu(1, error=GPU_IS_LOST)
        clock.advance(1)
        collector.sample_once()
        text, _ = scrape(collector, health)
        after = read_exporter_text(text, "pod-a", True, clock.now).sample
        assert (after.gpu_busy, after.gpu_sampled_at) == (None, None)  # read 0.05, sampled 1 s before
    finally:
        collector.close()
