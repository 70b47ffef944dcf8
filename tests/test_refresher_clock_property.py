"""Promises of the running clock over random schedules: a wall-clock step changes no served value, and a pause
never makes a value fall faster than an adapter that refreshed on time through it (docs/design.md, Slow
scale-down). Each schedule is a list of refreshes: the monotonic seconds since the one before, how far the wall
clock stepped in between, and the GPU busy the six pods then report."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.names import ServedMetric
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.refresher import Refresher
from tests.policies.builders import PROPERTIES
from tests.support.log_lines import catching
from tests.test_refresher_clock import INTERVAL_S, KEY, PROMETHEUS, Clocks, GpuSource, HungSource

CAP_S = 3 * INTERVAL_S
"""What a pause counts for at most (three refresh intervals): longer gaps are what the filled-in run splits."""


@dataclass(frozen=True)
class Refresh:
    gap_s: int
    step_s: int
    busy: float


REFRESHES = st.builds(
    Refresh,
    gap_s=st.one_of(st.just(int(INTERVAL_S)), st.integers(1, int(CAP_S)), st.integers(int(CAP_S) + 1, 4000)),
    step_s=st.one_of(st.just(0), st.integers(-7200, 7200)),
    busy=st.sampled_from([0.1, 0.2, 0.5, 0.8, 0.95]),
)
SCHEDULES = st.lists(REFRESHES, min_size=1, max_size=12)
Values = dict[ServedMetric, float | None]


async def served(schedule: Sequence[Refresh], *, steps: bool, fill_pauses: bool) -> list[Values]:
    """The values served after each refresh of `schedule`, from a runtime that starts at 6 pods busy 0.8.

    `steps`: the wall clock steps as the schedule says (else it only passes). `fill_pauses`: a gap longer than
    `CAP_S` is instead refreshed on time all through (every `INTERVAL_S` at most, the same load throughout), as
    an adapter that was never paused; the values are still read only at the schedule's own refreshes."""
    clocks = Clocks()
    source = GpuSource(busy=0.8)
    refresher: Refresher = clocks.refresher(source, RuntimePolicy(scale_down_tau_s=300.0))
    await refresher.refresh_once()
    seen: list[Values] = []
    for refresh in schedule:
        source.busy = refresh.busy
        parts = math.ceil(refresh.gap_s / INTERVAL_S) if fill_pauses and refresh.gap_s > CAP_S else 1
        for _ in range(parts):
            clocks.passes(refresh.gap_s / parts)
            if steps:
                clocks.wall += refresh.step_s / parts
            await refresher.refresh_once()
        seen.append({metric: value.value for metric, value in refresher.views[KEY].values.items()})
    return seen


@PROPERTIES
@given(schedule=SCHEDULES)
def test_a_wall_clock_step_changes_no_served_value(schedule: list[Refresh]) -> None:
    stepped = asyncio.run(served(schedule, steps=True, fill_pauses=False))
    steady = asyncio.run(served(schedule, steps=False, fill_pauses=False))
    assert stepped == steady


@PROPERTIES
@given(schedule=SCHEDULES)
def test_a_pause_or_a_step_never_lowers_a_value_below_what_refreshing_on_time_through_it_serves(
        schedule: list[Refresh]) -> None:
    paused = asyncio.run(served(schedule, steps=True, fill_pauses=False))
    on_time = asyncio.run(served(schedule, steps=False, fill_pauses=True))
    for index, (got, watched) in enumerate(zip(paused, on_time, strict=True)):
        for metric, value in got.items():
            other = watched[metric]
            assert (value is None) == (other is None), (index, metric)
            if value is not None and other is not None:
                # (a gap split in parts decays in several products: the same fall, a rounding apart)
                assert value >= other - 1e-9 * abs(other), (index, metric, value, other, schedule[: index + 1])


@dataclass(frozen=True)
class Gap:
    """What passed before a refresh: `waited_s` inside the refresh before it, on a source that answered within its
    deadline, and `own_s` after it, the adapter's own: on time (at most an interval) or stopped (past the cap)."""

    waited_s: float
    own_s: float


GAPS = st.lists(st.builds(
    Gap,
    waited_s=st.one_of(st.just(0.0), st.floats(0.0, PROMETHEUS.deadline_s)),
    own_s=st.one_of(st.floats(0.0, INTERVAL_S), st.floats(CAP_S + 1, 4000.0)),
), min_size=1, max_size=12)


async def late_lines_said(gaps: Sequence[Gap]) -> list[list[str]]:
    """The 'no refresh for' lines each refresh after the first said, one list a gap."""
    clocks = Clocks()
    source = HungSource(clocks, hangs_s=0.0)
    refresher = clocks.refresher(source, RuntimePolicy(), PROMETHEUS)
    said: list[list[str]] = []
    with catching("autoscaler.running_clock", logging.WARNING) as handler:
        for gap in gaps:
            source.hangs_s = gap.waited_s
            await refresher.refresh_once()
            clocks.passes(gap.own_s)
            handler.lines.clear()
            source.hangs_s = 0.0
            await refresher.refresh_once()
            said.append([line for line in handler.lines if line.startswith("no refresh for")])
    return said


@PROPERTIES
@given(gaps=GAPS)
def test_a_gap_is_called_a_stopped_adapter_exactly_when_the_adapter_itself_was_stopped(gaps: list[Gap]) -> None:
    """However long the source made a refresh wait within its deadline, the adapter is said stopped or starved
    of CPU only where it was: a line each time, and no other line then."""
    said = asyncio.run(late_lines_said(gaps))
    for gap, lines in zip(gaps, said, strict=True):
        starved = [line for line in lines if "stopped or starved of CPU" in line]
        if gap.own_s > CAP_S:
            assert len(starved) == 1 and len(lines) == 1, (gap, lines)
        else:
            assert not starved, (gap, lines)
