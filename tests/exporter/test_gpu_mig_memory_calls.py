"""In a container on a MIG GPU, NVML refuses the memory query of a MIG device (`nvmlDeviceGetMemoryInfo`,
NO_PERMISSION) for good. It was asked at every pass all the same: a driver call a second per MIG device that could
only fail. A refusal is now remembered per device and the query asked again once a minute, as a MIG device's
utilization queries are; what /metrics and the log show is the same, and memory that comes back is read again.
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
    MIG_DEVICES,
    PASS_GAPS_S,
    asked_at_most,
    mig_only_node,
    node_after,
    run_passes,
)
from tests.fakes.nvml import GIB, NO_PERMISSION


def test_a_mig_device_refused_its_memory_is_asked_again_once_a_minute_with_the_same_metrics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    fake = mig_only_node(tmp_path, monkeypatch)
    fake.set_gpu(0, memory_error=NO_PERMISSION)
    with caplog.at_level(logging.INFO):
        collector, health, clock = run_passes(fake, [1.0] * 180)
    passes = 181
    assert fake.calls("memory") <= MIG_DEVICES * (1 + 180 // ASKED_AGAIN_S), fake.calls("memory")
    _, series = scrape(collector, health)
    assert gpu_series(series, names.GPU_MEMORY_TOTAL_BYTES) == {}
    assert health_of(series) == (0.0, float(passes))  # failing for the busy ratio only MIG devices lack, as before
    said = [r.getMessage() for r in caplog.records if "reports no memory use" in r.getMessage()]
    assert len(said) == MIG_DEVICES and all("Insufficient Permissions" in line for line in said), said

    fake.set_gpu(0, memory_error=0)  # the device given to this container after all
    for _ in range(int(ASKED_AGAIN_S)):
        clock.advance(1.0)
        collector.sample_once()
    _, series = scrape(collector, health)
    assert gpu_series(series, names.GPU_MEMORY_TOTAL_BYTES) == {"0/0": 40 * GIB, "0/1": 40 * GIB}
    collector.close()


@settings(max_examples=25, deadline=None)
@given(gaps_s=PASS_GAPS_S)
def test_a_mig_device_refused_its_memory_is_asked_once_a_minute_at_most_whatever_the_passes(
    gaps_s: list[float],
) -> None:
    """Asked at the first pass, then again at the first pass a minute or more after the last refusal."""
    with node_after(gaps_s, memory_error=NO_PERMISSION) as fake:
        tries = asked_at_most(gaps_s)
        assert fake.calls("memory") <= MIG_DEVICES * tries, (fake.calls("memory"), tries)

