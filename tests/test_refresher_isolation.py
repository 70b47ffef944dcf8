"""One runtime whose decision raises does not take the others down with it: they are decided and served as
usual, it is left out (the API answers 404, its HPA holds), the failure is logged once, and its memory waits
for it."""

from __future__ import annotations

import logging
import math

import pytest

from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot
from autoscaler.names import ServedMetric
from autoscaler.policies.config import PolicyBook
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.base import SourceDefaults

GOOD, BROKEN = RuntimeKey("ml", "modelmesh-serving-good"), RuntimeKey("ml", "modelmesh-serving-broken")


class TwoRuntimes(SourceDefaults):
    """Two runtimes of two pods at GPU 0.9; `garbled` makes one pod of BROKEN carry a NaN, as a source that
    broke its promise (`PodSample`: values are finite and >= 0) would hand over."""

    name = "test"
    errors: dict[str, int] = {}

    def __init__(self) -> None:
        self.garbled = False

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        def pods(broken: bool) -> tuple[PodSample, ...]:
            busy = math.nan if broken else 0.9
            return (PodSample("p-0", sampled_at=now - 1, gpu_busy=busy, requests_per_second=10.0),
                    PodSample("p-1", sampled_at=now - 1, gpu_busy=0.9, requests_per_second=10.0))
        return [RuntimeSnapshot(GOOD, pods(False), now, replicas=2),
                RuntimeSnapshot(BROKEN, pods(self.garbled), now, replicas=2)]

    async def close(self) -> None:
        return None


async def test_a_runtime_whose_decision_raises_is_left_out_and_the_others_are_served(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = [1_700_000_000.0]
    source = TwoRuntimes()
    refresher = Refresher(source, PolicyBook(RuntimePolicy(scale_down_tau_s=0.0)), AdapterMetrics(),
                          clock=lambda: clock[0], monotonic=lambda: clock[0])
    await refresher.refresh_once()
    # Two pods at GPU 0.9 against the 0.8 target: 2 x 0.9 / 0.8 = 2.25, so 3 pods, for both runtimes.
    assert refresher.views[BROKEN].values[ServedMetric.DESIRED_REPLICAS].value == 3.0

    source.garbled = True
    with caplog.at_level(logging.ERROR, logger="autoscaler"):
        for _ in range(3):
            clock[0] += 15.0
            await refresher.refresh_once()
    assert refresher.views[GOOD].values[ServedMetric.DESIRED_REPLICAS].value == 3.0
    assert BROKEN not in refresher.views
    failures = [r for r in caplog.records if "modelmesh-serving-broken" in r.getMessage()]
    assert len(failures) == 1 and "left out" in failures[0].getMessage()

    source.garbled = False  # it decides again, from its memory: no warm-up, the same 3 pods
    clock[0] += 15.0
    await refresher.refresh_once()
    assert refresher.views[BROKEN].known
    assert refresher.views[BROKEN].values[ServedMetric.DESIRED_REPLICAS].value == 3.0
