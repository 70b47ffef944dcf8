"""The GPU collector's test rig, shared by the modules that drive `GpuCollector` against the fake NVML: one clock
for the collector and the fake's samples, the health and collector fixtures built on it, and the real exporter
process caught in an NVML pass hung in the driver (`exporter_in_a_hung_pass`).

A module imports the fixtures it uses by name (pytest finds fixtures among a module's globals) and keeps its own
`fake` fixture, the node it tests, which these take. Not in conftest.py: the ModelMesh rig there has a `Clock` of
its own.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from exporter.collectors.gpu import GpuCollector
from exporter.collectors.health import CollectorHealth
from tests.fakes.nvml import FakeNvml
from tests.support.processes import free_port, running, wait_until_logged

START = 1_700_000_000.0  # a whole second, so the fake's 1 s sample grid lines up with it


class Clock:
    """The collector's clock and the fake NVML's sample clock, stepped together."""

    def __init__(self, fake: FakeNvml | None, start: float = START, nvml_ahead_s: float = 0.0) -> None:
        """`nvml_ahead_s`: how far the fake NVML's sample clock runs ahead of ours (negative: behind)."""
        self.now = start
        self.fake = fake
        self.nvml_ahead_s = nvml_ahead_s
        self._sync()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self._sync()

    def _sync(self) -> None:
        if self.fake is not None:
            self.fake.set_time(self.now + self.nvml_ahead_s)


@pytest.fixture
def clock(fake: FakeNvml) -> Clock:
    return Clock(fake)


@pytest.fixture
def health(clock: Clock) -> CollectorHealth:
    return CollectorHealth(clock=clock)


@pytest.fixture
def collector(health: CollectorHealth, clock: Clock) -> Iterator[GpuCollector]:
    """Closed after the test, so no NVML handle outlives the fake library it came from."""
    gpu = GpuCollector(health, window_s=10.0, clock=clock, monotonic=clock)
    yield gpu
    gpu.close()


@contextmanager
def exporter_in_a_hung_pass(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """The real exporter process on one fake GPU whose samples call blocks in the driver, once a pass is seen
    hung: (the process, its log). The call is let go as the block ends, so a process left running stops then."""
    fake = FakeNvml.create(tmp_path, gpus=1)
    fake.set_gpu(0, util=40)
    port = free_port()
    log = tmp_path / "exporter.log"
    with running(["exporter.cli", "--listen", f"127.0.0.1:{port}", "--modelmesh-url", "http://127.0.0.1:9/metrics"],
                 f"http://127.0.0.1:{port}/healthz", log, env=fake.env()) as process:
        try:
            wait_until_logged(process, log, "NVML initialised")
            fake.set_gpu(0, hang="samples")  # the next pass blocks in the driver, and a stop waits on it
            wait_until_logged(process, log, "NVML pass still running after")
            yield process, log
        finally:
            fake.set_gpu(0, hang="")
