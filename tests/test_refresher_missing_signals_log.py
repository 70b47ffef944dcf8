"""The log says what a held runtime misses as that changes, not only when it starts or stops being held.

A failure-injection run found it: GPU dropped on one pod logged `gpu missing on 1 of 4`; the fault moved to the
request rate of another pod, then the GPU went on three pods, and the log still said `gpu missing on 1 of 4`
(only /debug was current). The refresher here is the real one, deciding with the shipped policies; the source is
a stand-in for the exporters, whose pods report or leave out each signal as the test says.
"""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot
from autoscaler.policies.config import PolicyBook
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.transition_log import Missing, worth_saying
from tests.hardening.test_fleet_observability import runtime_lines

RUNTIME = RuntimeKey("bench", "modelmesh-serving-x")


class LeavingOutSource:
    """Runtimes of `pods` pods each, every signal fresh, but those the test leaves out: `no_gpu` and `no_requests`
    name, per runtime, the pods (by index) whose answer lacks that signal."""

    name = "stand-in"

    def __init__(self, keys: list[RuntimeKey], pods: int = 4) -> None:
        self.keys, self.pods = keys, pods
        self.no_gpu: dict[RuntimeKey, set[int]] = {}
        self.no_requests: dict[RuntimeKey, set[int]] = {}
        self.errors: dict[str, int] = {}

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        return [RuntimeSnapshot(key, tuple(
            PodSample(f"{key.deployment}-{pod}", sampled_at=now - 1, queue_delay_s=0.0, models_loaded=3.0,
                      gpu_busy=None if pod in self.no_gpu.get(key, ()) else 0.5,
                      requests_per_second=None if pod in self.no_requests.get(key, ()) else 10.0)
            for pod in range(self.pods)), taken_at=now, replicas=self.pods) for key in self.keys]

    async def close(self) -> None:
        return None


async def test_a_change_in_which_signal_is_missing_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    source = LeavingOutSource([RUNTIME])
    refresher = Refresher(source, PolicyBook(), AdapterMetrics())
    caplog.set_level(logging.INFO, logger="autoscaler.refresher")
    await refresher.refresh_once()
    await refresher.refresh_once()
    runtime_lines(caplog)

    source.no_gpu = {RUNTIME: {3}}
    await refresher.refresh_once()
    [gpu_one] = runtime_lines(caplog)
    assert "gpu missing on 1 of 4 ready pods" in gpu_one

    source.no_gpu, source.no_requests = {}, {RUNTIME: {2}}  # the GPU back, the request rate gone on another pod
    await refresher.refresh_once()
    [requests_one] = runtime_lines(caplog)
    assert "requests missing on 1 of 4 ready pods" in requests_one and "gpu missing" not in requests_one

    source.no_gpu, source.no_requests = {RUNTIME: {1, 2, 3}}, {}
    await refresher.refresh_once()
    [gpu_three] = runtime_lines(caplog)
    assert "gpu missing on 3 of 4 ready pods" in gpu_three

    await refresher.refresh_once()
    assert runtime_lines(caplog) == []  # nothing changed: nothing said


async def test_a_missing_count_creeping_by_one_pod_logs_when_it_doubles(caplog: pytest.LogCaptureFixture) -> None:
    source = LeavingOutSource([RUNTIME], pods=12)
    refresher = Refresher(source, PolicyBook(), AdapterMetrics())
    caplog.set_level(logging.INFO, logger="autoscaler.refresher")
    await refresher.refresh_once()
    runtime_lines(caplog)

    said = []
    for missing in [*range(1, 9), 7, 8, 7, 8]:  # a node draining one pod a refresh, then wavering
        source.no_gpu = {RUNTIME: set(range(missing))}
        await refresher.refresh_once()
        said += runtime_lines(caplog)
    assert [line.split("; ")[1] for line in said] == [
        f"gpu missing on {count} of 12 ready pods" for count in (1, 2, 4, 8)], said


async def test_a_fleet_whose_missing_signal_moves_is_logged_in_a_few_lines(caplog: pytest.LogCaptureFixture) -> None:
    keys = [RuntimeKey("fleet", f"rt-{n:03d}") for n in range(300)]
    source = LeavingOutSource(keys, pods=2)
    refresher = Refresher(source, PolicyBook(), AdapterMetrics())
    caplog.set_level(logging.INFO, logger="autoscaler.refresher")
    await refresher.refresh_once()
    source.no_gpu = {key: {1} for key in keys}
    await refresher.refresh_once()
    runtime_lines(caplog)

    source.no_gpu, source.no_requests = {}, {key: {0} for key in keys}
    await refresher.refresh_once()
    [moved] = runtime_lines(caplog)
    assert moved.startswith("300 runtimes now holding values (some Ready pods not fresh: requests missing): "), moved
    assert "requests missing on 1 of 2 ready pods" in moved


Counts = st.lists(st.sampled_from([-1, 1]), max_size=60)


@given(start=st.integers(1, 500), steps=Counts)
def test_a_count_moving_one_pod_at_a_time_is_said_at_most_every_other_refresh(start: int, steps: list[int]) -> None:
    """However a count of pods wanders by one (staying above zero), at most about half its refreshes log."""
    said: Missing = (("gpu", start),)
    count, lines = start, 0
    for step in steps:
        count = max(1, count + step)
        now: Missing = (("gpu", count),)
        if worth_saying(said, now):
            said, lines = now, lines + 1
    assert lines <= len(steps) // 2 + 1


@given(said=st.integers(1, 1000), now=st.integers(1, 1000))
def test_a_count_is_said_again_when_it_doubles_or_falls_below_half(said: int, now: int) -> None:
    assert worth_saying((("gpu", said),), (("gpu", now),)) == (now >= 2 * said or 2 * now < said)


@given(said=st.sets(st.sampled_from(["gpu", "requests", "queue", "cache"])),
       now=st.sets(st.sampled_from(["gpu", "requests", "queue", "cache"])))
def test_any_change_in_which_signals_are_missing_is_said(said: set[str], now: set[str]) -> None:
    order = ["gpu", "requests", "queue", "cache"]
    before = tuple((signal, 1) for signal in order if signal in said)
    after = tuple((signal, 1) for signal in order if signal in now)
    assert worth_saying(before, after) == (said != now)
