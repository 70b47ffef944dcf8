"""Rows whose requests cell is a lost scrape (empty, NaN, Grafana's `null`) are read as no row, and said. Their
timestamps are still the export's: one that was the only row a step after the first stated the trace's step, and
dropped, the trace was refused "off the 420 s step ... remove it" with no word of it. A model whose every row was
lost went without a word, and `null` was refused as "requests must be a number"."""

from __future__ import annotations

from pathlib import Path

import pytest

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
