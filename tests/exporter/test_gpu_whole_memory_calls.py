"""A unified-memory GPU (Grace Hopper, GB10) answers NOT_SUPPORTED to `nvmlDeviceGetMemoryInfo` for good. Its memory
was asked at every pass all the same, a driver call a second that could only fail, while a MIG device's refusal was
remembered and asked again once a minute. A whole GPU's memory refusal now stands a minute too; its utilization is
still asked at every pass (its busy ratio is wanted the pass it answers), and what /metrics shows is the same.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import given, settings

from exporter import names
from tests.exporter.test_gpu_collector import gpu_series, health_of, scrape
from tests.exporter.test_gpu_mig_utilization_calls import (
    ASKED_AGAIN_S,
    PASS_GAPS_S,
    asked_at_most,
    node_after,
    run_passes,
)
from tests.fakes.nvml import GIB, NO_PERMISSION, NOT_SUPPORTED, FakeNvml


def unified_memory_node(directory: Path, monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    """One whole GPU whose memory query NVML does not support, in this process's pynvml, its counters at zero."""
    fake = FakeNvml.create(directory, gpus=1)
    fake.set(sample_period_us=1_000_000, sample_buffer=30)
    fake.set_gpu(0, util=70, memory_error=NOT_SUPPORTED, mem_used=20 * GIB, mem_total=80 * GIB)
    fake.install(monkeypatch)
    return fake


def test_a_whole_gpu_without_memory_info_is_asked_it_once_a_minute_and_its_busy_ratio_every_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    fake = unified_memory_node(tmp_path, monkeypatch)
    with caplog.at_level(logging.INFO):
        collector, health, clock = run_passes(fake, [1.0] * 180)
    passes = 181
    assert fake.calls("memory") <= 1 + 180 // ASKED_AGAIN_S, fake.calls("memory")
    assert fake.calls("samples") >= passes  # utilization stays asked at every pass
    _, series = scrape(collector, health)
    assert gpu_series(series, names.GPU_BUSY_RATIO) == {"0": pytest.approx(0.7)}
    assert gpu_series(series, names.GPU_MEMORY_TOTAL_BYTES) == {}
    assert health_of(series) == (1.0, 0.0)  # no failure: the busy ratio is there
    said = [r.getMessage() for r in caplog.records if "reports no memory use" in r.getMessage()]
    assert len(said) == 1 and "Not Supported" in said[0], said

    fake.set_gpu(0, memory_error=0, util=30)  # a driver that reports it after all
    clock.advance(1.0)
    collector.sample_once()
    _, series = scrape(collector, health)
    assert gpu_series(series, names.GPU_BUSY_RATIO) != {"0": pytest.approx(0.7)}  # read the pass it changed
    for _ in range(int(ASKED_AGAIN_S)):
        clock.advance(1.0)
        collector.sample_once()
    _, series = scrape(collector, health)
    assert gpu_series(series, names.GPU_MEMORY_TOTAL_BYTES) == {"0": 80 * GIB}
    assert gpu_series(series, names.GPU_MEMORY_USED_BYTES) == {"0": 20 * GIB}
    collector.close()


def test_a_whole_gpu_refused_its_memory_for_now_is_read_again_the_pass_it_is_permitted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NO_PERMISSION on a whole GPU is this container's standing, which changes; not a query the GPU lacks."""
    fake = unified_memory_node(tmp_path, monkeypatch)
    fake.set_gpu(0, memory_error=NO_PERMISSION)
    collector, health, clock = run_passes(fake, [1.0] * 5)
    fake.set_gpu(0, memory_error=0)
    clock.advance(1.0)
    collector.sample_once()
    _, series = scrape(collector, health)
    assert gpu_series(series, names.GPU_MEMORY_TOTAL_BYTES) == {"0": 80 * GIB}
    collector.close()


def test_a_whole_gpu_refused_its_memory_pass_after_pass_says_so_once_and_fails_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    """Asked at every pass (its permission may change), yet said once: not a log line or a failure a pass."""
    fake = unified_memory_node(tmp_path, monkeypatch)
    fake.set_gpu(0, memory_error=NO_PERMISSION)
    with caplog.at_level(logging.INFO, logger="exporter"):
        collector, health, _ = run_passes(fake, [1.0] * 30)
    _, series = scrape(collector, health)
    assert gpu_series(series, names.GPU_BUSY_RATIO) == {"0": pytest.approx(0.7)}
    assert health_of(series) == (1.0, 0.0)
    said = [r.getMessage() for r in caplog.records]
    assert len([line for line in said if "GPU 0" in line and "memory" in line]) == 1, said
    assert "Insufficient Permissions" in next(line for line in said if "reports no memory use" in line)
    collector.close()


@settings(max_examples=25, deadline=None)
@given(gaps_s=PASS_GAPS_S)
def test_a_whole_gpu_without_memory_info_is_asked_it_once_a_minute_at_most_whatever_the_passes(
    gaps_s: list[float],
) -> None:
    """Asked at the first pass, then again at the first pass a minute or more after the last refusal."""
    with node_after(gaps_s, unified_memory_node) as fake:
        tries = asked_at_most(gaps_s)
        assert fake.calls("memory") <= tries, (fake.calls("memory"), tries)
