"""Rows written with requests NaN inside a stretch without rows: the stretch is still named, across them, and a
stretch that is nothing but such rows is left to their own warning. One NaN row per model in the middle of a
50-minute outage of three busy models hid the outage: only "3 of 2,013 rows have requests empty, NaN or null" was
said, as the lost row split the outage into two 25-minute silences that each ended at a row; a 90-minute block
of NaN rows was said twice, by their warning and as "no rows for 1.5 h ... cut the trace at the gap"."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.simulation.trace import read_csv
from tests.simulation.runs import simulate, write_trace

EPOCH = 1764547200  # 2025-12-01T00:00:00Z
HALF_DAY = 720


def busy_models(silent: range, nan: set[int], models: tuple[str, ...] = ("m0", "m1", "m2"),
                silent_models: tuple[str, ...] | None = None) -> str:
    """Half a day of busy models at 60 s (about 100 requests a minute each): no rows in the `silent` minutes for
    `silent_models` (all by default) except a NaN row in the `nan` minutes."""
    rng = np.random.default_rng(4)
    rows = []
    for minute in range(HALF_DAY):
        for model in models:
            quiet = minute in silent and (silent_models is None or model in silent_models)
            if quiet and minute not in nan:
                continue
            rows.append(f"{EPOCH + 60 * minute},{model},{'NaN' if quiet else int(rng.poisson(100))}\n")
    return "".join(rows)


def notes_of(tmp_path: Path, rows: str, about: str) -> list[str]:
    return [note for note in read_csv(write_trace(tmp_path, rows)).notes if about in note]


def test_one_nan_row_per_model_inside_an_outage_does_not_hide_it(tmp_path: Path) -> None:
    """Three busy models without rows for 50 minutes but a NaN row each at minute 25: the outage is named whole,
    between the rows either side of it, as it is without the NaN rows, and the NaN rows by their own warning."""
    result = simulate(tmp_path, write_trace(tmp_path, busy_models(range(300, 350), {325})), "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    [said] = [line for line in result.stderr.splitlines() if "no rows at all" in line]
    assert ("no rows at all for 50 min between the rows at 1764565140 (2025-12-01T04:59:00Z) and at 1764568200 "
            "(2025-12-01T05:50:00Z)") in said, said
    assert "such stretches" not in said, said
    assert "3 of 2,013 rows have requests empty, NaN or null" in result.stderr, result.stderr


@pytest.mark.parametrize("nan", [{300}, {349}, {310, 311, 312, 330}, set(range(300, 320))],
                         ids=["first minute", "last minute", "scattered", "first 20 minutes"])
def test_an_outage_partly_of_nan_rows_is_named_whole(tmp_path: Path, nan: set[int]) -> None:
    """Wherever the NaN rows fall in the outage, it is named as the 50 minutes between the rows either side."""
    [note] = notes_of(tmp_path, busy_models(range(300, 350), nan), "no rows at all")
    assert "no rows at all for 50 min between the rows at 1764565140 (2025-12-01T04:59:00Z)" in note, note
    assert "such stretches" not in note, note


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(length=st.integers(20, 55), data=st.data())
def test_an_outage_with_any_nan_rows_short_of_all_is_named_whole(tmp_path: Path, length: int,
                                                                  data: st.DataObject) -> None:
    """However many of an outage's minutes are NaN rows, and wherever, short of all of them: named as the whole
    outage, between the rows either side."""
    minutes = range(300, 300 + length)
    nan = data.draw(st.sets(st.sampled_from(minutes), max_size=length - 1), label="nan")
    [note] = notes_of(tmp_path, busy_models(minutes, nan), "no rows at all")
    assert f"no rows at all for {length} min between the rows at 1764565140 (2025-12-01T04:59:00Z)" in note, note


def test_a_stretch_entirely_of_nan_rows_is_named_by_their_warning_alone(tmp_path: Path) -> None:
    """Thirty minutes written as NaN for every model, inside busy traffic: their warning names them; the warning
    for intervals without a row does not."""
    notes = read_csv(write_trace(tmp_path, busy_models(range(300, 330), set(range(300, 330))))).notes
    assert [note for note in notes if "90 of 2,160 rows have requests empty, NaN or null" in note], notes
    assert not [note for note in notes if "no rows" in note], notes


def test_one_nan_row_inside_a_busy_models_silence_does_not_hide_it(tmp_path: Path) -> None:
    """The busiest model's target down 40 minutes, one NaN row of it in the middle, the others reporting: that
    model's silence is named whole, 40 minutes between its rows either side."""
    rows = busy_models(range(400, 440), {420}, silent_models=("m0",))
    [note] = notes_of(tmp_path, rows, "has no rows for")
    assert ("model 'm0' has no rows for 40 min between its rows at 1764571140 (2025-12-01T06:39:00Z) and at "
            "1764573600 (2025-12-01T07:20:00Z)") in note, note
    assert "such stretches" not in note, note


def test_a_busy_models_silence_entirely_of_nan_rows_is_named_by_their_warning_alone(tmp_path: Path) -> None:
    rows = busy_models(range(400, 440), set(range(400, 440)), silent_models=("m0",))
    notes = read_csv(write_trace(tmp_path, rows)).notes
    assert [note for note in notes if "40 of 2,160 rows have requests empty, NaN or null" in note], notes
    assert not [note for note in notes if "no rows" in note], notes


def test_a_nan_block_over_an_hour_is_said_once(tmp_path: Path) -> None:
    """Ninety minutes written as NaN for every model: their warning names them, and no second warning calls them
    "no rows for 1.5 h ... cut the trace at the gap"."""
    result = simulate(tmp_path, write_trace(tmp_path, busy_models(range(300, 390), set(range(300, 390)))),
                      "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    assert "270 of 2,160 rows have requests empty, NaN or null" in result.stderr, result.stderr
    assert "no rows for" not in result.stderr, result.stderr


def test_an_outage_over_an_hour_with_one_nan_row_is_still_a_gap(tmp_path: Path) -> None:
    """Ninety minutes without rows but one NaN row per model in the middle: a gap of 1.5 h, named as one."""
    [note] = notes_of(tmp_path, busy_models(range(300, 390), {345}), "no rows for")
    assert "no rows for 1.5 h between the rows at 1764565140 (2025-12-01T04:59:00Z)" in note, note
