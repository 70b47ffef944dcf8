"""Local times without a zone across a change of summer time, as a spreadsheet exports them: the hour the clocks
go back written twice, the hour they go forward skipped. Read as UTC, the first was refused with the advice to
sum the rows (which, followed, doubled that hour's load in a trace an hour short, with no word), the second
warned about as missing data to cut the trace at."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.simulation.trace import TraceError, read_csv
from tests.simulation.runs import FAILED, report, simulate, write_trace


def local_rows(start: datetime.datetime, minutes: int, step_s: int, models: int, zone: str) -> str:
    """Rows of a trace whose times are `zone`'s wall clock written without a zone, as a spreadsheet does."""
    import zoneinfo

    tz = zoneinfo.ZoneInfo(zone)
    begin = start.replace(tzinfo=tz).astimezone(datetime.UTC)
    rows = []
    for k in range(minutes * 60 // step_s):
        wall = (begin + datetime.timedelta(seconds=k * step_s)).astimezone(tz).replace(tzinfo=None)
        rows += [f"{wall.isoformat(sep=' ')},m{m},{10 + k % 7 + m}\n" for m in range(models)]
    return "".join(rows)


def test_an_hour_written_twice_by_local_times_is_named_not_told_to_be_summed(tmp_path: Path) -> None:
    trace = write_trace(tmp_path, local_rows(datetime.datetime(2025, 10, 26), 300, 60, 1, "Europe/Berlin"))
    result = simulate(tmp_path, trace)
    assert result.returncode == 2, result.stderr
    error = result.stderr.strip()
    assert error.startswith(f"{FAILED}{trace}: line 182: the rows from 2025-10-26 02:00:00 to 2025-10-26 02:59:00 "
                            "come twice (60 rows repeat a model and time): the timestamps have no zone (read as "
                            "UTC), and a whole hour written twice is likely local time across the clocks going back"), \
        error
    assert "export the times in UTC or with their offset" in error
    assert "groupby" not in error and "sum them first" not in error


def test_an_hour_skipped_by_local_times_is_named_not_told_to_be_cut(tmp_path: Path) -> None:
    trace = write_trace(tmp_path, local_rows(datetime.datetime(2026, 3, 29), 300, 60, 2, "Europe/Berlin"))
    result = simulate(tmp_path, trace, "--policies", "fixed")
    assert result.returncode == 0, result.stderr
    warning = next(w for w in report(tmp_path)["warnings"] if w.startswith("no rows for 1 h"))
    assert "the timestamps have no zone (read as UTC), and an hour without rows is likely local time across the " \
        "clocks going forward" in warning, warning
    assert "export the times in UTC or with their offset" in warning


def test_an_hour_without_rows_in_epoch_seconds_is_still_told_to_be_cut(tmp_path: Path) -> None:
    """Epoch seconds have no wall clock: an hour without rows there is no change of summer time."""
    rows = "".join(f"{t},a,5\n" for t in [*range(0, 3600, 60), *range(7200, 10800, 60)])
    result = simulate(tmp_path, write_trace(tmp_path, rows), "--policies", "fixed")
    assert result.returncode == 0, result.stderr
    warning = next(w for w in report(tmp_path)["warnings"] if w.startswith("no rows for 1 h"))
    assert warning.endswith("if data is missing there rather than traffic, cut the trace at the gap"), warning
    assert "summer time" not in warning


@settings(max_examples=25, deadline=None)
@given(zone=st.sampled_from(["Europe/Berlin", "America/New_York", "Australia/Sydney", "Europe/London"]),
       step_s=st.sampled_from([15, 30, 60, 300]), models=st.integers(1, 3), lead_h=st.integers(1, 4),
       year=st.integers(2021, 2027))
def test_every_zone_less_trace_across_clocks_going_back_is_named_so(tmp_path_factory: pytest.TempPathFactory,
                                                                   zone: str, step_s: int, models: int, lead_h: int,
                                                                   year: int) -> None:
    """Whatever the zone, step, models and where the trace starts before the change, the hour written twice is
    named as local time, never advised to be summed."""
    import zoneinfo

    tz = zoneinfo.ZoneInfo(zone)
    # the first moment of the year past which the UTC offset falls: the clocks going back
    moment = datetime.datetime(year, 1, 1, tzinfo=datetime.UTC)
    offset = moment.astimezone(tz).utcoffset()
    while True:
        moment += datetime.timedelta(hours=1)
        now = moment.astimezone(tz).utcoffset()
        if offset is not None and now is not None and now < offset:
            break
        offset = now
    start = (moment - datetime.timedelta(hours=lead_h)).astimezone(tz).replace(tzinfo=None)
    path = write_trace(tmp_path_factory.mktemp("trace"), local_rows(start, 60 * (lead_h + 3), step_s, models, zone))
    with pytest.raises(TraceError) as refused:
        read_csv(path)
    assert "a whole hour written twice is likely local time across the clocks going back" in str(refused.value)
    assert "groupby" not in str(refused.value)


def test_rows_repeated_a_few_times_are_still_told_to_be_summed(tmp_path: Path) -> None:
    """Zone-less times whose repeats are a few rows (a function under two triggers), not an hour: summing is right."""
    rows = "".join(f"2025-12-01T00:{k:02d}:00,a,1\n" for k in range(30)) + "2025-12-01T00:05:00,a,2\n"
    with pytest.raises(TraceError, match="sum them first"):
        read_csv(write_trace(tmp_path, rows))
