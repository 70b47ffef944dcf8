"""The log of runtimes whose exporters keep per-model use for less than `target_lru_age_s`: a line when it appears
or its numbers change, one when it is gone, nothing at the refreshes between; a fleet's in one line with the count.
Each runtime's own warning stays in its /debug document (`warnings`) for as long as it lasts."""

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
FLAG = "--model-recency-horizon"


class ModelFleet(SourceDefaults):
    """`runtimes` runtimes of two Ready pods each, fresh, reporting per-model use with exporters of `horizon_s`."""

    name = "test"
    errors: dict[str, int] = {}

    def __init__(self, runtimes: int, horizon_s: float) -> None:
        self.keys = [RuntimeKey("ml", f"modelmesh-serving-{i:04d}") for i in range(runtimes)]
        self.horizon_s = horizon_s

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        return [RuntimeSnapshot(key, tuple(PodSample(
            f"{key.deployment}-{j}", sampled_at=now - 1, gpu_busy=0.5, requests_per_second=5.0, queue_delay_s=0.0,
            cache_used_ratio=0.5, models_loaded=5.0, recent_models={f"m{j}": now - 1},
            recency_horizon_s=self.horizon_s) for j in range(2)), now, replicas=2)
            for key in self.keys]

    async def close(self) -> None:
        return None


def said(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(record.levelno, record.getMessage()) for record in caplog.records if FLAG in record.getMessage()]


async def refresh(refresher: Refresher, clock: list[float], times: int) -> None:
    for _ in range(times):
        await refresher.refresh_once()
        clock[0] += 15.0


async def test_one_runtime_is_said_once_when_it_appears_again_when_it_changes_and_once_when_gone(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    fleet, clock = ModelFleet(1, horizon_s=300.0), [NOW]
    refresher = Refresher(fleet, PolicyBook(RuntimePolicy()), AdapterMetrics(), clock=lambda: clock[0],
                          monotonic=lambda: clock[0])
    await refresh(refresher, clock, 4)
    assert [level for level, _ in said(caplog)] == [logging.WARNING]
    assert "300 s" in said(caplog)[0][1] and "target_lru_age_s 600 s" in said(caplog)[0][1]
    assert any(FLAG in warning for warning in refresher.views[fleet.keys[0]].warnings)  # what /debug shows

    fleet.horizon_s = 120.0  # the sidecars rolled with a shorter one: said again, in its numbers
    await refresh(refresher, clock, 3)
    assert len(said(caplog)) == 2 and "120 s" in said(caplog)[1][1]

    fleet.horizon_s = 3600.0  # fixed: said once, and /debug has no warning
    await refresh(refresher, clock, 3)
    assert [level for level, _ in said(caplog)] == [logging.WARNING, logging.WARNING, logging.INFO]
    assert "may fall again" in said(caplog)[2][1]
    assert refresher.views[fleet.keys[0]].warnings == ()


async def test_a_fleet_with_a_short_horizon_is_one_line_with_its_count(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    fleet, clock = ModelFleet(200, horizon_s=300.0), [NOW]
    refresher = Refresher(fleet, PolicyBook(RuntimePolicy()), AdapterMetrics(), clock=lambda: clock[0],
                          monotonic=lambda: clock[0])
    await refresh(refresher, clock, 3)
    lines = said(caplog)
    assert len(lines) == 1, lines[:3]
    assert lines[0][1].startswith("200 runtimes: their exporters keep per-model use for less than target_lru_age_s")
    assert "ml/modelmesh-serving-0000" in lines[0][1] and "and 190 more" in lines[0][1], lines[0][1]
    assert "EXPORTER_MODEL_RECENCY_HORIZON" in lines[0][1]
