"""A MIG device answers neither NVML utilization query (`nvmlDeviceGetSamples`, then `nvmlDeviceGetUtilizationRates`,
both NOT_SUPPORTED: NVML measures no utilization per MIG device). Both were asked of it at every pass, for good:
two driver calls a second per MIG device that could only fail. It is now asked again once a minute, and what
/metrics shows is the same: its memory series, no busy ratio, the same failure said once.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter import names
from exporter.collectors.gpu import GpuCollector
from exporter.collectors.health import CollectorHealth
from tests.exporter.gpu_rig import Clock
from tests.exporter.test_gpu_collector import gpu_series, health_of, scrape
from tests.fakes.nvml import GIB, FakeNvml

MIG_DEVICES = 2
ASKED_AGAIN_S = 60.0
"""How often a device that answered neither query is asked again (docs/operations.md says a minute)."""
PASS_GAPS_S = st.lists(st.floats(min_value=0.05, max_value=90.0), min_size=1, max_size=150)
"""Seconds between a collector's passes: its loop's 1 s, a stalled loop's minute and more, and anything between."""


def mig_only_node(directory: Path, monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    """One GPU in MIG mode with two MIG devices, in this process's pynvml, its call counters at zero."""
    fake = FakeNvml.create(directory, gpus=1)
    fake.set(sample_period_us=1_000_000, sample_buffer=30)
    fake.set_gpu(0, mig=MIG_DEVICES, mem_used=20 * GIB, mem_total=80 * GIB)
    fake.install(monkeypatch)
    return fake


def utilization_queries(fake: FakeNvml) -> int:
    """nvmlDeviceGetSamples and nvmlDeviceGetUtilizationRates calls made so far."""
    return fake.calls("samples") + fake.calls("utilization")


def run_passes(fake: FakeNvml, gaps_s: Sequence[float]) -> tuple[GpuCollector, CollectorHealth, Clock]:
    """A collector's first pass, then one pass after each gap (the clock moved by it first)."""
    clock = Clock(fake)
    health = CollectorHealth(clock=clock)
    collector = GpuCollector(health, window_s=10.0, clock=clock, monotonic=clock)
    collector.sample_once()
    for gap_s in gaps_s:
        clock.advance(gap_s)
        collector.sample_once()
    return collector, health, clock


@contextmanager
def node_after(gaps_s: Sequence[float], node: Callable[[Path, pytest.MonkeyPatch], FakeNvml] | None = None,
               **gpu_0: int) -> Iterator[FakeNvml]:
    """`node` (default `mig_only_node`) in a directory of its own (a hypothesis example gets no `tmp_path`), GPU 0
    changed by `gpu_0`, after `run_passes` over `gaps_s`; the fake is yielded to count its calls before it is
    removed."""
    with tempfile.TemporaryDirectory() as directory, pytest.MonkeyPatch.context() as monkeypatch:
        fake = (node or mig_only_node)(Path(directory), monkeypatch)
        if gpu_0:
            fake.set_gpu(0, **gpu_0)
        collector, _, _ = run_passes(fake, gaps_s)
        collector.close()
        yield fake


def asked_at_most(gaps_s: Sequence[float]) -> int:
    """How often a refused query may be asked over passes `gaps_s` apart: at the first pass, then once a minute."""
    return 1 + int(sum(gaps_s) // ASKED_AGAIN_S)


def test_mig_devices_answering_no_utilization_query_cost_at_most_one_query_a_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    fake = mig_only_node(tmp_path, monkeypatch)
    with caplog.at_level(logging.WARNING):
        collector, health, _ = run_passes(fake, [1.0] * 180)
    passes = 181
    assert utilization_queries(fake) <= passes * MIG_DEVICES, utilization_queries(fake)
    # What a scrape shows is what it was: memory per MIG device, no busy ratio, the collector failing each pass.
    _, series = scrape(collector, health)
    assert gpu_series(series, names.GPU_MEMORY_TOTAL_BYTES) == {"0/0": 40 * GIB, "0/1": 40 * GIB}
    assert gpu_series(series, names.GPU_BUSY_RATIO) == {}
    assert health_of(series) == (0.0, float(passes))
    failed = [r.getMessage() for r in caplog.records if "gpu collector failed" in r.getMessage()]
    assert len(failed) == 1 and "no busy ratio: MIG devices (GPU 0/0" in failed[0] and "0/1" in failed[0], failed
    collector.close()


@settings(max_examples=25, deadline=None)
@given(gaps_s=PASS_GAPS_S)
def test_a_mig_device_is_asked_for_utilization_twice_a_minute_at_most_whatever_the_passes(
    gaps_s: list[float],
) -> None:
    """Both queries once at the first pass, then both again at the first pass a minute or more later."""
    with node_after(gaps_s) as fake:
        assert utilization_queries(fake) <= 2 * MIG_DEVICES * asked_at_most(gaps_s)
