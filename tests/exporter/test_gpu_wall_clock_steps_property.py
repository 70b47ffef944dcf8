"""Whatever the wall clock does between passes (NTP steps back and forth, a resumed VM), a MIG device created while
its GPU stays in MIG mode is served within `MIG_RECHECK_S` of passes, and a GPU whose refused memory query comes
back within `MEMORY_ASKED_AGAIN_S`: those intervals are timed on the monotonic clock, which no step moves.
`test_gpu_wall_clock_steps` shows the real exporter process under one step back of an hour.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter import names
from exporter.collectors.gpu import GpuCollector
from exporter.collectors.health import CollectorHealth
from exporter.gpu_memory_reads import MEMORY_ASKED_AGAIN_S
from exporter.gpu_mig_watch import MIG_RECHECK_S
from tests.exporter.gpu_rig import Clock
from tests.exporter.test_gpu_collector import gpu_series, scrape
from tests.fakes.nvml import GIB, NOT_SUPPORTED, FakeNvml

PASSES = int(MEMORY_ASKED_AGAIN_S) + 1
"""Passes a second apart, on the monotonic clock, after the GPUs change: the longer interval and the pass due."""
WALL_STEPS_S = st.lists(st.one_of(st.just(0.0), st.floats(min_value=-3600.0, max_value=3600.0)),
                        min_size=PASSES, max_size=PASSES)
"""How far the wall clock steps before each pass, besides the second it moves: none, or up to an hour either way."""


@settings(max_examples=15, deadline=None)
@given(steps_s=WALL_STEPS_S)
def test_a_new_mig_device_and_memory_given_back_are_read_in_time_whatever_the_wall_clock_does(
    steps_s: list[float],
) -> None:
    with tempfile.TemporaryDirectory() as directory, pytest.MonkeyPatch.context() as monkeypatch:
        fake = FakeNvml.create(Path(directory), gpus=2)
        fake.set(sample_period_us=1_000_000, sample_buffer=30)
        fake.set_gpu(0, util=40, memory_error=NOT_SUPPORTED, mem_used=20 * GIB)
        fake.set_gpu(1, mig=3, mig_created=1)
        fake.install(monkeypatch)
        wall, monotonic = Clock(fake), Clock(None, start=0.0)
        health = CollectorHealth(clock=wall)
        collector = GpuCollector(health, window_s=10.0, clock=wall, monotonic=monotonic)
        try:
            collector.sample_once()
            fake.set_gpu(0, memory_error=0)  # a driver upgrade that reports it after all
            fake.set_gpu(1, mig_created=2)  # `nvidia-smi mig -cgi 9 -C`, MIG mode on throughout
            for done, step_s in enumerate(steps_s, start=1):
                wall.advance(1.0 + step_s)
                monotonic.advance(1.0)
                collector.sample_once()
                if done == int(MIG_RECHECK_S):
                    memory = gpu_series(scrape(collector)[1], names.GPU_MEMORY_TOTAL_BYTES)
                    assert "1/1" in memory, memory
            memory = gpu_series(scrape(collector)[1], names.GPU_MEMORY_USED_BYTES)
            assert memory.get("0") == 20 * GIB, memory
        finally:
            collector.close()
