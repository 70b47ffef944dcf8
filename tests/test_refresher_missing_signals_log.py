"""The log says what a held runtime misses as that changes, not only when it starts or stops being held.

A failure-injection run found it: GPU dropped on one pod logged `gpu missing on 1 of 4`; the fault moved to the
request rate of another pod, then the GPU went on three pods, and the log still said `gpu missing on 1 of 4`
(only /debug was current). The refresher here is the real one, deciding with the shipped policies; the source is
a stand-in for the exporters, whose pods report or leave out each signal as the test says.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot
from autoscaler.policies.config import PolicyBook
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.base import SourceDefaults
from autoscaler.transition_flaps import FLAP_REFRESHES
from autoscaler.transition_log import Missing, worth_saying
from tests.hardening.test_fleet_observability import runtime_lines
from tests.policies.builders import PROPERTIES
from tests.support.log_lines import LineCatcher

RUNTIME = RuntimeKey("bench", "modelmesh-serving-x")


class LeavingOutSource(SourceDefaults):
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


FLIPS = {"none": ({}, {}), "gpu": ({3}, set()), "requests": (set(), {2})}
"""What the stand-in's runtime misses at a refresh: nothing, the GPU on pod 3, or the request rate on pod 2."""
SAYS = {"none": "4/4 ready pods fresh; serving", "gpu": "gpu missing on 1 of 4 ready pods",
        "requests": "requests missing on 1 of 4 ready pods"}
"""What a line about each state says."""


async def refresh_through(states: list[str]) -> list[list[str]]:
    """The runtime's lines at each refresh, its pods missing what each of `states` says in turn (after a first
    refresh with nothing missing)."""
    source = LeavingOutSource([RUNTIME])
    refresher = Refresher(source, PolicyBook(), AdapterMetrics())
    logger = logging.getLogger("autoscaler.refresher")
    catcher, level = LineCatcher(), logger.level
    logger.addHandler(catcher)
    logger.setLevel(logging.INFO)
    try:
        await refresher.refresh_once()
        catcher.take()
        said = []
        for state in states:
            no_gpu, no_requests = FLIPS[state]
            source.no_gpu, source.no_requests = {RUNTIME: set(no_gpu)}, {RUNTIME: set(no_requests)}
            await refresher.refresh_once()
            said.append(catcher.take())
        return said
    finally:
        logger.removeHandler(catcher)
        logger.setLevel(level)


async def test_a_signal_flapping_at_every_refresh_is_said_when_it_starts_and_when_it_settles() -> None:
    """Was: a GPU reading missing at every other refresh (a GPU collector timing out now and then) logged a line
    at every refresh, 'gpu missing' and 'serving' in turn, for as long as it went on."""
    said = await refresh_through(["gpu", "none"] * 20 + ["gpu"] * (FLAP_REFRESHES + 1))
    lines = [line for lines in said for line in lines]
    assert len(lines) <= 5, lines  # gpu missing, serving, gpu missing again (a blip), flapping, steady
    [flapping] = [line for line in lines if "flapping between" in line]
    assert "gpu missing" in flapping and "serving" in flapping, flapping
    assert f"until it keeps one state for {FLAP_REFRESHES} refreshes" in flapping, flapping
    assert "steady again after" in lines[-1] and SAYS["gpu"] in lines[-1], lines[-1]
    assert said[-1] == [lines[-1]]  # said at the refresh it settled, not before


async def test_a_flapping_runtime_that_misses_something_new_says_so() -> None:
    """Was: once flapping between 'gpu missing' and 'serving', a pod's request rate then missing at every other
    refresh for 30 refreshes was never said (counted as one more change of the flap). A state it did not flap
    between is news: a line says it is no longer flapping and what it misses now; its own flapping is said again
    once it flaps."""
    said = await refresh_through(["gpu", "none"] * 6 + ["requests", "none"] * 15)
    lines = [line for lines in said[12:] for line in lines]
    assert lines and "no longer flapping, a new state" in lines[0] and SAYS["requests"] in lines[0], lines
    assert said[12] == [lines[0]]  # at the refresh it came
    assert any("flapping between" in line and "requests missing" in line for line in lines), lines
    assert len(lines) <= 5, lines


@PROPERTIES
@given(runs=st.lists(st.tuples(st.sampled_from(sorted(FLIPS)), st.integers(1, 3)), max_size=30))
@example(runs=[("gpu", 1), ("none", 1)] * 6)
def test_flips_are_said_a_few_lines_a_window_and_the_last_line_is_true(runs: list[tuple[str, int]]) -> None:
    """However the missing signals come and go: a line back to a state a line said within `FLAP_REFRESHES`
    refreshes (a return) comes at least `FLAP_REFRESHES` refreshes after the last such line, but for the line
    that says it flaps; in any `FLAP_REFRESHES` refreshes in a row the lines are at most one more than the states
    there are; and once the runtime keeps a state, the last line says that state."""
    states = [state for state, length in runs for _ in range(length)]
    final = states[-1] if states else "none"
    said = asyncio.run(refresh_through([*states, *[final] * FLAP_REFRESHES]))
    counts = [len(lines) for lines in said]
    for start in range(len(counts)):
        assert sum(counts[start:start + FLAP_REFRESHES]) <= len(FLIPS) + 1, (states, said)
    last_said: dict[str, int] = {}
    last_return: int | None = None
    for at, lines in enumerate(said):
        for line in lines:
            [state] = [state for state, says in SAYS.items() if says in line]
            if "flapping between" not in line and at - last_said.get(state, -FLAP_REFRESHES) < FLAP_REFRESHES:
                assert last_return is None or at - last_return >= FLAP_REFRESHES, (states, said)
                last_return = at
            last_said[state] = at
    lines = [line for lines in said for line in lines]
    if lines:
        assert SAYS[final] in lines[-1], (states, said)
