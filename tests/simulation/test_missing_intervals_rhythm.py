"""Silences that are a trace's own rhythm, judged over all its silences: a job on two minutes and off one all day
at about 25 requests a minute was warned about as "176 such stretches, 2.93 h in all ... if data is missing
there", as its rhythm was judged only among the silences whose neighbours happened to be busy; an hourly batch
whose silences all end on the hour was warned about as "23 such stretches, 4.05 h", as only their starts were
looked at. Lost minutes that break a rhythm are still named."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from autoscaler.simulation.trace import read_csv
from tests.simulation.runs import simulate, write_trace

EPOCH = 1764547200  # 2025-12-01T00:00:00Z
DAY = 24 * 60


def minutes(busy: dict[int, int]) -> str:
    """One model's rows at 60 s: requests in each minute of `busy` (minute: requests)."""
    return "".join(f"{EPOCH + 60 * minute},job,{count}\n" for minute, count in sorted(busy.items()) if count)


def on_off(period: int, on: int, mean: float, seed: int, lost: frozenset[int] = frozenset(),
           phase: int = 0) -> str:
    """A day of a job on for `on` minutes of every `period` (from minute `phase`), about `mean` requests a minute
    (Poisson), no rows in the `lost` minutes."""
    rng = np.random.default_rng(seed)
    return minutes({m: int(rng.poisson(mean)) or 1 for m in range(DAY)
                    if (m - phase) % period < on and m not in lost})


def warned(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "no rows at all" in line]


def test_a_job_on_two_minutes_and_off_one_all_day_is_not_warned_about(tmp_path: Path) -> None:
    """Silences fill a third of the day, exactly every 3 minutes: the job's rhythm, whichever of them have
    neighbours busy enough to be named."""
    result = simulate(tmp_path, write_trace(tmp_path, on_off(3, 2, 25, seed=9)), "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    assert not warned(result.stderr), result.stderr


def test_an_hourly_batch_whose_silences_end_on_the_hour_is_not_warned_about(tmp_path: Path) -> None:
    """A batch each hour runs 45-58 minutes from the hour: its silences (2-15 minutes) start where the run ends
    but all end on the hour."""
    rng = np.random.default_rng(4)
    busy = {60 * hour + minute: int(rng.poisson(40)) or 1 for hour in range(24)
            for minute in range(int(rng.integers(45, 59)))}
    result = simulate(tmp_path, write_trace(tmp_path, minutes(busy)), "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    assert not warned(result.stderr), result.stderr


def test_lost_minutes_inside_an_hourly_batchs_runs_are_named(tmp_path: Path) -> None:
    """The same batch, 100 requests a minute, with three minutes lost in the middle of runs: their silences
    neither start nor end on the batch's schedule, so they are named, and the batch's own silences are not."""
    rng = np.random.default_rng(4)
    lost = {60 * 3 + 20, 60 * 9 + 30, 60 * 17 + 25}
    busy = {60 * hour + minute: int(rng.poisson(100)) or 1 for hour in range(24)
            for minute in range(int(rng.integers(45, 59))) if 60 * hour + minute not in lost}
    result = simulate(tmp_path, write_trace(tmp_path, minutes(busy)), "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    [said] = warned(result.stderr)
    assert "no rows at all for 1 min between" in said and "3 such stretches, 3 min in all" in said, said


RHYTHMS = st.integers(3, 60).flatmap(lambda period: st.tuples(st.just(period), st.integers(2, period - 1),
                                                               st.integers(0, period - 1)))
"""A period in minutes, the minutes on in each (2 or more: rows a period apart are a trace at that step, refused
asking for a row stating it), and the minute the first run starts."""


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rhythm=RHYTHMS, mean=st.sampled_from([15, 25, 40, 100, 1000]), seed=st.integers(0, 2**16))
@example(rhythm=(13, 2, 12), mean=15, seed=12).via("silent 85% of the day: only a few silences busy on average "
                                                   "either side at 15 requests a minute")
def test_an_on_off_rhythm_of_any_period_and_duty_cycle_is_not_warned_about(tmp_path: Path,
                                                                            rhythm: tuple[int, int, int],
                                                                            mean: float, seed: int) -> None:
    """A job on for part of every period all day, at any load: its silences are its rhythm."""
    period, on, phase = rhythm
    trace = read_csv(write_trace(tmp_path, on_off(period, on, mean, seed, phase=phase)))
    assert not [note for note in trace.notes if "no rows at all" in note], trace.notes


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(period=st.integers(10, 60), data=st.data(), seed=st.integers(0, 2**16))
def test_lost_minutes_that_break_an_on_off_rhythm_are_named(tmp_path: Path, period: int, data: st.DataObject,
                                                             seed: int) -> None:
    """Minutes lost inside the busy job's runs (at least 3 minutes from either end, so that their silences
    neither start nor end where the rhythm's do) are named, however many of the runs lose one."""
    on = data.draw(st.integers(8, period - 1), label="on")
    runs = data.draw(st.lists(st.integers(0, DAY // period - 1), min_size=1, max_size=3, unique=True), label="runs")
    offsets = [data.draw(st.integers(3, on - 4), label="offset") for _ in runs]
    assume(all(abs(a - b) > 3 for i, a in enumerate(offsets) for b in offsets[i + 1:]))  # not a schedule of theirs
    lost = frozenset(period * run + offset for run, offset in zip(runs, offsets, strict=True))
    trace = read_csv(write_trace(tmp_path, on_off(period, on, 200, seed, lost=lost)))
    [note] = [note for note in trace.notes if "no rows at all" in note]
    assert "no rows at all for 1 min between" in note, note
    assert (f"; {len(lost)} such stretches, {len(lost)} min in all" in note) == (len(lost) > 1), note


def test_lost_minutes_in_a_busy_day_are_named_however_quiet_the_night(tmp_path: Path) -> None:
    """A model busy 08-20 h and requested a few times an hour at night: the night's chance silences are no
    rhythm of the day's traffic, so three minutes lost in the day are still named (judged among all silences,
    the night's fill a fifth of the trace and hid them)."""
    rng = np.random.default_rng(1)
    lost = {600, 700, 900}
    busy = {m: int(rng.integers(200, 400)) if 480 <= m < 1200 else int(rng.random() < 0.08)
            for m in range(DAY) if m not in lost}
    result = simulate(tmp_path, write_trace(tmp_path, minutes(busy)), "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    [said] = warned(result.stderr)
    assert "no rows at all for 1 min between" in said and "3 such stretches, 3 min in all" in said, said
