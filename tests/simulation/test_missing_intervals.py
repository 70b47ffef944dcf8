"""Intervals without a row inside steady, busy traffic: a collector down for 40 minutes, scrapes lost here and
there. Replayed as no requests at all, they flipped the verdict (mean-hpa scaled down through the outage and
met the traffic after it: 3.1% of requests delayed became 48%) with no word, as only stretches of an hour or
more were named. Now they are warned about with where, how long and what to do, and quiet traces are not."""

from __future__ import annotations

import random
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.simulation.trace import read_csv
from tests.simulation.runs import report, simulate, write_trace

EPOCH = 1764547200  # 2025-12-01T00:00:00Z
MINUTES = 360


def steady(missing: set[int], per_minute: int = 600, models: int = 4, seed: int = 0) -> str:
    """Six hours at 60 s of `models` models sharing about `per_minute` requests, no rows in the `missing` minutes."""
    rng = random.Random(seed)
    return "".join(f"{EPOCH + 60 * i},m{m},{rng.randint(per_minute // models // 2, per_minute // models)}\n"
                   for i in range(MINUTES) if i not in missing for m in range(models))


def test_an_outage_and_lost_minutes_in_steady_traffic_are_warned_about_where_and_how_long(tmp_path: Path) -> None:
    """A 40-minute outage from 02:00 and three lost minutes: one warning naming the outage (how long, between
    which rows, on which line), how many such stretches and how long in all, and what to do; the run goes on."""
    outage = set(range(120, 160))
    trace = write_trace(tmp_path, steady(outage | {30, 200, 201}))
    result = simulate(tmp_path, trace, "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    [said] = [line for line in result.stderr.splitlines() if "no rows at all" in line]
    assert ("no rows at all for 40 min between the rows at 1764554340 (2025-12-01T01:59:00Z) and at 1764556800 "
            "(2025-12-01T02:40:00Z) (line 478; 3 such stretches, 43 min in all, this the longest)") in said, said
    assert "replayed as no requests" in said and "fill" in said and "cut the trace" in said, said
    assert "if the traffic did stop there, ignore this" in said, said
    assert any("no rows at all for 40 min" in warning for warning in report(tmp_path)["warnings"])


def test_quiet_traffic_with_empty_minutes_is_not_warned_about(tmp_path: Path) -> None:
    """A model requested a few times an hour: most minutes have no row, as its traffic has none."""
    rng = random.Random(1)
    rows = "".join(f"{EPOCH + 60 * i},a,{rng.randint(1, 3)}\n" for i in range(MINUTES) if i % 7 == 0 or i < 2)
    result = simulate(tmp_path, write_trace(tmp_path, rows), "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    assert "no rows at all" not in result.stderr, result.stderr


def test_traffic_that_fades_out_and_back_is_not_warned_about(tmp_path: Path) -> None:
    """A night with no requests between an evening that tails off and a morning that picks up: no data missing."""
    rows = "".join(f"{EPOCH + 60 * i},a,{abs(i - 180) // 10}\n" for i in range(MINUTES) if abs(i - 180) >= 10)
    trace = read_csv(write_trace(tmp_path, rows))
    assert not [note for note in trace.notes if "no rows at all" in note], trace.notes


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=st.integers(10, MINUTES - 70), minutes=st.integers(1, 59), seed=st.integers(0, 2**16))
def test_any_stretch_under_an_hour_lost_from_busy_traffic_is_named(tmp_path: Path, first: int, minutes: int,
                                                                    seed: int) -> None:
    """Wherever the lost stretch is and however long (under an hour: longer ones have their own warning), it is
    named with its length and the row after it."""
    trace = read_csv(write_trace(tmp_path, steady(set(range(first, first + minutes)), seed=seed)))
    [note] = [note for note in trace.notes if "no rows at all" in note]
    after = EPOCH + 60 * (first + minutes)
    assert f"no rows at all for {minutes} min between" in note, note
    assert f"and at {after} " in note and f"(line {2 + 4 * first})" in note, note
