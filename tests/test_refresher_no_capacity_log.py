"""A fleet of runtimes without a capacity signal (no GPU reported, no `target_rps_per_pod`) is one warning, not
one per runtime: at a thousand CPU runtimes the first refresh after every start wrote a thousand lines saying
the same setting is missing. Each runtime's own warning stays in its `/debug` document (`warnings`)."""

from __future__ import annotations

import logging

import pytest

from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot
from autoscaler.policies.config import PolicyBook
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.base import SourceDefaults

NOW = 1_700_000_000.0
WORDS = "no capacity signal"


class CpuFleet(SourceDefaults):
    """`runtimes` CPU runtimes of two Ready pods each, fresh, no GPU reported."""

    name = "test"
    errors: dict[str, int] = {}

    def __init__(self, runtimes: int) -> None:
        self.keys = [RuntimeKey("ml", f"modelmesh-serving-cpu-{i:04d}") for i in range(runtimes)]

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        return [RuntimeSnapshot(key, tuple(PodSample(f"{key.deployment}-{j}", sampled_at=now - 1,
                                                     requests_per_second=5.0, queue_delay_s=0.0)
                                           for j in range(2)), now, replicas=2)
                for key in self.keys]

    async def close(self) -> None:
        return None


def warned(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records
            if record.levelno == logging.WARNING and WORDS in record.getMessage()]


async def refreshed(fleet: CpuFleet, times: int, clock: list[float]) -> Refresher:
    refresher = Refresher(fleet, PolicyBook(RuntimePolicy()), AdapterMetrics(), clock=lambda: clock[0],
                          monotonic=lambda: clock[0])
    for _ in range(times):
        await refresher.refresh_once()
        clock[0] += 15.0
    return refresher


async def test_a_thousand_runtimes_without_a_capacity_signal_are_one_warning_with_their_count(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    fleet = CpuFleet(1000)
    refresher = await refreshed(fleet, 3, [NOW])
    lines = warned(caplog)
    assert len(lines) == 1, lines[:3]
    assert lines[0].startswith("1000 runtimes: no capacity signal"), lines[0]
    assert "ml/modelmesh-serving-cpu-0000" in lines[0] and "and 990 more" in lines[0], lines[0]
    assert "target_rps_per_pod" in lines[0], lines[0]
    for key in (fleet.keys[0], fleet.keys[-1]):  # what /debug shows, per runtime
        assert any(WORDS in warning and str(key) in warning for warning in refresher.views[key].warnings)


async def test_a_runtime_that_appears_later_is_warned_about_alone_in_its_own_words(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    fleet = CpuFleet(20)
    clock = [NOW]
    refresher = await refreshed(fleet, 2, clock)
    fleet.keys.append(RuntimeKey("ml", "modelmesh-serving-late"))
    for _ in range(2):
        await refresher.refresh_once()
        clock[0] += 15.0
    lines = warned(caplog)
    assert len(lines) == 2, lines
    assert lines[1].startswith("runtime ml/modelmesh-serving-late: no capacity signal"), lines[1]
