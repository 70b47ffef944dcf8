"""Rows whose requests cell is a lost scrape (empty, NaN, Grafana's `null`) are read as no row, and said. Their
timestamps are still the export's: one that was the only row a step after the first stated the trace's step, and
dropped, the trace was refused "off the 420 s step ... remove it" with no word of it. A model whose every row was
lost went without a word, and `null` was refused as "requests must be a number"."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from autoscaler.simulation.trace import read_csv
from tests.simulation.runs import report, simulate, write_trace

EPOCH = 1764547200  # 2025-12-01T00:00:00Z


def warnings_of(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "empty, NaN or null" in line]


def test_a_lost_scrape_that_stated_the_step_still_states_it(tmp_path: Path) -> None:
    """A sparse 60 s export: rows at 0 and 2 minutes, then every 7 minutes, and the scrape at 1 minute lost
    (NaN): read at 60 s, the lost scrape named, not refused as off a 420 s step."""
    rows = [f"{EPOCH},m0,5\n", f"{EPOCH + 60},m0,NaN\n", f"{EPOCH + 120},m0,5\n"]
    rows += [f"{EPOCH + 120 + 420 * k},m0,5\n" for k in range(1, 30)]
    result = simulate(tmp_path, write_trace(tmp_path, "".join(rows)), "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    [said] = warnings_of(result.stderr)
    assert "1 of 32 rows" in said and "line 3" in said, said
    assert report(tmp_path)["trace"]["interval_s"] == 60


def test_a_model_whose_every_row_is_a_lost_scrape_is_named(tmp_path: Path) -> None:
    """Grafana writes a series that was never scraped as NaN in every row (and here every series' first point):
    that model is named, as replaying no requests, not left out without a word; the trace runs from the first
    row with requests, as any does."""
    rows = "".join(f"{EPOCH + 60 * k},{model},{'NaN' if model == 'never' or k == 0 else 30}\n"
                   for k in range(60) for model in ("never", "web", "api"))
    result = simulate(tmp_path, write_trace(tmp_path, rows), "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    [said] = warnings_of(result.stderr)
    assert "62 of 180 rows" in said, said
    assert "model 'never' has no row with requests (all 60 of its rows)" in said, said
    assert report(tmp_path)["trace"]["models"] == 2
    assert report(tmp_path)["trace"]["requests"] == 59 * 2 * 30


@pytest.mark.parametrize("lost", ["null", "NULL", " null "])
def test_grafanas_null_is_a_lost_scrape_as_nan_is(tmp_path: Path, lost: str) -> None:
    """Grafana's CSV export writes a missing point as `null`: read as no row and named as NaN is, not refused as
    "requests must be a number, got 'null'"."""
    rows = "".join(f"{EPOCH + 15 * k},m{m},{lost if k in (10, 11) else 40}\n" for k in range(60) for m in range(3))
    result = simulate(tmp_path, write_trace(tmp_path, rows), "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    [said] = warnings_of(result.stderr)
    assert "6 of 180 rows" in said and "lines 32, 33, 34, 35, 36, ..." in said, said
    assert report(tmp_path)["trace"]["requests"] == 58 * 3 * 40


def test_a_lost_scrape_beside_a_value_of_the_same_model_and_time_leaves_the_value(tmp_path: Path) -> None:
    """Grafana merging two series of one model (two pods' exports, one of which lost a scrape) writes a NaN row
    beside the other's value at the same time: refused as "model 'web' ... is listed twice". The value stands,
    and the lost scrape is said in the one warning, as beside a value."""
    rows = "".join(f"{EPOCH + 60 * k},web,30\n" for k in range(60))
    rows += f"{EPOCH + 60 * 20},web,NaN\n{EPOCH + 60 * 21},web,\n"
    result = simulate(tmp_path, write_trace(tmp_path, rows), "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    [said] = warnings_of(result.stderr)
    assert ("2 of 62 rows have requests empty, NaN or null (lines 62, 63; 2 of them beside a value of the same "
            "model and time, which stands)") in said, said
    assert report(tmp_path)["trace"]["requests"] == 60 * 30


def test_a_lost_scrape_off_the_step_is_said_as_one_not_refused_for_its_time(tmp_path: Path) -> None:
    """A `null` row 10 s past a minute in a 60 s export (a series scraped at its own offset, every point lost):
    refused as "line 102: timestamp ... is off the 60 s step ... move it onto the 60 s step, or remove it", no
    word of its being a lost scrape. A row without a value off the step is not refused for its time: read at 60 s,
    and counted."""
    rows = "".join(f"{EPOCH + 60 * k},web,30\n" for k in range(100)) + f"{EPOCH + 130},web,null\n"
    result = simulate(tmp_path, write_trace(tmp_path, rows), "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    [said] = warnings_of(result.stderr)
    assert "1 of 101 rows have requests empty, NaN or null (line 102; 1 of them off the trace's 60 s step)" in said, (
        said)
    assert report(tmp_path)["trace"]["interval_s"] == 60
    assert report(tmp_path)["trace"]["requests"] == 100 * 30


LOST_CELLS = st.sampled_from(["NaN", "null", "", "nan", " NULL "])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# A lost row between two on a finer grid (22.5 s past a 15 s trace's start) read the trace at 7.5 s where lost rows
# were let state the step first (CI, 5 December)
@example(step=15, intervals=2, models=1, lost=[(0.75, 0, "NaN")], seed=0)
# One or two lost rows between values, on a grid twice as fine, fill no finer grid of the trace: a lone one, or a
# pair, is as likely a series at its own offset as a finer export's scrapes (lost_grid.py)
@example(step=15, intervals=2, models=1, lost=[(0.25, 0, "NaN")], seed=0)
@example(step=15, intervals=3, models=1, lost=[(1 / 6, 0, "NaN"), (0.5, 0, "null")], seed=0)
@given(step=st.sampled_from([1, 15, 60, 300]), intervals=st.integers(2, 80), models=st.integers(1, 3),
       lost=st.lists(st.tuples(st.floats(-2.0, 2.0), st.integers(0, 3), LOST_CELLS), min_size=1, max_size=12),
       seed=st.integers(0, 2**16))
def test_lost_scrapes_anywhere_change_nothing_read_and_are_all_counted(tmp_path: Path, step: int, intervals: int,
                                                                        models: int,
                                                                        lost: list[tuple[float, int, str]],
                                                                        seed: int) -> None:
    """Whatever the times of the rows without a value (on the step or off it, beside a value or not, before the
    first row or after the last) and their models (one with no other row too): the trace reads as it does
    without them, and the one warning counts every one of them."""
    rng = random.Random(seed)
    valued = [f"{EPOCH + step * k},m{m},{rng.randint(1, 50)}\n" for k in range(intervals) for m in range(models)]
    rows = list(valued)
    for at, model, cell in lost:  # `at`: where in the trace's span, as a share of it past its start
        rows.insert(rng.randint(0, len(rows)), f"{EPOCH + round(at * step * intervals, 3)},m{model},{cell}\n")
    alone = read_csv(write_trace(tmp_path, "".join(valued)))
    read = read_csv(write_trace(tmp_path, "".join(rows)))
    assert (read.models, read.start_s, read.interval_s, read.intervals) == (
        alone.models, alone.start_s, alone.interval_s, alone.intervals)
    assert sorted(zip(read.slot.tolist(), read.model.tolist(), read.requests.tolist(), strict=True)) == sorted(
        zip(alone.slot.tolist(), alone.model.tolist(), alone.requests.tolist(), strict=True))
    [said] = [note for note in read.notes if "empty, NaN or null" in note]
    assert said.startswith(f"{len(lost):,} of {len(rows):,} rows have requests empty, NaN or null"), said



def test_an_export_with_every_other_scrape_lost_replays_each_value_in_its_own_minute(tmp_path: Path) -> None:
    """A 60 s export whose every other scrape was lost (values 120 s apart, NaN rows on the minutes between): read
    at 120 s, each row's 600 requests of one minute were spread over two (5 req/s where 10 came), the peak needed 2
    pods of 4 req/s where it needs 3, and the warning called every lost scrape off the trace's step. Read at 60 s."""
    rows = "".join(f"{EPOCH + 60 * k},web,{600 if k % 2 == 0 else 'NaN'}\n" for k in range(120))
    result = simulate(tmp_path, write_trace(tmp_path, rows), "--policies", "mean-hpa", "--pod-rps", "4")
    assert result.returncode == 0, result.stderr
    assert report(tmp_path)["trace"]["interval_s"] == 60
    assert report(tmp_path)["cluster"]["peak_pods"] == 3
    [said] = warnings_of(result.stderr)
    assert "60 of 120 rows" in said and "off the trace's" not in said, said


def test_a_series_at_its_own_offset_whose_every_point_is_lost_states_no_finer_step(tmp_path: Path) -> None:
    """A 60 s export beside a series scraped at its own offset, 30 s past each minute, whose every point was lost:
    its rows lie on a 30 s grid with the values and fill it, but a model without a value says nothing of the
    others' step. Read at 60 s (at 30 s each minute's requests would come within its first half), the series
    named as replaying none and its rows as off the step."""
    rows = "".join(f"{EPOCH + 60 * k},web,30\n{EPOCH + 60 * k + 30},api,null\n" for k in range(60))
    result = simulate(tmp_path, write_trace(tmp_path, rows), "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    assert report(tmp_path)["trace"]["interval_s"] == 60
    [said] = warnings_of(result.stderr)
    assert "60 of them off the trace's 60 s step" in said and "model 'api' has no row with requests" in said, said


def test_lost_rows_between_minutes_for_a_stretch_state_no_finer_step(tmp_path: Path) -> None:
    """A 100-minute 60 s export of `web`, beside the `null` rows of a second pod's series of it, scraped at its own
    offset 30 s past each minute for the 40 minutes it lived, every point lost: on a 30 s grid with the values,
    but holding 40 of its 99 times no value holds, less than half, they fill none of it. Read at 60 s (at 30 s
    each minute's requests came within its first half, twice the rate), the 40 said as off the step."""
    rows = "".join(f"{EPOCH + 60 * k},web,30\n" for k in range(100))
    rows += "".join(f"{EPOCH + 60 * k + 30},web,null\n" for k in range(20, 60))
    result = simulate(tmp_path, write_trace(tmp_path, rows), "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    assert report(tmp_path)["trace"]["interval_s"] == 60
    [said] = warnings_of(result.stderr)
    assert "40 of 140 rows" in said and "40 of them off the trace's 60 s step" in said, said


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# Values 900 s apart, refused alone (over 10 min), and a stray lost row: the lost rows stated no step where they
# had to all sit on one, and the trace was refused as "timestamps are 900 s apart"
@example(step=300, every=3, cycles=5, tail=0, models=1, dropped=0.0, stray=True, seed=0)
@given(step=st.sampled_from([1, 15, 60, 300]), every=st.integers(2, 4), cycles=st.integers(5, 40),
       tail=st.integers(0, 3), models=st.integers(1, 3), dropped=st.floats(0.0, 1 / 3), stray=st.booleans(),
       seed=st.integers(0, 2**16))
def test_an_export_with_scrapes_lost_in_a_pattern_reads_at_its_own_step(tmp_path: Path, step: int, every: int,
                                                                        cycles: int, tail: int, models: int,
                                                                        dropped: float, stray: bool,
                                                                        seed: int) -> None:
    """An export at `step` that kept one scrape in `every` (the others written NaN, null or empty for every model,
    up to a third of those times left out of the file altogether, one more lost row off the step or none, the rows
    in any order): read at `step`, as the same file with 0 for each lost cell reads, each value in its own
    interval; not at the values' coarser step, which spread each interval's requests over `every`. The trace runs
    from the first value to the last; the warning calls only the stray row off the step."""
    rng = random.Random(seed)
    slots = cycles * every + tail + 1
    lost_slots = [s for s in range(slots) if s % every]
    gone = set(rng.sample(lost_slots, int(dropped * len(lost_slots))))
    cells: list[tuple[int, int, str | None]] = []  # (slot, model, requests; None where the scrape was lost)
    for s in range(slots):
        if s not in gone:
            cells += [(s, m, None if s % every else str(rng.randint(1, 50))) for m in range(models)]
    rng.shuffle(cells)
    off = f"{EPOCH + step * (rng.randint(1, slots - 2) + rng.choice([0.25, 0.37, 0.5]))},m0,NaN\n" if stray else ""

    def export(lost: str | None) -> Path:
        rows = "".join(f"{EPOCH + step * s},m{m},{r if r is not None else lost or rng.choice(['NaN', 'null', ''])}\n"
                       for s, m, r in cells)
        return write_trace(tmp_path, rows + off)

    filled = read_csv(export("0"))
    read = read_csv(export(None))
    assert (read.start_s, read.interval_s, read.intervals) == (EPOCH, step, (slots - 1) // every * every + 1)
    assert sorted(zip(read.slot.tolist(), read.model.tolist(), read.requests.tolist(), strict=True)) == sorted(
        (s, m, r) for s, m, r in zip(filled.slot.tolist(), filled.model.tolist(), filled.requests.tolist(),
                                     strict=True) if r > 0)
    [said] = [note for note in read.notes if "empty, NaN or null" in note]
    assert ("1 of them off the trace's" in said) if stray else ("off the trace's" not in said), said
