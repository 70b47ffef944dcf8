"""The GPU collector's intervals under a wall clock that steps (an NTP correction, a resumed VM), as the real exporter
process on the fake NVML shows them on /metrics, its wall clock moved by libfaketime (`tests.fakes.node_clock`).

The MIG device re-listing (every `MIG_RECHECK_S`), the once-a-minute re-asking of refused queries
(`MEMORY_ASKED_AGAIN_S`) and NVML's re-initialisation backoff were timed on the wall clock: a step back delayed each
by the size of the step (an hour back: a MIG device created in that hour was never served, a GPU whose memory came
back had no memory series, a driver that came back was not re-initialised), a step forward made them happen at once.

Each exporter starts with its wall clock an hour ahead, which NTP then puts right: a step back of an hour to the true
time. libfaketime now and then answers one `time.time()` of a threaded process with the true time, as if there were
no offset: a step back from the true time to an hour behind it let such a reading bring the wall-clock intervals on
(the driver test passed with them put back), where from an hour ahead a stray true time is where the clock is anyway.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from exporter import names
from exporter.gpu_memory_reads import MEMORY_ASKED_AGAIN_S
from exporter.gpu_mig_watch import MIG_RECHECK_S
from tests.fakes.node_clock import step_clock, steppable_clock_env
from tests.fakes.nvml import DRIVER_NOT_LOADED, GIB, NOT_SUPPORTED, FakeNvml
from tests.support.processes import free_port, http_get, poll, running

pytestmark = pytest.mark.slow

HOUR_AHEAD_S = 3600.0
RETRY_MAX_S = 30.0
"""The exporter's longest wait between NVML re-initialisations (docs/operations.md)."""
LOADED_S = 60.0
"""What a loaded 2-core CI machine may add to an interval before /metrics shows its outcome (the exporter's start,
its passes, the scrape): the waits below are the interval plus this, where they were the interval plus 0 to 30 s.
Still far under the hour that the step back put each off by on the wall clock."""


@contextmanager
def exporter_on(fake: FakeNvml, directory: Path) -> Iterator[tuple[str, Path, Path]]:
    """The real exporter on `fake`, its wall clock an hour ahead and steppable: (its /metrics URL, its clock's offset
    file, its log)."""
    port = free_port()
    log = directory / "exporter.log"
    offset = directory / "exporter-clock"
    env = {**fake.env(), **steppable_clock_env(offset)}
    step_clock(offset, HOUR_AHEAD_S)
    with running(["exporter.cli", "--listen", f"127.0.0.1:{port}", "--modelmesh-url", "http://127.0.0.1:9/metrics"],
                 f"http://127.0.0.1:{port}/healthz", log, env=env):
        yield f"http://127.0.0.1:{port}/metrics", offset, log


def labels_of(text: str, family: str) -> set[str]:
    return set(re.findall(rf'{family}{{gpu="([^"]+)"', text))


def served(url: str, family: str, labels: set[str]) -> str | None:
    """/metrics once `family` has series for exactly the GPUs and MIG devices `labels`."""
    text = http_get(url)[1]
    return text if labels_of(text, family) == labels else None


def test_a_mig_device_created_after_the_clock_stepped_back_is_served_within_the_recheck(tmp_path: Path) -> None:
    fake = FakeNvml.create(tmp_path, gpus=2)
    fake.set_gpu(0, util=40)
    fake.set_gpu(1, mig=3, mig_created=1)
    with exporter_on(fake, tmp_path) as (url, offset, log):
        poll(lambda: served(url, names.GPU_MEMORY_TOTAL_BYTES, {"0", "1/0"}), timeout=LOADED_S)
        step_clock(offset, 0.0)  # put right: an hour back
        fake.set_gpu(1, mig_created=2)
        poll(lambda: served(url, names.GPU_MEMORY_TOTAL_BYTES, {"0", "1/0", "1/1"}), timeout=MIG_RECHECK_S + LOADED_S)
    assert "created GPU 1/1" in log.read_text()


def test_a_gpu_whose_memory_comes_back_after_the_clock_stepped_back_is_read_within_a_minute(tmp_path: Path) -> None:
    fake = FakeNvml.create(tmp_path, gpus=1)
    fake.set_gpu(0, util=40, memory_error=NOT_SUPPORTED, mem_used=20 * GIB)
    with exporter_on(fake, tmp_path) as (url, offset, log):
        poll(lambda: "reports no memory use" in log.read_text() or None, timeout=LOADED_S)
        step_clock(offset, 0.0)  # put right: an hour back
        fake.set_gpu(0, memory_error=0)  # a driver upgrade that reports it after all
        text = poll(lambda: served(url, names.GPU_MEMORY_USED_BYTES, {"0"}), timeout=MEMORY_ASKED_AGAIN_S + LOADED_S)
    used = re.findall(rf'{names.GPU_MEMORY_USED_BYTES}{{gpu="0",uuid="{fake.gpus[0].uuid}"}} (\S+)', text)
    assert [float(value) for value in used] == [20 * GIB], text


def test_a_driver_back_after_the_clock_stepped_back_is_found_within_the_longest_retry(tmp_path: Path) -> None:
    fake = FakeNvml.create(tmp_path, gpus=1)
    fake.set_gpu(0, util=40)
    fake.set(init_error=DRIVER_NOT_LOADED)
    with exporter_on(fake, tmp_path) as (url, offset, log):
        poll(lambda: "Driver Not Loaded" in log.read_text() or None, timeout=LOADED_S)
        step_clock(offset, 0.0)  # put right: an hour back
        fake.set(init_error=0)
        poll(lambda: served(url, names.GPU_BUSY_RATIO, {"0"}), timeout=2 * RETRY_MAX_S + LOADED_S)
    assert "NVML initialised" in log.read_text()
