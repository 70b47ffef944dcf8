"""GpuCollector against the fake libnvidia-ml (tests/fakes/fake_nvml.c), loaded by the real pynvml.

The test clock and the fake NVML clock move together (`Clock.advance`), so windows and backoff are exact
and no test sleeps, except the one that runs the real background loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import os
import signal
import subprocess
import time
from pathlib import Path

import pynvml
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from exporter import names, nvml, nvml_devices, nvml_errors
from exporter.collectors.gpu import GpuCollector
from exporter.collectors.health import CollectorHealth
from exporter.gpu_unmeasured import UNMEASURED_AFTER_S
from tests.exporter import gpu_rig
from tests.exporter.gpu_rig import START, Clock, exporter_in_a_hung_pass
from tests.fakes.nvml import (
    DRIVER_NOT_LOADED,
    GIB,
    GPU_IS_LOST,
    INSUFFICIENT_SIZE,
    NO_PERMISSION,
    NOT_SUPPORTED,
    TIMEOUT,
    UNKNOWN,
    FakeNvml,
    default_uuid,
    hide_nvml_library,
)
from tests.support.processes import free_port, running

Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]
clock, health, collector = gpu_rig.clock, gpu_rig.health, gpu_rig.collector  # the rig's fixtures, found by name


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    """Two idle GPUs, NVML sampling once a second (whole-second timestamps), in this process's pynvml."""
    fake = FakeNvml.create(tmp_path, gpus=2)
    fake.set(sample_period_us=1_000_000, sample_buffer=30)
    fake.install(monkeypatch)
    return fake


def scrape(*collectors: GpuCollector | CollectorHealth) -> tuple[str, Series]:
    """Render a fresh registry holding the collectors, as /metrics would, and parse it back."""
    registry = CollectorRegistry()
    for collector in collectors:
        registry.register(collector)
    text = generate_latest(registry).decode()
    series: Series = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            series[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return text, series


def gpu_series(series: Series, name: str) -> dict[str, float]:
    """{gpu label: value} of one GPU metric."""
    return {dict(labels)["gpu"]: value for (n, labels), value in series.items() if n == name}


def health_of(series: Series) -> tuple[float, float]:
    """(collector_success, scrape_errors_total{reason=nvml}) of the gpu collector."""
    success = series[(names.COLLECTOR_SUCCESS, (("collector", names.COLLECTOR_GPU),))]
    errors = series.get(
        (names.SCRAPE_ERRORS_TOTAL, (("collector", names.COLLECTOR_GPU), ("reason", names.REASON_NVML))), 0.0,
    )
    return success, errors


def busy(collector: GpuCollector) -> dict[str, float]:
    return {r.label: r.busy_ratio for r in collector.readings if r.busy_ratio is not None}


def passes(collector: GpuCollector, clock: Clock, count: int = 3) -> None:
    """`count` passes a second apart, the clock moved before each (as the collector's loop runs them)."""
    for _ in range(count):
        clock.advance(1)
        collector.sample_once()


# ---- readings ----

def test_busy_ratio_averages_the_samples_in_the_window(
    fake: FakeNvml, clock: Clock, collector: GpuCollector,
) -> None:
    fake.set_gpu(0, util=20)
    fake.set_gpu(1, util=100)
    collector.sample_once()
    assert busy(collector) == {"0": pytest.approx(0.2), "1": pytest.approx(1.0)}

    # Five new samples at 80 % join the last five at 20 % inside the 10 s window.
    fake.set_gpu(0, util=80)
    clock.advance(5)
    collector.sample_once()
    assert busy(collector)["0"] == pytest.approx(0.5)

    clock.advance(10)
    collector.sample_once()
    assert busy(collector)["0"] == pytest.approx(0.8)


def test_samples_taken_between_passes_all_count(fake: FakeNvml, clock: Clock, collector: GpuCollector) -> None:
    collector.sample_once()
    fake.set_gpu(0, util=90)
    clock.advance(3)  # a slow pass: three samples at 90 % arrive together
    collector.sample_once()
    assert busy(collector)["0"] == pytest.approx(3 * 0.9 / 10)


def test_memory_is_reported_per_gpu(fake: FakeNvml, collector: GpuCollector) -> None:
    fake.set_gpu(0, mem_used=3 * GIB, mem_total=80 * GIB)
    fake.set_gpu(1, mem_used=7 * GIB, mem_total=40 * GIB)
    collector.sample_once()
    _, series = scrape(collector)
    assert gpu_series(series, names.GPU_MEMORY_USED_BYTES) == {"0": 3 * GIB, "1": 7 * GIB}
    assert gpu_series(series, names.GPU_MEMORY_TOTAL_BYTES) == {"0": 80 * GIB, "1": 40 * GIB}
    labels = {labels for (name, labels) in series if name == names.GPU_BUSY_RATIO}
    assert (("gpu", "1"), ("uuid", default_uuid(1))) in labels


def test_a_gpu_without_memory_info_is_healthy_and_reports_its_busy_ratio(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector, caplog: pytest.LogCaptureFixture,
) -> None:
    """Unified-memory GPUs (GB10, and Grace parts) answer NOT_SUPPORTED to nvmlDeviceGetMemoryInfo for good.
    The busy ratio, the signal the adapter scales on, is there: the collector must count as healthy, or the
    GPU signal of the pod would read stale forever and hold its runtime's scale-down. Said once, in the log."""
    fake.set_gpu(0, memory_error=NOT_SUPPORTED, util=70)
    fake.set_gpu(1, util=10, mem_used=7 * GIB, mem_total=40 * GIB)
    with caplog.at_level(logging.INFO, logger="exporter"):
        for _ in range(3):
            collector.sample_once()
            clock.advance(1)
    _, series = scrape(collector, health)
    assert gpu_series(series, names.GPU_BUSY_RATIO) == {"0": pytest.approx(0.7), "1": pytest.approx(0.1)}
    assert gpu_series(series, names.GPU_MEMORY_USED_BYTES) == {"1": 7 * GIB}
    assert health_of(series) == (1.0, 0.0)
    assert series[(names.LAST_SUCCESS_TIMESTAMP, (("collector", names.COLLECTOR_GPU),))] > 0
    noted = [r.getMessage() for r in caplog.records if "memory" in r.getMessage()]
    assert len(noted) == 1 and default_uuid(0) in noted[0]


@pytest.mark.parametrize(
    "configured",
    [[default_uuid(1)], [f"  {default_uuid(1).upper()} "]],
    ids=["exact", "pasted-with-spaces-and-upper-case"],
)
def test_gpu_uuids_choose_the_gpus_reported(
    fake: FakeNvml, health: CollectorHealth, clock: Clock, configured: list[str],
) -> None:
    fake.add_gpu()
    collector = GpuCollector(health, uuids=configured, clock=clock, monotonic=clock)
    collector.sample_once()
    _, series = scrape(collector, health)
    assert set(gpu_series(series, names.GPU_BUSY_RATIO)) == {"1"}
    assert health_of(series) == (1.0, 0.0)
    collector.close()


def test_a_configured_gpu_that_is_not_visible_is_a_failure(
    fake: FakeNvml, health: CollectorHealth, clock: Clock,
) -> None:
    collector = GpuCollector(health, uuids=[default_uuid(0), "GPU-not-here"], clock=clock, monotonic=clock)
    collector.sample_once()
    _, series = scrape(collector, health)
    assert set(gpu_series(series, names.GPU_BUSY_RATIO)) == {"0"}
    assert health_of(series) == (0.0, 1.0)
    collector.close()


def test_a_configured_gpu_never_visible_is_announced_once_not_at_every_retry(
    fake: FakeNvml, health: CollectorHealth, clock: Clock, caplog: pytest.LogCaptureFixture,
) -> None:
    """Each retry re-initialises NVML; the same inventory is not news: one "NVML initialised" line, not one
    per retry for as long as the GPU stays missing (the failures are counted and alerted on)."""
    collector = GpuCollector(health, uuids=["GPU-nope"], clock=clock, monotonic=clock)
    with caplog.at_level(logging.INFO, logger="exporter.collectors.gpu"):
        for _ in range(40):
            collector.sample_once()
            clock.advance(1)
    _, series = scrape(collector, health)
    assert health_of(series)[1] >= 4  # it did retry
    assert sum(r.getMessage().startswith("NVML initialised") for r in caplog.records) == 1
    collector.close()


@pytest.mark.parametrize("configured", [None, [default_uuid(1)]])
def test_a_gpu_counted_but_not_given_to_this_container_is_not_its_gpu(
    fake: FakeNvml, health: CollectorHealth, clock: Clock, configured: list[str] | None,
) -> None:
    """nvmlDeviceGetCount_v2 counts every GPU of the machine, and nvmlDeviceGetHandleByIndex_v2 answers
    NO_PERMISSION for one this process may not talk to (nvml.h): that GPU is not visible here, and NVML works
    for the others. It is no outage of NVML as a whole, which served no GPU at all."""
    fake.set_gpu(0, handle_error=NO_PERMISSION)
    fake.set_gpu(1, util=40)
    collector = GpuCollector(health, uuids=configured, clock=clock, monotonic=clock)
    collector.sample_once()
    text, series = scrape(collector, health)
    assert gpu_series(series, names.GPU_BUSY_RATIO) == {"1": 0.4}
    assert health_of(series) == (1.0, 0.0)
    checked = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    assert (checked.returncode, checked.stderr) == (0, "")
    collector.close()


def test_a_scrape_never_calls_nvml(fake: FakeNvml, collector: GpuCollector, health: CollectorHealth) -> None:
    collector.sample_once()
    before = fake.calls()
    for _ in range(5):
        _, series = scrape(collector, health)
    assert fake.calls() == before
    assert 0 < series[(names.COLLECTOR_DURATION_SECONDS, (("collector", names.COLLECTOR_GPU),))] < 1


@pytest.mark.parametrize(
    ("hung_call", "held_s", "read_after_s"),
    [("samples", 4, 4), ("memory", 4, 0)],
    ids=["samples-call-held-4s", "memory-call-held-4s-after-the-samples-were-read"],
)
def test_a_pass_held_by_a_hung_nvml_call_publishes_the_time_its_busy_ratio_describes(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector,
    hung_call: str, held_s: float, read_after_s: float,
) -> None:
    """A hung GPU can hold an NVML call for seconds. The pass's busy ratio was the window ending when the pass
    started, yet `last_success_timestamp{collector="gpu"}` was stamped when the pass ended: the adapter took a
    busy ratio as old as the hang for a fresh one. The timestamp is now the end of the window the busy ratio
    covers: when the samples were read (after a held samples call, the samples that came in meanwhile count).

    The GPU was idle, then fully busy from T0: the busy ratio over the 10 s window ending at time t is
    (t - T0 + 1) / 10 (NVML samples once a second, on whole seconds), so the published value must be that of the
    published timestamp."""
    collector.sample_once()  # START: ten idle seconds in the window
    clock.advance(1)
    started = clock.now  # T0
    fake.set_gpu(0, util=100, hang=hung_call)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        passing = pool.submit(collector.sample_once)
        fake.wait_until_hung()
        clock.advance(held_s)
        fake.set_gpu(0, hang="")
        passing.result(timeout=10)
    _, series = scrape(collector, health)
    stamp = series[(names.LAST_SUCCESS_TIMESTAMP, (("collector", names.COLLECTOR_GPU),))]
    assert health_of(series) == (1.0, 0.0)
    assert stamp == started + read_after_s
    assert gpu_series(series, names.GPU_BUSY_RATIO)["0"] == pytest.approx((stamp - started + 1) / 10)
    assert series[(names.EXPORTER_TIME, ())] == started + held_s


# ---- no GPU, lost GPU, recovery ----

def test_no_library_means_no_gpu_series_and_one_log_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    hide_nvml_library(monkeypatch)
    clock = Clock(None)
    health = CollectorHealth(clock=clock)
    collector = GpuCollector(health, clock=clock, monotonic=clock)
    with caplog.at_level(logging.INFO):
        for _ in range(8):  # t = 0..7 s: tries at 0, 1, 3 and 7 (backoff 1, 2, 4 s)
            collector.sample_once()
            clock.advance(1)
    text, series = scrape(collector, health)
    assert "modelmesh_pod_gpu" not in text
    assert health_of(series) == (0.0, 4.0)
    assert (names.LAST_SUCCESS_TIMESTAMP, (("collector", "gpu"),)) not in series
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert "Library Not Found" in warnings[0].getMessage()


def test_a_library_that_appears_later_is_picked_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    hide_nvml_library(monkeypatch)
    clock = Clock(None)
    health = CollectorHealth(clock=clock)
    collector = GpuCollector(health, clock=clock, monotonic=clock)
    collector.sample_once()
    assert collector.readings == ()

    fake = FakeNvml.create(tmp_path, gpus=1)  # the driver shows up (device plugin, driver install)
    fake.install(monkeypatch)
    clock.fake = fake
    clock.advance(1)
    collector.sample_once()
    _, series = scrape(collector, health)
    assert set(gpu_series(series, names.GPU_BUSY_RATIO)) == {"0"}
    assert health_of(series) == (1.0, 1.0)
    collector.close()


def test_failing_init_is_retried_with_backoff_capped_at_30_seconds(
    fake: FakeNvml, clock: Clock, collector: GpuCollector,
) -> None:
    fake.set(init_error=DRIVER_NOT_LOADED)
    tries: list[float] = []
    for _ in range(240):  # two minutes in half seconds
        before = fake.calls("init")
        collector.sample_once()
        if fake.calls("init") > before:
            tries.append(clock.now - START)
        clock.advance(0.5)
    gaps = [b - a for a, b in itertools.pairwise(tries)]
    assert gaps[:7] == [1, 2, 4, 8, 16, 30, 30]
    assert collector.readings == ()

    fake.set(init_error=0)
    clock.advance(30)
    collector.sample_once()
    assert set(busy(collector)) == {"0", "1"}


def test_a_lost_gpu_drops_its_series_until_nvml_finds_it_again(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake.set_gpu(1, util=50)
    collector.sample_once()
    assert set(busy(collector)) == {"0", "1"}

    fake.set_gpu(1, error=GPU_IS_LOST)
    clock.advance(1)
    with caplog.at_level(logging.WARNING):
        collector.sample_once()
        _, series = scrape(collector, health)
        assert set(gpu_series(series, names.GPU_BUSY_RATIO)) == {"0"}
        assert set(gpu_series(series, names.GPU_MEMORY_USED_BYTES)) == {"0"}
        assert health_of(series) == (0.0, 1.0)

        # Until NVML re-initialises, the lost GPU is not asked again and the others are still read.
        samples_before = fake.calls("samples")
        clock.advance(0.5)
        collector.sample_once()
        assert fake.calls("samples") == samples_before + 1
        assert health_of(scrape(health)[1]) == (0.0, 2.0)

        # Still lost at the re-initialisation 1 s after the loss: GPU 0 stays served.
        clock.advance(0.5)
        collector.sample_once()
        assert set(busy(collector)) == {"0"}
    assert len(caplog.records) == 1  # one outage, one line, which says what is served meanwhile
    assert caplog.records[0].getMessage().endswith("; serving only GPU 0"), caplog.records[0].getMessage()

    fake.set_gpu(1, error=0)
    inits = fake.calls("init")
    clock.advance(2)  # the next try, 2 s later
    collector.sample_once()
    assert fake.calls("init") == inits + 1
    _, series = scrape(collector, health)
    assert set(gpu_series(series, names.GPU_BUSY_RATIO)) == {"0", "1"}
    assert health_of(series)[0] == 1.0


@pytest.mark.parametrize(
    ("fault", "said"),
    [({"samples_error": UNKNOWN}, "nvmlDeviceGetSamples: Unknown Error"),
     ({"memory_error": UNKNOWN}, "nvmlDeviceGetMemoryInfo: Unknown Error"),
     ({"samples_error": TIMEOUT}, "nvmlDeviceGetSamples: Timeout")],
    ids=["samples-unknown", "memory-unknown", "samples-timeout"],
)
def test_a_gpu_whose_readings_keep_failing_is_logged_once_per_outage(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector,
    caplog: pytest.LogCaptureFixture, fault: dict[str, int], said: str,
) -> None:
    """A GPU that still enumerates but whose samples or memory keep failing (NVML UNKNOWN, TIMEOUT) is read again
    at every re-initialisation (every 30 s once backed off), which fails with NVML's words, while the passes in
    between said "dropped until NVML re-initialises" without the cause: the two texts took turns, a WARNING a
    minute, 1,440 a day a pod, with nothing new happening. One line for the outage, with its cause; one when the
    GPU is back."""
    fake.set_gpu(0, util=40)
    fake.set_gpu(1, util=70)
    collector.sample_once()
    fake.set_gpu(1, **fault)
    with caplog.at_level(logging.WARNING, logger="exporter"):
        passes(collector, clock, 600)  # ten minutes of passes, one a second
    _, series = scrape(collector, health)
    assert gpu_series(series, names.GPU_BUSY_RATIO) == {"0": pytest.approx(0.4)}
    assert health_of(series)[0] == 0.0
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1, lines
    assert f"GPU 1 {default_uuid(1)} dropped until NVML re-initialises" in lines[0], lines[0]
    assert said in lines[0] and lines[0].endswith("; serving only GPU 0"), lines[0]

    fake.set_gpu(1, samples_error=0, memory_error=0)
    with caplog.at_level(logging.INFO, logger="exporter"):
        passes(collector, clock, 31)  # the next re-initialisation, at most 30 s away
    assert set(busy(collector)) == {"0", "1"}
    assert [r.getMessage() for r in caplog.records][1:] == ["gpu collector recovered"]


def test_driver_going_away_mid_run_drops_every_series(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector,
) -> None:
    collector.sample_once()
    fake.set_gpu(0, error=DRIVER_NOT_LOADED)
    clock.advance(1)
    collector.sample_once()
    assert collector.readings == ()
    assert health_of(scrape(health)[1]) == (0.0, 1.0)

    fake.set_gpu(0, error=0)
    clock.advance(1)
    collector.sample_once()
    assert set(busy(collector)) == {"0", "1"}


def test_no_gpu_visible_is_a_failure_not_a_crash(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector,
) -> None:
    fake.gpus.clear()
    fake.write()
    collector.sample_once()
    text, series = scrape(collector, health)
    assert "modelmesh_pod_gpu" not in text
    assert health_of(series) == (0.0, 1.0)


# ---- fallbacks ----

def test_unsupported_samples_fall_back_to_utilization_rates(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake.set_gpu(0, samples_error=NOT_SUPPORTED, util=60)
    with caplog.at_level(logging.INFO, logger="exporter"):
        collector.sample_once()
        assert busy(collector)["0"] == pytest.approx(0.6)

        fake.set_gpu(0, util=20)
        clock.advance(1)
        collector.sample_once()
    assert busy(collector)["0"] == pytest.approx(0.4)  # rates read once per pass, averaged over the window
    assert health_of(scrape(health)[1]) == (1.0, 0.0)
    said = [r.getMessage() for r in caplog.records if "utilization" in r.getMessage()]
    assert said == [f"GPU 0 {default_uuid(0)} has no utilization samples; reading utilization rates"]


@pytest.mark.parametrize("code", [NOT_SUPPORTED, NO_PERMISSION], ids=["not-supported", "no-permission"])
def test_a_gpu_refusing_every_query_for_a_while_is_said_as_it_is_and_read_by_samples_when_back(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector,
    caplog: pytest.LogCaptureFixture, code: int,
) -> None:
    """A whole GPU answering NOT_SUPPORTED or NO_PERMISSION to every query for a while. The log said its "busy
    ratio is read as usual" (it had none), that the collector was "serving only GPU 0, GPU 1" (GPU 1 had no series
    at all), and when the GPU came back, that it "has no utilization samples; reading utilization rates", just as
    it had samples again: the exporter then read it by rates until it restarted."""
    fake.set_gpu(0, util=40)
    fake.set_gpu(1, util=70)
    collector.sample_once()
    fake.set_gpu(1, error=code)
    with caplog.at_level(logging.INFO, logger="exporter"):
        passes(collector, clock, 8)
        _, series = scrape(collector, health)
        assert {labels for (name, labels) in series if name.startswith("modelmesh_pod_gpu")} == {
            (("gpu", "0"), ("uuid", default_uuid(0)))}
        fake.set_gpu(1, error=0, util=20)
        passes(collector, clock, 12)
    said = [r.getMessage() for r in caplog.records]
    memory = [line for line in said if "reports no memory use" in line]
    assert len(memory) == 1 and "read as usual" not in memory[0] and "no busy ratio" in memory[0], memory
    failed = [line for line in said if "gpu collector failed" in line]
    assert len(failed) == 1 and failed[0].endswith("; serving only GPU 0"), failed
    assert not [line for line in said if "utilization rates" in line], said
    assert said[-1] == "gpu collector recovered", said
    assert busy(collector) == {"0": pytest.approx(0.4), "1": pytest.approx(0.2)}
    rates = fake.calls("utilization")
    passes(collector, clock)
    assert fake.calls("utilization") == rates  # read from NVML's samples again


def test_a_gpu_whose_samples_come_back_is_read_by_samples_again(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Rates stand in where a device has no samples; once it has them again, it is read by them again (within a
    minute), which the log says. It stayed on rates until the exporter restarted."""
    fake.set_gpu(0, samples_error=NOT_SUPPORTED, util=60)
    with caplog.at_level(logging.INFO, logger="exporter"):
        passes(collector, clock)
        fake.set_gpu(0, samples_error=0)
        passes(collector, clock, 61)
    rates = fake.calls("utilization")
    passes(collector, clock)
    assert fake.calls("utilization") == rates
    assert busy(collector)["0"] == pytest.approx(0.6)
    assert health_of(scrape(health)[1]) == (1.0, 0.0)
    said = [r.getMessage() for r in caplog.records if "utilization" in r.getMessage()]
    assert said == [f"GPU 0 {default_uuid(0)} has no utilization samples; reading utilization rates",
                    f"GPU 0 {default_uuid(0)} has utilization samples again; reading them"], said


def test_no_new_samples_keeps_the_window_then_reads_rates(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector,
) -> None:
    fake.set_gpu(0, util=40)
    collector.sample_once()
    fake.set_gpu(0, samples_error=INSUFFICIENT_SIZE, util=70)  # as if the buffer grew while pynvml sized it
    clock.advance(5)
    collector.sample_once()
    assert busy(collector)["0"] == pytest.approx(0.4)  # the five samples still in the window

    clock.advance(10)
    collector.sample_once()
    assert busy(collector)["0"] == pytest.approx(0.7)  # the window emptied: the latest rate stands in
    assert health_of(scrape(health)[1]) == (1.0, 0.0)


@pytest.mark.parametrize("offset_s", [3600, -3600])
def test_an_nvml_clock_far_from_ours_falls_back_to_rates(
    fake: FakeNvml, clock: Clock, collector: GpuCollector, caplog: pytest.LogCaptureFixture, offset_s: int,
) -> None:
    clock.fake = None
    fake.set_time(clock.now + offset_s)
    fake.set_gpu(0, util=30)
    with caplog.at_level(logging.INFO, logger="exporter"):
        collector.sample_once()
    assert busy(collector)["0"] == pytest.approx(0.3)
    said = [r.getMessage() for r in caplog.records]
    assert not [line for line in said if "no utilization samples" in line], said  # it has them, an hour off
    assert any(f"NVML sample time {offset_s:+} s from ours" in line for line in said), said


@pytest.mark.parametrize("ahead_s", [300, -300, -30], ids=["ahead", "behind", "behind-the-window"])
def test_an_nvml_clock_off_ours_either_way_is_warned_once_and_read_by_rates(
    fake: FakeNvml, caplog: pytest.LogCaptureFixture, ahead_s: int,
) -> None:
    """NVML's sample clock 300 s behind ours was warned once; 300 s ahead, every sample was dropped as stamped
    before a step back of our clock, with nothing said, pass after pass (and the whole buffer asked for each).
    30 s behind, past the 10 s window but within a minute, no sample could be windowed and rates were read
    without a word."""
    clock = Clock(fake, nvml_ahead_s=ahead_s)
    health = CollectorHealth(clock=clock)
    collector = GpuCollector(health, uuids=[default_uuid(0)], clock=clock, monotonic=clock)
    fake.set_gpu(0, util=60)
    with caplog.at_level(logging.INFO, logger="exporter"):
        passes(collector, clock, 1)
        asked = fake.calls("samples")  # one read of NVML's samples (pynvml sizes, then fills)
        passes(collector, clock, 149)
    assert busy(collector) == {"0": pytest.approx(0.6)}
    assert fake.calls("samples") <= 3 * asked  # the first pass, then once a minute: do they agree again?
    collector.close()
    said = [r.getMessage() for r in caplog.records if "NVML sample time" in r.getMessage()]
    assert said == [f"GPU 0: NVML sample time {ahead_s:+} s from ours; reading utilization rates instead"], said
    assert [r.levelname for r in caplog.records if "NVML sample time" in r.getMessage()] == ["WARNING"]
    assert health_of(scrape(health)[1]) == (1.0, 0.0)


@pytest.mark.parametrize("ahead_s", [3, -3])
def test_an_nvml_clock_a_few_seconds_off_ours_is_still_read_by_its_samples(
    fake: FakeNvml, caplog: pytest.LogCaptureFixture, ahead_s: int,
) -> None:
    """Within the window behind, or within a minute ahead (taken once our clock reaches them), samples still
    window: no warning, and NVML's samples are read every pass."""
    clock = Clock(fake, nvml_ahead_s=ahead_s)
    collector = GpuCollector(CollectorHealth(clock=clock), uuids=[default_uuid(0)], clock=clock, monotonic=clock)
    fake.set_gpu(0, util=60)
    with caplog.at_level(logging.INFO, logger="exporter"):
        passes(collector, clock, 1)
        asked = fake.calls("samples")
        passes(collector, clock, 20)
    assert busy(collector) == {"0": pytest.approx(0.6)}
    assert fake.calls("samples") >= 20 * asked
    collector.close()
    assert not [r for r in caplog.records if "NVML sample time" in r.getMessage()]


def test_a_short_window_with_nvml_a_few_seconds_behind_reads_rates_each_pass_without_a_warning(
    fake: FakeNvml, caplog: pytest.LogCaptureFixture,
) -> None:
    """A 1 s window, NVML's sample clock 3 s behind ours: no sample falls in the window, so each pass the latest rate
    stands in (60 %), but 3 s is no clock fault (at least 5 s behind is: a sample period plus a pass): no warning,
    and the samples are asked for again at every pass, not once a minute."""
    clock = Clock(fake, nvml_ahead_s=-3)
    health = CollectorHealth(clock=clock)
    collector = GpuCollector(health, uuids=[default_uuid(0)], window_s=1.0, clock=clock, monotonic=clock)
    fake.set_gpu(0, util=60)
    with caplog.at_level(logging.INFO, logger="exporter"):
        passes(collector, clock, 1)
        asked = fake.calls("samples")
        passes(collector, clock, 20)
    assert gpu_series(scrape(collector, health)[1], names.GPU_BUSY_RATIO) == {"0": pytest.approx(0.6)}
    assert fake.calls("samples") >= 20 * asked
    collector.close()
    assert not [r for r in caplog.records if "NVML sample time" in r.getMessage()]


def test_a_sample_above_100_percent_is_served_as_fully_busy(
    fake: FakeNvml, collector: GpuCollector, health: CollectorHealth,
) -> None:
    fake.set_gpu(0, util=150)  # a driver's glitch: 1.5 is no busy ratio
    collector.sample_once()
    assert gpu_series(scrape(collector, health)[1], names.GPU_BUSY_RATIO)["0"] == 1.0


def test_a_sample_exactly_one_second_ahead_is_no_step_back_of_the_clock(
    fake: FakeNvml, caplog: pytest.LogCaptureFixture,
) -> None:
    """NVML's clock 1 s ahead: its newest sample is stamped exactly 1 s past ours, which a second pass at the same
    moment must not read as our clock having gone back (the window would start again)."""
    clock = Clock(fake, nvml_ahead_s=1)
    collector = GpuCollector(CollectorHealth(clock=clock), uuids=[default_uuid(0)], clock=clock, monotonic=clock)
    fake.set_gpu(0, util=60)
    with caplog.at_level(logging.INFO, logger="exporter"):
        collector.sample_once()
        collector.sample_once()
    assert busy(collector) == {"0": pytest.approx(0.6)}
    collector.close()
    assert not [r for r in caplog.records if "clock went back" in r.getMessage()]


def test_a_wall_clock_stepped_back_does_not_serve_the_old_busy_as_new(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector,
) -> None:
    """NVML stamps samples with the wall clock, which NTP or a resumed VM can step back. The samples held from
    before the step then lie in the future: they were averaged as the current window for as long as the step
    (90 % busy on an idle GPU, 40 s, reported as a success), and NVML was asked only for samples newer than
    them, so it gave none."""
    fake.set_gpu(0, util=90)
    for _ in range(12):
        clock.advance(1)
        collector.sample_once()
    assert busy(collector)["0"] == 0.9

    fake.set_gpu(0, util=0)
    clock.advance(-30)
    passes(collector, clock)
    _, series = scrape(collector, health)
    assert gpu_series(series, names.GPU_BUSY_RATIO)["0"] == 0.0
    assert health_of(series) == (1.0, 0.0)
    assert fake.calls("utilization") == 0  # read from NVML's samples, as before the step


def test_mig_devices_beside_whole_gpus_report_memory_and_leave_busy_to_the_whole_gpus(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """NVML measures no utilization per MIG device. Beside a whole GPU that does, that is how MIG is, not a
    failure: the collector failed for good, so `last_success_timestamp{collector="gpu"}` never appeared, the
    adapter read the pod's GPU signal as missing (GPU 0's busy included) and its runtime never scaled down.
    Said once in the log instead, naming the MIG devices and the GPUs busy is read from."""
    fake.set_gpu(0, util=40)
    fake.set_gpu(1, mig=2, mem_used=10 * GIB, mem_total=80 * GIB)
    with caplog.at_level(logging.INFO, logger="exporter"):
        passes(collector, clock)
    text, series = scrape(collector, health)
    assert gpu_series(series, names.GPU_BUSY_RATIO) == {"0": 0.4}
    assert gpu_series(series, names.GPU_MEMORY_TOTAL_BYTES) == {"0": 80 * GIB, "1/0": 40 * GIB, "1/1": 40 * GIB}
    assert gpu_series(series, names.GPU_MEMORY_USED_BYTES)["1/1"] == 5 * GIB
    assert 'uuid="MIG-' in text
    assert health_of(series) == (1.0, 0.0)
    assert series[(names.LAST_SUCCESS_TIMESTAMP, (("collector", names.COLLECTOR_GPU),))] == clock.now
    said = [r.getMessage() for r in caplog.records if "MIG" in r.getMessage() and "busy" in r.getMessage()]
    assert len(said) == 1, said
    assert "1/0" in said[0] and "1/1" in said[0] and "GPU 0" in said[0], said[0]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_gpu_switched_into_mig_mode_while_running_is_sampled_as_its_mig_devices(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A GPU switched into MIG mode under a running exporter answers NOT_SUPPORTED to whole-GPU utilization. The
    devices were enumerated only at start, so the collector failed at every pass (GPU 0's busy read as stale,
    the runtime's scale-down held) and the new MIG devices were never seen until the exporter restarted. The
    switch is now seen at the pass that meets it: NVML re-enumerates at once, the MIG devices' series appear,
    and the collector never fails."""
    fake.set_gpu(0, util=40)
    fake.set_gpu(1, util=60)
    collector.sample_once()
    assert busy(collector) == {"0": pytest.approx(0.4), "1": pytest.approx(0.6)}

    fake.set_gpu(1, mig=2, mem_used=10 * GIB, mem_total=80 * GIB)
    with caplog.at_level(logging.INFO, logger="exporter"):
        passes(collector, clock)
    text, series = scrape(collector, health)
    assert gpu_series(series, names.GPU_BUSY_RATIO) == {"0": pytest.approx(0.4)}
    assert gpu_series(series, names.GPU_MEMORY_TOTAL_BYTES) == {"0": 80 * GIB, "1/0": 40 * GIB, "1/1": 40 * GIB}
    assert f'uuid="MIG-{default_uuid(1).removeprefix("GPU-")}-0"' in text
    assert health_of(series) == (1.0, 0.0)
    assert series[(names.LAST_SUCCESS_TIMESTAMP, (("collector", names.COLLECTOR_GPU),))] == clock.now
    said = [r.getMessage() for r in caplog.records]
    assert any("MIG mode" in line and default_uuid(1) in line for line in said), said
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], said
    # Not a GPU without utilization samples: it is in MIG mode, where neither NVML query works.
    assert not [line for line in said if "utilization samples" in line], said
    checked = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    assert (checked.returncode, checked.stderr) == (0, "")


def test_a_gpu_in_mig_mode_before_its_mig_devices_are_created_says_so_and_finds_them_once_they_are(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """MIG mode is switched on first and the MIG devices created after (`nvidia-smi mig -cgi ... -C`, or the MIG
    manager). In between the GPU has nothing to sample: a failure, but said as what it is, not as a GPU lost at a
    driver reload that "counts as lost until the exporter restarts"; the MIG devices are found at the next try."""
    fake.set_gpu(0, util=40)
    fake.set_gpu(1, util=60)
    collector.sample_once()
    fake.set_gpu(1, mig=2, mig_created=0)
    with caplog.at_level(logging.WARNING, logger="exporter"):
        clock.advance(1)
        collector.sample_once()
    _, series = scrape(collector, health)
    assert gpu_series(series, names.GPU_BUSY_RATIO) == {"0": pytest.approx(0.4)}
    assert set(gpu_series(series, names.GPU_MEMORY_TOTAL_BYTES)) == {"0"}
    assert health_of(series) == (0.0, 1.0)
    (said,) = [r.getMessage() for r in caplog.records]
    assert f"GPU 1 {default_uuid(1)} is in MIG mode with no MIG device" in said, said
    assert "lost" not in said, said

    fake.set_gpu(1, mig_created=-1)  # the MIG devices are created
    clock.advance(1)  # the next try
    collector.sample_once()
    _, series = scrape(collector, health)
    assert gpu_series(series, names.GPU_BUSY_RATIO) == {"0": pytest.approx(0.4)}
    assert set(gpu_series(series, names.GPU_MEMORY_TOTAL_BYTES)) == {"0", "1/0", "1/1"}
    assert health_of(series) == (1.0, 1.0)


def test_a_gpu_switched_out_of_mig_mode_while_running_is_sampled_whole_again(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The other way: the MIG devices of a GPU that leaves MIG mode no longer exist (NVML answers Invalid
    Argument for them). That read as the GPU lost: a failure, a warning, and the whole GPU's series only after
    the next re-initialisation. Its busy ratio is now back at the pass that meets the switch."""
    fake.set_gpu(0, util=40)
    fake.set_gpu(1, mig=2)
    collector.sample_once()
    assert set(gpu_series(scrape(collector)[1], names.GPU_MEMORY_TOTAL_BYTES)) == {"0", "1/0", "1/1"}

    fake.set_gpu(1, mig=0, util=70)
    with caplog.at_level(logging.WARNING, logger="exporter"):
        clock.advance(1)
        collector.sample_once()
    _, series = scrape(collector, health)
    assert gpu_series(series, names.GPU_BUSY_RATIO) == {"0": pytest.approx(0.4), "1": pytest.approx(0.7)}
    assert set(gpu_series(series, names.GPU_MEMORY_TOTAL_BYTES)) == {"0", "1"}
    assert health_of(series) == (1.0, 0.0)
    assert not caplog.records, [r.getMessage() for r in caplog.records]


def test_mig_devices_this_container_may_not_see_are_left_out_not_a_failure_for_good(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """NVML answers NO_PERMISSION for a GPU not given to this container, and for a MIG device of another pod's
    (a container without that MIG device's capability). Left out as a GPU is (nvml.h): it failed the whole MIG
    GPU's enumeration, a standing failure, so the collector failed for good and GPU 0's busy read as stale."""
    fake.set_gpu(0, util=40)
    fake.set_gpu(1, mig=2, mig_handle_error=NO_PERMISSION)
    with caplog.at_level(logging.INFO, logger="exporter"):
        passes(collector, clock)
    _, series = scrape(collector, health)
    assert gpu_series(series, names.GPU_BUSY_RATIO) == {"0": 0.4}
    assert set(gpu_series(series, names.GPU_MEMORY_TOTAL_BYTES)) == {"0"}
    assert health_of(series) == (1.0, 0.0)
    said = [r.getMessage() for r in caplog.records if "GPU 1" in r.getMessage() and "MIG" in r.getMessage()]
    assert len(said) == 1 and "permission" in said[0].lower(), said


@pytest.mark.parametrize("chosen", ["gpu", "mig-uuid", "every-gpu"])
def test_mig_devices_alone_fail_the_collector_busy_is_missing(
    fake: FakeNvml, health: CollectorHealth, clock: Clock, caplog: pytest.LogCaptureFixture, chosen: str,
) -> None:
    """With only MIG devices chosen (their GPU's UUID, one MIG device's, or every GPU on a node of MIG GPUs), no
    busy ratio at all: the adapter has nothing to scale the pod on, whichever success the exporter published
    (docs/design.md, Missing data), so it is a failure, which `ModelMeshExporterGpuNotVisible` turns into the
    advice to read MIG busy from DCGM. The line said only "failed (nvml) ... Not Supported" per device and
    "serving only GPU 1/0, GPU 1/1", which had no busy ratio; it says why and what to do, and that the memory
    alone is served."""
    fake.set_gpu(1, mig=2)
    uuids = {"gpu": [default_uuid(1)], "mig-uuid": [f"MIG-{default_uuid(1).removeprefix('GPU-')}-1"],
             "every-gpu": None}[chosen]
    if chosen == "every-gpu":
        fake.gpus.pop(0)
        fake.write()
    collector = GpuCollector(health, uuids=uuids, clock=clock, monotonic=clock)
    with caplog.at_level(logging.WARNING):
        collector.sample_once()
        collector.sample_once()
    _, series = scrape(collector, health)
    assert gpu_series(series, names.GPU_BUSY_RATIO) == {}
    served = {"gpu": {"1/0", "1/1"}, "mig-uuid": {"1/1"}, "every-gpu": {"0/0", "0/1"}}[chosen]
    assert set(gpu_series(series, names.GPU_MEMORY_TOTAL_BYTES)) == served
    assert health_of(series) == (0.0, 2.0)
    (line,) = [record.getMessage() for record in caplog.records]
    assert "no busy ratio: MIG devices (GPU " in line, line
    assert "NVML measures no utilization per MIG device" in line, line
    assert "--gpu-source=dcgm" in line and "Not Supported" not in line, line
    assert line.endswith("; serving no busy ratio, only the memory of " + ", ".join(
        f"GPU {label}" for label in sorted(served))), line
    collector.close()


def test_a_new_gpu_problem_during_an_outage_is_logged_too(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector, caplog: pytest.LogCaptureFixture,
) -> None:
    """A GPU lost fails the collector (reason nvml); another lost later fails it with the same reason: logged once
    per reason, the operator's last line still spoke of the first GPU while GPU 0 had gone. A new problem is logged
    too, at most once a minute where NVML's error code is no news (a problem whose text changes at every pass
    must not log at every pass)."""
    fake.set_gpu(1, error=GPU_IS_LOST)
    with caplog.at_level(logging.WARNING):
        collector.sample_once()
        fake.set_gpu(0, error=GPU_IS_LOST)
        clock.advance(1)
        collector.sample_once()
        assert len(caplog.records) == 1  # within the minute, and the same code (15): not yet
        for _ in range(60):
            clock.advance(1)
            collector.sample_once()
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 2, lines
    assert "GPU 0" in lines[1] and "lost" in lines[1].lower(), lines[1]


def test_a_gpu_lost_beside_one_never_measured_says_only_the_memory_is_served(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector, caplog: pytest.LogCaptureFixture,
) -> None:
    """The failure line names exactly what is served: GPU 1, whose utilization NVML never measured, has its memory
    alone; "serving only GPU 1" would say the pod's busy ratio is still there."""
    fake.set_gpu(0, util=40)
    fake.set_gpu(1, samples_error=NOT_SUPPORTED, util_error=NOT_SUPPORTED)
    collector.sample_once()
    passes(collector, clock, int(UNMEASURED_AFTER_S))  # GPU 1 refused past its probation: taken as unmeasured
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        fake.set_gpu(0, error=GPU_IS_LOST)
        passes(collector, clock)
    (line,) = [record.getMessage() for record in caplog.records]
    assert f"GPU 0 {default_uuid(0)} dropped until NVML re-initialises" in line, line
    assert line.endswith("; serving no busy ratio, only the memory of GPU 1"), line


def test_a_whole_gpu_nvml_never_measures_beside_one_it_does_is_said_once_not_a_failure(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A whole GPU whose utilization NVML does not support (NOT_SUPPORTED to samples and rates alike, from its first
    read) beside one it measures. The collector failed for good: `collector_success{gpu}` 0, no success timestamp
    ever, a WARNING saying "serving only GPU 0, GPU 1" (GPU 0 had no busy ratio) and an error a second, so the
    adapter read the pod's GPU as missing and held its runtime's scale-down for good, GPU 1's busy served all the
    while. As MIG is, once it has refused past its probation (a failure until then, a GPU being reset refuses too:
    tests/exporter/test_gpu_refusing_from_start.py): said once, naming the GPU busy is read from; GPU 0's memory is
    still served."""
    fake.set_gpu(0, samples_error=NOT_SUPPORTED, util_error=NOT_SUPPORTED)
    fake.set_gpu(1, util=50)
    with caplog.at_level(logging.INFO, logger="exporter"):
        passes(collector, clock, int(UNMEASURED_AFTER_S) + 70)
    _, series = scrape(collector, health)
    assert gpu_series(series, names.GPU_BUSY_RATIO) == {"1": 0.5}
    assert set(gpu_series(series, names.GPU_MEMORY_TOTAL_BYTES)) == {"0", "1"}
    assert health_of(series)[0] == 1.0
    assert series[(names.LAST_SUCCESS_TIMESTAMP, (("collector", names.COLLECTOR_GPU),))] == clock.now
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1 and "taken as unmeasured after 5 min" in warned[0], warned
    said = [r.getMessage() for r in caplog.records if "has no busy ratio" in r.getMessage()]
    assert len(said) == 1, said
    assert said[0].startswith(f"GPU 0 {default_uuid(0)} has no busy ratio: NVML has refused its utilization ever "
                              "since its first read, over 5 min ("), said
    assert said[0].endswith("this pod's busy ratio is read from GPU 1 alone (GPU 0 has its memory alone)"), said[0]


def test_a_whole_gpu_that_gave_a_busy_ratio_and_stops_is_a_failure_not_one_never_measured(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector,
) -> None:
    """Only a GPU NVML never measured is taken for one it cannot: one that gave a busy ratio and then refuses it
    may be as busy as ever, and the pod's busy from the other GPUs alone would read it lower (Missing data)."""
    fake.set_gpu(0, util=90)
    fake.set_gpu(1, util=10)
    collector.sample_once()
    fake.set_gpu(0, samples_error=NOT_SUPPORTED, util_error=NOT_SUPPORTED)
    passes(collector, clock)
    _, series = scrape(collector, health)
    assert gpu_series(series, names.GPU_BUSY_RATIO) == {"1": 0.1}
    assert health_of(series)[0] == 0.0


def test_a_whole_gpu_nvml_never_measures_alone_fails_the_collector_and_says_what_is_served(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, caplog: pytest.LogCaptureFixture,
) -> None:
    """With no GPU NVML measures, the pod has no busy ratio at all: a failure (the adapter has nothing to scale it
    on, as with only MIG devices), whose line says the memory alone is served, not "serving only GPU 0", and, once
    the GPU has refused past its probation, where busy can be read: the MIG failure said so, this one did not."""
    fake.set_gpu(0, samples_error=NOT_SUPPORTED, util_error=NOT_SUPPORTED)
    collector = GpuCollector(health, uuids=[default_uuid(0)], clock=clock, monotonic=clock)
    with caplog.at_level(logging.WARNING):
        passes(collector, clock, int(UNMEASURED_AFTER_S) + 61)
    collector.close()
    _, series = scrape(health)
    assert health_of(series)[0] == 0.0
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 2, lines
    assert "taken as unmeasured after 5 min if it never answers" in lines[0], lines[0]
    assert f"no busy ratio: NVML does not measure the utilization of GPU 0 {default_uuid(0)}" in lines[1], lines[1]
    assert "--gpu-source=dcgm" in lines[1] and "EXPORTER_NO_GPU=true" in lines[1], lines[1]
    for line in lines:
        assert line.endswith("; serving no busy ratio, only the memory of GPU 0"), line


def test_a_new_nvml_error_code_within_an_outage_gets_its_line_but_not_one_a_pass(
    fake: FakeNvml, clock: Clock, health: CollectorHealth, collector: GpuCollector, caplog: pytest.LogCaptureFixture,
) -> None:
    """Both GPUs lost (GPU is lost, code 15), then the driver unloaded 5 s later (Driver Not Loaded, code 9): within
    the minute of the first line, with the same reason (nvml), nothing said so, and the next line was the
    recovery; a driver not loaded at the exporter's start, said and over, did not make it news either. A code new
    in the outage gets its line; codes taking turns at every try do not get one a try."""
    with caplog.at_level(logging.WARNING):
        fake.set(init_error=DRIVER_NOT_LOADED)
        collector.sample_once()
        fake.set(init_error=0)
        passes(collector, clock, 2)  # the driver loaded: NVML found at the retry, a second on
        assert set(busy(collector)) == {"0", "1"}
        fake.set_gpu(0, error=GPU_IS_LOST)
        fake.set_gpu(1, error=GPU_IS_LOST)
        passes(collector, clock, 5)
        fake.set(init_error=DRIVER_NOT_LOADED, count_error=DRIVER_NOT_LOADED)
        passes(collector, clock, 10)  # the next re-initialisation is due within 8 s of the first failure
        lines = [record.getMessage() for record in caplog.records]
        assert len(lines) == 3, lines
        assert "GPU is lost (NVML code 15)" in lines[1], lines[1]
        assert "Driver Not Loaded (NVML code 9)" in lines[2], lines[2]
        for turn in range(40):  # the two take turns at every re-initialisation (30 s apart), for 20 minutes
            unloaded = DRIVER_NOT_LOADED if turn % 2 else 0
            fake.set(init_error=unloaded, count_error=unloaded)
            passes(collector, clock, 30)
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) - 3 <= 20, lines  # both said: a line a minute at most, not one a try (40)


def test_a_gpu_uuid_selects_its_mig_devices(fake: FakeNvml, health: CollectorHealth, clock: Clock) -> None:
    fake.set_gpu(1, mig=3)
    collector = GpuCollector(health, uuids=[default_uuid(1)], clock=clock, monotonic=clock)
    collector.sample_once()
    assert [r.label for r in collector.readings] == ["1/0", "1/1", "1/2"]
    collector.close()


# ---- output, loop, cost ----

@pytest.mark.parametrize("state", ["gpus", "mig", "no-library", "gpu-lost"])
def test_promtool_accepts_the_output(
    state: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    if state == "no-library":
        hide_nvml_library(monkeypatch)
        clock = Clock(None)
    else:
        fake = FakeNvml.create(tmp_path, gpus=2)
        fake.install(monkeypatch)
        fake.set_gpu(0, util=35, mem_used=GIB)
        fake.set_gpu(1, mig=2 if state == "mig" else 0, error=GPU_IS_LOST if state == "gpu-lost" else 0)
        clock = Clock(fake)
    health = CollectorHealth(clock=clock)
    collector = GpuCollector(health, clock=clock, monotonic=clock)
    collector.sample_once()
    text, _ = scrape(collector, health)
    checked = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, check=False,
    )
    assert (checked.returncode, checked.stderr) == (0, ""), text
    collector.close()


async def test_run_samples_in_the_background_and_shuts_nvml_down_when_cancelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeNvml.create(tmp_path, gpus=1)  # real clocks on both sides
    fake.set_gpu(0, util=25)
    fake.install(monkeypatch)
    health = CollectorHealth()
    collector = GpuCollector(health, window_s=2.0)
    task = asyncio.create_task(collector.run(interval_s=0.01))
    deadline = time.monotonic() + 5
    while fake.calls("samples") < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert busy(collector) == {"0": pytest.approx(0.25)}
    assert health.is_healthy(names.COLLECTOR_GPU)

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert fake.calls("shutdown") == fake.calls("init") == 1
    assert collector.readings == ()


async def test_an_unexpected_error_is_logged_once_and_sampling_goes_on(
    fake: FakeNvml, caplog: pytest.LogCaptureFixture,
) -> None:
    attempts = 0

    def surprising_open() -> nvml.NvmlSession:
        nonlocal attempts
        attempts += 1
        if attempts <= 3:
            raise RuntimeError("surprise")
        return nvml.NvmlSession.open()

    health = CollectorHealth()
    collector = GpuCollector(
        health, window_s=2.0, retry_initial_s=0.001, retry_max_s=0.001, open_nvml=surprising_open,
    )
    task = asyncio.create_task(collector.run(interval_s=0.005))
    deadline = time.monotonic() + 5
    while not collector.readings and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert attempts == 4
    assert len([r for r in caplog.records if r.exc_info]) == 1
    assert health.is_healthy(names.COLLECTOR_GPU)
    _, series = scrape(health)
    internal = (("collector", names.COLLECTOR_GPU), ("reason", names.REASON_INTERNAL))
    assert series[(names.SCRAPE_ERRORS_TOTAL, internal)] == 3


# ---- the NVML boundary ----

def test_nvml_errors_are_ours_with_code_and_cause(fake: FakeNvml) -> None:
    fake.set_gpu(0, error=GPU_IS_LOST)
    fake.set_gpu(1, util_error=NOT_SUPPORTED)
    with nvml.NvmlSession.open() as session:
        inventory = session.inventory()
        assert [d.label for d in inventory.devices] == ["1"]
        (lost,) = inventory.failures
        assert isinstance(lost, nvml_errors.GpuLost)
        assert lost.code == pynvml.NVML_ERROR_GPU_IS_LOST
        assert isinstance(lost.__cause__, pynvml.NVMLError_GpuIsLost)
        with pytest.raises(nvml_errors.NotSupported) as unsupported:
            session.utilization_rate(inventory.devices[0])
        assert unsupported.value.code == pynvml.NVML_ERROR_NOT_SUPPORTED
    fake.set(init_error=DRIVER_NOT_LOADED)
    with pytest.raises(nvml_errors.NvmlUnavailable) as unavailable:
        nvml.NvmlSession.open()
    assert unavailable.value.code == pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    assert isinstance(unavailable.value.__cause__, pynvml.NVMLError_DriverNotLoaded)


def test_no_permission_is_one_devices_refusal_but_a_refused_init_is_nvml_unavailable(fake: FakeNvml) -> None:
    fake.set_gpu(0, memory_error=NO_PERMISSION)
    with nvml.NvmlSession.open() as session:
        device = session.inventory().devices[0]
        with pytest.raises(nvml_errors.NotSupported) as refused:
            session.memory(device)
        assert isinstance(refused.value, nvml_errors.NotPermitted)
        assert refused.value.code == NO_PERMISSION
    fake.set(init_error=NO_PERMISSION)  # /dev/nvidiactl not open to this user
    with pytest.raises(nvml_errors.NvmlUnavailable) as unavailable:
        nvml.NvmlSession.open()
    assert unavailable.value.code == NO_PERMISSION


def test_samples_come_back_oldest_first_with_microsecond_timestamps(fake: FakeNvml, clock: Clock) -> None:
    fake.set_gpu(0, util=42)
    with nvml.NvmlSession.open() as session:
        device = session.inventory().devices[0]
        samples = session.utilization_samples(device, 0)
        assert len(samples) == 30  # the whole buffer
        assert samples[-1] == nvml_devices.UtilizationSample(round(START * 1_000_000), 42.0)
        assert samples[0].timestamp_us == round((START - 29) * 1_000_000)
        assert session.utilization_samples(device, samples[-1].timestamp_us) == []  # NVML: NOT_FOUND
        assert session.driver_version() == "550.54.15"


async def test_a_hung_nvml_pass_stops_the_gpu_series_and_counts_a_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NVML stops answering mid-pass (a GPU falling off the bus): the last good busy ratio must not stay on
    /metrics with a success flag, or the adapter would read an old GPU as current."""
    import threading

    from exporter.collectors import gpu as gpu_module

    fake = FakeNvml.create(tmp_path, gpus=1)
    fake.set_gpu(0, util=90)
    fake.install(monkeypatch)
    monkeypatch.setattr(gpu_module, "OVERRUN_MIN_S", 0.2)
    health = CollectorHealth()
    collector = GpuCollector(health, window_s=2.0)
    release = threading.Event()
    real_measure = collector._sampler.measure
    hang = False

    def measure() -> object:
        if hang:
            release.wait(10.0)  # the driver call that does not return
        return real_measure()

    monkeypatch.setattr(collector._sampler, "measure", measure)
    task = asyncio.create_task(collector.run(interval_s=0.01))
    try:
        async with asyncio.timeout(5.0):
            while not collector.readings:
                await asyncio.sleep(0.01)
        assert health.is_healthy(names.COLLECTOR_GPU)
        hang = True
        async with asyncio.timeout(5.0):
            while collector.readings:
                await asyncio.sleep(0.01)
        assert not health.is_healthy(names.COLLECTOR_GPU)
        assert busy(collector) == {}
        release.set()  # the driver answers again: sampling resumes
        hang = False
        async with asyncio.timeout(5.0):
            while not collector.readings:
                await asyncio.sleep(0.01)
    finally:
        release.set()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def exited_while_the_driver_hangs(process: subprocess.Popen[bytes], log: Path) -> None:
    """The exporter ended after its SIGTERM while the NVML call still hangs (an hour, or until the test lets it go):
    so it did not wait on the driver. Its time to exit is no check here (a loaded CI machine took 5.8 s to stop an
    exporter that stops within STOP_WAIT_S); 60 s is a hang guard far inside the driver's hang."""
    try:
        process.wait(timeout=60.0)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running 60 s after SIGTERM, waiting on the driver:\n{log.read_text()}") from None


def test_a_stop_while_an_nvml_call_hangs_does_not_wait_on_the_driver(tmp_path: Path) -> None:
    """SIGTERM while an NVML call hangs (a GPU fallen off the bus, as its node is drained): the exporter must
    still exit at once, not sit out the pod's grace period until the kubelet kills it."""
    (tmp_path / "hung_nvml_exporter.py").write_text(
        "import functools, sys, time\n"
        "from prometheus_client import CollectorRegistry\n"
        "from exporter.app import metrics_app, run\n"
        "from exporter.collectors.gpu import GpuCollector\n"
        "from exporter.collectors.health import CollectorHealth\n"
        "def hung_driver():\n"
        "    time.sleep(3600)\n"
        "health, registry = CollectorHealth(), CollectorRegistry(auto_describe=False)\n"
        "gpu = GpuCollector(health, open_nvml=hung_driver)\n"
        "registry.register(gpu)\n"
        "run(metrics_app(registry, health, [functools.partial(gpu.run, 0.05)]), '127.0.0.1', int(sys.argv[1]))\n"
    )
    port = free_port()
    search = os.pathsep.join([str(tmp_path), str(Path(__file__).parents[2])])
    log = tmp_path / "exporter.log"
    with running(["hung_nvml_exporter", str(port)], f"http://127.0.0.1:{port}/healthz", log,
                 env={"PYTHONPATH": search}) as process:
        time.sleep(0.3)  # the first NVML pass has started, and hangs
        process.send_signal(signal.SIGTERM)
        exited_while_the_driver_hangs(process, log)
        assert process.returncode == 0, log.read_text()


def test_a_stop_after_an_nvml_call_has_hung_past_the_overrun_does_not_wait_on_the_driver(tmp_path: Path) -> None:
    """The same stop, once the hung call has outlasted the pass's overrun (5 s: the GPU series are dropped and a
    timeout counted), which is when a GPU has really fallen off the bus and its node is drained. The exporter
    exited only once the call returned: the pod sat out its grace period until the kubelet's SIGKILL.

    The real exporter process, on the fake NVML: the samples call of GPU 0 blocks until the test lets it go."""
    with exporter_in_a_hung_pass(tmp_path) as (process, log):
        process.send_signal(signal.SIGTERM)
        exited_while_the_driver_hangs(process, log)
    assert process.returncode == 0, log.read_text()
    assert "stopping while an NVML call has not returned: NVML is not shut down" in log.read_text()
