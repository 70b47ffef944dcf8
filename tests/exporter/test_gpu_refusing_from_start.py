"""A whole GPU that refuses its utilization (Not Supported, NVML code 3) from the exporter's first read of it.

It may be one NVML does not measure, or a busy H100 being reset, or a driver still coming up: taken at once for one
NVML does not measure, GPU 0 at 95% beside GPU 1 at 5% was left out quietly (`collector_success{gpu}` 1, only
`busy{gpu="1"}` 0.05 served, which the adapter averages to 0.05 for a pod at 0.5, and an INFO line saying NVML does
not measure it), at the exporter's start and again after each restart. It is a failure (the pod's GPU signal
missing, its runtime's scale-down held) until it has refused for `UNMEASURED_AFTER_S`; only then is it taken as one
NVML does not measure. An answer ends that for the process: a refusal after one is a failure for as long.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter import names
from exporter.collectors.gpu import GpuCollector
from exporter.collectors.health import CollectorHealth
from exporter.gpu_unmeasured import UNMEASURED_AFTER_S
from tests.exporter import gpu_rig
from tests.exporter.gpu_rig import Clock
from tests.exporter.test_gpu_collector import gpu_series, health_of, passes, scrape
from tests.fakes.nvml import NOT_SUPPORTED, FakeNvml, default_uuid

clock, health, collector = gpu_rig.clock, gpu_rig.health, gpu_rig.collector  # the rig's fixtures, found by name

REFUSING: dict[str, int] = {"samples_error": NOT_SUPPORTED, "util_error": NOT_SUPPORTED}
ANSWERING: dict[str, int] = {"samples_error": 0, "util_error": 0}
PROBATION_SAID = "taken as unmeasured after 5 min if it never answers"


def busy_node(directory: Path, monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    """Two H100s: GPU 0 at 95% refusing both utilization queries, GPU 1 at 5%, sampled once a second."""
    fake = FakeNvml.create(directory, gpus=2)
    fake.set(sample_period_us=1_000_000, sample_buffer=30)
    fake.set_gpu(0, util=95, **REFUSING)
    fake.set_gpu(1, util=5)
    fake.install(monkeypatch)
    return fake


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    return busy_node(tmp_path, monkeypatch)


def warnings_and_info(caplog: pytest.LogCaptureFixture) -> tuple[list[str], list[str]]:
    """(WARNING lines, INFO lines) logged so far."""
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    told = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    return warned, told


def test_a_busy_gpu_refusing_from_the_start_is_a_failure_until_it_has_refused_for_five_minutes(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector, caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="exporter"):
        collector.sample_once()
        passes(collector, clock, 60)
        _, series = scrape(collector, health)
        assert gpu_series(series, names.GPU_BUSY_RATIO) == {"1": 0.05}
        assert health_of(series)[0] == 0.0, "GPU 0 refusing since the start left out quietly"
        warned, told = warnings_and_info(caplog)
        (line,) = warned
        assert f"no utilization for GPU 0 {default_uuid(0)}: " in line and "Not Supported (NVML code 3)" in line, line
        assert PROBATION_SAID in line, line
        assert not [text for text in told if "does not measure" in text], told
        passes(collector, clock, int(UNMEASURED_AFTER_S) - 62)
        assert health_of(scrape(collector, health)[1])[0] == 0.0, "taken as unmeasured before its 5 minutes"
        passes(collector, clock, 2)
    _, series = scrape(collector, health)
    assert health_of(series)[0] == 1.0
    assert gpu_series(series, names.GPU_BUSY_RATIO) == {"1": 0.05}
    warned, told = warnings_and_info(caplog)
    assert len(warned) == 1, warned
    (said,) = [text for text in told if "GPU 0" in text and "busy ratio" in text]
    assert said.startswith(f"GPU 0 {default_uuid(0)} has no busy ratio: NVML has refused its utilization ever since "
                           "its first read, over 5 min ("), said
    assert "Not Supported (NVML code 3)" in said, said
    assert "asked again at every read" in said, said
    assert said.endswith("this pod's busy ratio is read from GPU 1 alone (GPU 0 has its memory alone)"), said


def test_after_a_restart_a_gpu_refusing_again_is_a_failure_again(
    fake: FakeNvml, clock: Clock, health: CollectorHealth,
) -> None:
    """The exporter restarted with GPU 0 refusing again: what the last process learnt is gone, and it was read
    as one NVML does not measure at once. It is on probation again."""
    fake.set_gpu(0, **ANSWERING)
    first = GpuCollector(health, window_s=10.0, clock=clock, monotonic=clock)
    passes(first, clock)
    first.close()
    fake.set_gpu(0, **REFUSING)
    restarted_health = CollectorHealth(clock=clock)
    restarted = GpuCollector(restarted_health, window_s=10.0, clock=clock, monotonic=clock)
    passes(restarted, clock, 30)
    _, series = scrape(restarted, restarted_health)
    restarted.close()
    assert gpu_series(series, names.GPU_BUSY_RATIO) == {"1": 0.05}
    assert health_of(series)[0] == 0.0


def test_an_answer_within_the_probation_ends_it_and_a_later_refusal_is_a_failure(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector,
) -> None:
    """A reset done in 2 minutes: GPU 0's busy is served; refusing again after that, for longer than the probation,
    it stays a failure (it may be as busy as ever)."""
    passes(collector, clock, 120)
    fake.set_gpu(0, **ANSWERING)
    passes(collector, clock, 12)
    _, series = scrape(collector, health)
    assert gpu_series(series, names.GPU_BUSY_RATIO) == {"0": 0.95, "1": 0.05}
    assert health_of(series)[0] == 1.0
    fake.set_gpu(0, **REFUSING)
    passes(collector, clock, int(UNMEASURED_AFTER_S) + 60)
    _, series = scrape(collector, health)
    assert gpu_series(series, names.GPU_BUSY_RATIO) == {"1": 0.05}
    assert health_of(series)[0] == 0.0


ReadsOfGpu0 = Sequence[tuple[float, bool]]
READS = st.lists(st.tuples(st.sampled_from([1.0, 7.0, 45.0, 140.0, 299.0, 301.0]), st.booleans()),
                 min_size=1, max_size=30)
"""Passes: seconds since the one before, and whether GPU 0 answers its utilization at it (else Not Supported)."""


@settings(max_examples=40, deadline=None)
@given(reads=READS)
def test_a_gpu_refusing_is_left_out_with_success_only_after_refusing_for_five_minutes_and_never_answering(
    reads: ReadsOfGpu0,
) -> None:
    """Whatever GPU 0 does, the collector succeeds with GPU 0's busy left out only when GPU 0 has never answered
    and its first refusal is at least `UNMEASURED_AFTER_S` old; and it succeeds whenever both GPUs answer."""
    with tempfile.TemporaryDirectory() as directory, pytest.MonkeyPatch.context() as monkeypatch:
        fake = busy_node(Path(directory), monkeypatch)
        clock = Clock(fake)
        health = CollectorHealth(clock=clock)
        collector = GpuCollector(health, window_s=10.0, clock=clock, monotonic=clock)
        answered, first_refusal = False, None
        try:
            for seconds, answers in reads:
                clock.advance(seconds)
                fake.set_gpu(0, **(ANSWERING if answers else REFUSING))
                collector.sample_once()
                _, series = scrape(collector, health)
                success, served = health_of(series)[0], gpu_series(series, names.GPU_BUSY_RATIO)
                if answers:
                    answered = True
                    assert (success, set(served)) == (1.0, {"0", "1"}), (success, served)
                    continue
                first_refusal = clock.now if first_refusal is None else first_refusal
                assert set(served) == {"1"}, served
                on_probation = clock.now - first_refusal < UNMEASURED_AFTER_S
                assert success == (0.0 if answered or on_probation else 1.0), (answered, clock.now - first_refusal)
        finally:
            collector.close()
