"""NVML failures a real node shows, from the fake NVML up to what the adapter reads: the exporter's /metrics as
Prometheus takes it (promtool-clean; which series, `collector_success`, the error counter, the GPU freshness
timestamp) and the same text read by the adapter's own reader (`read_exporter_text`). A GPU that cannot be
read must never read as an idle one: while the collector fails, the pod's GPU busy is unknown (the GPUs that
still answer are not the pod: a lost busy GPU beside an idle one read the pod idle), and the GPU freshness stops
advancing, so the adapter holds rather than scales down.

Faults: NVML_ERROR_GPU_IS_LOST on one GPU mid-run, NVML_ERROR_DRIVER_NOT_LOADED at start, NVML_ERROR_TIMEOUT
from a GPU, a GPU that is gone after a driver reload, and NVML_ERROR_NO_PERMISSION from one GPU's memory query.
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pynvml
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.model import PodSample
from autoscaler.sources.exposition import read_exporter_text
from exporter import names
from exporter.collectors.gpu import GpuCollector
from exporter.collectors.health import CollectorHealth
from tests.exporter import gpu_rig
from tests.exporter.gpu_rig import START, Clock
from tests.fakes.nvml import DRIVER_NOT_LOADED, GPU_IS_LOST, NO_PERMISSION, FakeNvml, default_uuid
from tests.fakes.prometheus import PROMTOOL_BIN

TIMEOUT = pynvml.NVML_ERROR_TIMEOUT

clock = gpu_rig.clock  # the GPU rig's fixture, found by name


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    """Two GPUs, 80% and 60% busy, NVML sampling once a second."""
    fake = FakeNvml.create(tmp_path, gpus=2)
    fake.set(sample_period_us=1_000_000, sample_buffer=30)
    fake.set_gpu(0, util=80)
    fake.set_gpu(1, util=60)
    fake.install(monkeypatch)
    return fake


_CLEAN_SHAPES: set[str] = set()
"""The scrapes promtool passed, each without its sample values."""


def assert_promtool_clean(text: str) -> None:
    """`promtool check metrics` passes `text`: run on the first scrape of each shape (families, HELP, TYPE, series),
    as the sample values (prometheus_client's float formatting) are all promtool's lint does not look at; the
    scrapes of a run after each pass differ from the one before only there (267 promtool runs of 58 ms each in
    this file, for about 20 shapes)."""
    shape = "\n".join(line if line.startswith("#") else line.rpartition(" ")[0] for line in text.splitlines())
    if shape in _CLEAN_SHAPES:
        return
    done = subprocess.run([PROMTOOL_BIN, "check", "metrics"], input=text, capture_output=True, text=True,
                          timeout=30, check=False)
    assert (done.returncode, done.stderr.strip()) == (0, ""), text
    _CLEAN_SHAPES.add(shape)


class Exporter:
    """The GPU side of one exporter: its collector and health, scraped as /metrics serves them."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.health = CollectorHealth(clock=clock)
        self.gpu = GpuCollector(self.health, window_s=10.0, clock=clock, monotonic=clock)
        self.registry = CollectorRegistry()
        self.registry.register(self.gpu)
        self.registry.register(self.health)

    def scrape(self) -> str:
        text = generate_latest(self.registry).decode()
        assert_promtool_clean(text)
        return text

    def series(self, name: str) -> dict[str, float]:
        """{gpu label, or collector / reason: value} of one family in a scrape."""
        found: dict[str, float] = {}
        for family in text_string_to_metric_families(self.scrape()):
            for sample in family.samples:
                if sample.name == name:
                    labels = sample.labels
                    found[labels.get("gpu") or labels.get("reason") or labels.get("collector", "")] = sample.value
        return found

    def gpu_success(self) -> float:
        return self.series(names.COLLECTOR_SUCCESS)[names.COLLECTOR_GPU]

    def nvml_errors(self) -> float:
        return self.series(names.SCRAPE_ERRORS_TOTAL).get(names.REASON_NVML, 0.0)

    def adapter_reads(self) -> PodSample:
        """The pod as the adapter reads this scrape (the GPU part: no ModelMesh series here)."""
        return read_exporter_text(self.scrape(), "pod-0", True, self.clock.now).sample


@pytest.fixture
def exporter(clock: Clock) -> Iterator[Exporter]:
    made = Exporter(clock)
    yield made
    made.gpu.close()


def run_for(exporter: Exporter, seconds: int) -> list[PodSample]:
    """One pass a second for `seconds`, and what the adapter read after each."""
    read = []
    for _ in range(seconds):
        exporter.clock.advance(1)
        exporter.gpu.sample_once()
        read.append(exporter.adapter_reads())
    return read


def test_a_gpu_lost_mid_run_is_never_read_as_idle(fake: FakeNvml, exporter: Exporter) -> None:
    exporter.gpu.sample_once()
    healthy = exporter.adapter_reads()
    assert healthy.gpu_busy == pytest.approx(0.7)
    assert healthy.gpu_sampled_at == START

    fake.set_gpu(1, error=GPU_IS_LOST)
    read = run_for(exporter, 60)  # through several re-initialisations, each finding it lost again

    assert exporter.series(names.GPU_BUSY_RATIO) == {"0": pytest.approx(0.8)}  # GPU 1's series is gone
    assert exporter.gpu_success() == 0
    assert exporter.nvml_errors() >= 1
    assert {(pod.gpu_busy, pod.gpu_sampled_at) for pod in read} == {(None, None)}  # unknown, never 0 nor GPU 0's


def test_a_lost_busy_gpu_beside_an_idle_one_is_unknown_not_the_idle_ones_busy(
    fake: FakeNvml, exporter: Exporter
) -> None:
    """The adapter averaged the GPUs still served, with the success time of the pass before, still fresh: a pod
    whose 90%-busy GPU fell off the bus read as its idle neighbour's 5% until that time aged past
    max_staleness_s, lowering the runtime's GPU busy and the pod's need."""
    fake.set_gpu(0, util=5)
    fake.set_gpu(1, util=90)
    before = run_for(exporter, 3)[-1]
    assert before.gpu_busy == pytest.approx(0.475)  # (0.05 + 0.90) / 2

    fake.set_gpu(1, error=GPU_IS_LOST)
    after = run_for(exporter, 1)[-1]
    assert exporter.series(names.GPU_BUSY_RATIO) == {"0": pytest.approx(0.05)}
    assert (after.gpu_busy, after.gpu_sampled_at) == (None, None)  # read 0.05, sampled a second before


def test_the_driver_not_loaded_at_start_is_no_gpu_signal_then_the_gpus_once_it_loads(
    fake: FakeNvml, exporter: Exporter
) -> None:
    """The GPU operator's driver container is still starting when the runtime pod does."""
    fake.set(init_error=DRIVER_NOT_LOADED)
    read = run_for(exporter, 10)

    assert exporter.series(names.GPU_BUSY_RATIO) == {}
    assert exporter.gpu_success() == 0
    assert names.COLLECTOR_GPU not in exporter.series(names.LAST_SUCCESS_TIMESTAMP)
    assert {(pod.gpu_busy, pod.gpu_sampled_at) for pod in read} == {(None, None)}  # unknown, not idle

    fake.set(init_error=0)
    read = run_for(exporter, 31)  # the retry backoff is 30 s at most

    assert exporter.gpu_success() == 1
    assert read[-1].gpu_busy == pytest.approx(0.7)
    assert read[-1].gpu_sampled_at == exporter.clock.now


def test_an_nvml_timeout_drops_that_gpu_until_it_answers_again(fake: FakeNvml, exporter: Exporter) -> None:
    exporter.gpu.sample_once()
    fake.set_gpu(1, samples_error=TIMEOUT, util_error=TIMEOUT)
    read = run_for(exporter, 5)

    assert exporter.series(names.GPU_BUSY_RATIO) == {"0": pytest.approx(0.8)}
    assert exporter.gpu_success() == 0
    assert {(pod.gpu_busy, pod.gpu_sampled_at) for pod in read} == {(None, None)}

    fake.set_gpu(1, samples_error=0, util_error=0)
    read = run_for(exporter, 31)

    assert exporter.gpu_success() == 1
    assert set(exporter.series(names.GPU_BUSY_RATIO)) == {"0", "1"}
    assert read[-1].gpu_busy == pytest.approx(0.7)


def test_a_gpu_gone_after_a_driver_reload_is_a_failure_not_a_smaller_node(
    fake: FakeNvml, exporter: Exporter
) -> None:
    """The driver is reloaded (an upgrade by the GPU operator, a GPU fallen off the bus reset) and comes back
    without GPU 1. The sidecar reports every GPU it sees: a GPU it sampled that is no longer there is a lost GPU
    (docs/design.md: a GPU lost is collector_success 0), not a node that always had one GPU fewer."""
    exporter.gpu.sample_once()
    assert exporter.gpu_success() == 1
    for index in (0, 1):
        fake.set_gpu(index, error=DRIVER_NOT_LOADED)
    run_for(exporter, 2)
    assert exporter.gpu_success() == 0

    del fake.gpus[1]
    fake.set_gpu(0, error=0)
    read = run_for(exporter, 31)

    assert exporter.series(names.GPU_BUSY_RATIO) == {"0": pytest.approx(0.8)}
    assert exporter.gpu_success() == 0
    # Unknown while NVML is down, and while GPU 1 is lost: never GPU 0's busy alone.
    assert {(pod.gpu_busy, pod.gpu_sampled_at) for pod in read} == {(None, None)}

    fake.add_gpu(util=60)  # it is back (a reset that worked)
    assert fake.gpus[1].uuid == default_uuid(1)
    read = run_for(exporter, 31)
    assert exporter.gpu_success() == 1
    assert read[-1].gpu_busy == pytest.approx(0.7)


def test_a_gpu_whose_memory_nvml_will_not_tell_this_container_keeps_every_gpus_busy(
    fake: FakeNvml, exporter: Exporter, caplog: pytest.LogCaptureFixture,
) -> None:
    """nvmlDeviceGetMemoryInfo answers NO_PERMISSION for a device this container may not ask (nvml.h; seen in
    containers on MIG GPUs, NVIDIA/nvidia-container-toolkit#842). That is one device's one query, not NVML
    gone: it dropped every GPU of the pod, at every re-initialisation, so the pod's GPU signal was never fresh."""
    fake.set_gpu(1, memory_error=NO_PERMISSION, mem_used=3 << 30)
    fake.set_gpu(0, mem_used=5 << 30)
    with caplog.at_level(logging.INFO, logger="exporter"):
        read = run_for(exporter, 40)

    assert exporter.series(names.GPU_BUSY_RATIO) == {"0": pytest.approx(0.8), "1": pytest.approx(0.6)}
    assert exporter.series(names.GPU_MEMORY_USED_BYTES) == {"0": 5 << 30}  # GPU 1's is left out, not 0
    assert exporter.gpu_success() == 1
    assert exporter.nvml_errors() == 0
    assert read[-1].gpu_busy == pytest.approx(0.7)
    assert read[-1].gpu_sampled_at == exporter.clock.now
    said = [r.getMessage() for r in caplog.records if default_uuid(1) in r.getMessage() and "memory" in r.getMessage()]
    assert len(said) == 1 and "Insufficient Permissions" in said[0], said
