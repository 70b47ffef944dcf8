"""Per-minute tables as users download them: Azure Functions' public trace comes as a file a day with a row per
function and a column per minute (`invocations_per_function_md.anon.d01.csv`: HashOwner, HashApp,
HashFunction, Trigger, then 1 .. 1440). `simulate --trace` reads such a file as it is, and
`python -m autoscaler.simulation.minute_table` joins days and keeps the busiest functions. Every figure below
is counted by hand from the rows written."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.simulation.trace import read_csv
from tests.simulation.runs import FAILED, report, run_module, simulate

AZURE_IDS = ("HashOwner", "HashApp", "HashFunction", "Trigger")


def day_file(path: Path, rows: Sequence[tuple[str, str, Mapping[int, object]]], minutes: int = 1440) -> Path:
    """A day in Azure's layout: (function, trigger, {minute: invocations}), every other minute 0."""
    lines = [",".join((*AZURE_IDS, *map(str, range(1, minutes + 1))))]
    for function, trigger, counts in rows:
        cells = [str(counts.get(minute, 0)) for minute in range(1, minutes + 1)]
        lines.append(",".join((f"owner-{function}", f"app-{function}", function, trigger, *cells)))
    path.write_text("\n".join(lines) + "\n")
    return path


HOURLY = {minute: 1 for minute in range(60, 1441, 60)}  # a request in the last minute of every hour: 24
# f-a under two triggers (2 + 1 requests in minute 1, 3 in minute 1440), f-b HOURLY
DAY_ONE = (("f-a", "http", {1: 2, 1440: 3}), ("f-b", "timer", HOURLY), ("f-a", "queue", {1: 1}))


def test_simulate_replays_a_day_of_azure_functions_as_downloaded(tmp_path: Path) -> None:
    """The file as the tarball holds it, fed to `simulate`: it was refused for its header ("expected the header
    timestamp_s,model,requests"). f-a is listed under two triggers (2 + 1 requests in minute 1, 3 in minute
    1440): one model of 6 requests; f-b has 24. 30 requests of 2 models over 24 h at 60 s."""
    day = day_file(tmp_path / "invocations_per_function_md.anon.d01.csv", DAY_ONE)
    result = simulate(tmp_path, day, "--policies", "fixed")
    assert result.returncode == 0, result.stderr
    written = report(tmp_path)
    assert written["trace"] == {"source": str(day), "models": 2, "interval_s": 60.0, "hours": 24.0, "requests": 30}
    warnings = "\n".join(written["warnings"])
    assert "a row per model and a column per minute" in warnings
    assert "1 model is on more than one row (a function under two triggers): their requests are added up" in warnings
    assert "a row per model and a column per minute" in result.stderr


def test_the_first_and_last_minutes_land_on_the_first_and_last_intervals(tmp_path: Path) -> None:
    """Minute 1 is the interval starting at 0 s, minute 1440 the one starting at 86,340 s."""
    trace = read_csv(day_file(tmp_path / "d.csv", [("f-a", "http", {1: 2, 1440: 3})]))
    assert (trace.start_s, trace.interval_s, trace.intervals) == (0.0, 60.0, 1440)
    assert sorted(zip(trace.slot.tolist(), trace.requests.tolist(), strict=True)) == [(0, 2.0), (1439, 3.0)]


def test_a_cell_that_is_not_a_count_is_refused_naming_its_line_and_minute(tmp_path: Path) -> None:
    day = day_file(tmp_path / "d.csv", [("f-a", "http", {1: 2}), ("f-b", "http", {7: "x", 9: -1})])
    result = simulate(tmp_path, day)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"{FAILED}{day}: line 3: minute 7: requests must be a number, got 'x'")
    day_file(day, [("f-a", "http", {1: 2}), ("f-b", "http", {9: -1})])
    result = simulate(tmp_path, day)
    assert result.stderr.strip().splitlines()[-1] == (
        f"{FAILED}{day}: line 3: minute 9: requests must be >= 0, got '-1'")


TABLE_FAILED = "python -m autoscaler.simulation.minute_table: error: "
"""How every refusal of the converter starts (status 2)."""


def convert(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_module("autoscaler.simulation.minute_table", *args)


def test_two_days_joined_keep_the_busiest_function(tmp_path: Path) -> None:
    """Day 1: f-a 6 requests, f-b 24 (one at the end of each hour); day 2: f-b 100 in its minute 2, f-c 1.
    Over both days f-b has 124 of 131: `--top 1` keeps it, day 2's minute 2 starting at 86,460 s."""
    day1 = day_file(tmp_path / "d01.csv", DAY_ONE)
    day2 = day_file(tmp_path / "d02.csv", [("f-b", "timer", {2: 100}), ("f-c", "http", {5: 1})])
    out = tmp_path / "trace.csv"
    result = convert(day1, day2, "--top", "1", "--out", out)
    assert result.returncode == 0, result.stderr
    hours = [f"{minute * 60 - 60},f-b,1" for minute in range(60, 1441, 60)]
    anchors = ["0,f-b,0", "60,f-b,0"]  # the start and the step pinned: else read as rows an hour apart from 3,540 s
    assert out.read_text().splitlines() == ["timestamp_s,model,requests", *anchors, *hours, "86460,f-b,100"]
    assert "kept the 1 busiest of 3 models: 124 of 131 requests (94.7%)" in result.stderr
    assert "131 requests of 3 models over 2 days" in result.stderr
    trace = read_csv(out)
    assert (trace.interval_s, trace.total_requests, trace.models) == (60.0, 124.0, ("f-b",))


def test_days_of_different_lengths_or_no_table_are_refused(tmp_path: Path) -> None:
    day1 = day_file(tmp_path / "d01.csv", [("f-a", "http", {1: 2})])
    short = day_file(tmp_path / "d02.csv", [("f-a", "http", {1: 2})], minutes=60)
    result = convert(day1, short, "--out", tmp_path / "t.csv", "--quiet")
    assert result.returncode == 2
    assert result.stderr.strip() == (f"{TABLE_FAILED}{short}: 60 minute columns, but {day1} has 1440: each file must "
                                     "be one day of the same length, given in order")
    plain = tmp_path / "plain.csv"
    plain.write_text("timestamp_s,model,requests\n0,a,1\n")
    result = convert(plain, "--out", tmp_path / "t.csv", "--quiet")
    assert result.returncode == 2
    assert result.stderr.strip() == (f"{TABLE_FAILED}{plain}: not a per-minute table (a row per model, then columns "
                                     "named 1, 2, ... for its minutes): it replays as it is with simulate --trace")


def test_an_out_that_is_one_of_the_days_read_is_refused_and_the_day_kept(tmp_path: Path) -> None:
    """`minute_table d01.csv --top 5 --out d01.csv` (a typo'd --out) overwrote the downloaded day, no word said.
    Refused before anything is read, whatever the spelling of the path (here a symlink to the day)."""
    day1 = day_file(tmp_path / "d01.csv", DAY_ONE)
    day2 = day_file(tmp_path / "d02.csv", DAY_ONE)
    (tmp_path / "link.csv").symlink_to(day2)
    before = day2.read_bytes()
    for out in (day2, tmp_path / "link.csv"):
        result = convert(day1, day2, "--top", "1", "--out", out, "--quiet")
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip() == (f"{TABLE_FAILED}--out {out} is {day2}, one of the files read: give the "
                                         "output another name"), result.stderr
        assert day2.read_bytes() == before


tables = st.lists(  # files of one length; per file (function index, {minute: count}) rows
    st.lists(st.tuples(st.integers(0, 4), st.dictionaries(st.integers(1, 6), st.integers(0, 9), max_size=4)),
             min_size=1, max_size=5),
    min_size=1, max_size=3)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=tables, top=st.integers(1, 5))
def test_what_is_kept_is_every_request_of_the_busiest_at_its_own_minute(tmp_path: Path,
                                                                         files: list[list[tuple[int, dict[int, int]]]],
                                                                         top: int) -> None:
    """Over random days of six minutes: each kept (model, second) has the requests its cells add up to, and the
    models kept are `top` of the busiest (any order among equals)."""
    paths = [day_file(tmp_path / f"d{i}.csv", [(f"f{f}", "http", counts) for f, counts in rows], minutes=6)
             for i, rows in enumerate(files)]
    want: dict[tuple[str, int], int] = {}
    for day, rows in enumerate(files):
        for f, counts in rows:
            for minute, n in counts.items():
                key = (f"f{f}", (day * 6 + minute - 1) * 60)
                want[key] = want.get(key, 0) + n
    totals: dict[str, int] = {}
    for (model, _), n in want.items():
        totals[model] = totals.get(model, 0) + n
    out = tmp_path / "out.csv"
    result = convert(*paths, "--top", str(top), "--out", out, "--quiet")
    if not any(totals.values()):
        assert result.returncode == 2 and "every cell of every file is 0" in result.stderr
        return
    assert result.returncode == 0, result.stderr
    got: dict[tuple[str, int], int] = {}
    for line in out.read_text().splitlines()[1:]:
        stamp, model, count = line.split(",")
        if int(count):  # rows of 0 pin the start and the step
            got[(model, int(stamp))] = int(count)
    kept = {model for model, _ in got}
    busy = sorted((n for n in totals.values() if n), reverse=True)
    assert len(kept) == min(top, len(busy))
    assert sorted((totals[m] for m in kept), reverse=True) == busy[:len(kept)]
    assert got == {key: n for key, n in want.items() if key[0] in kept and n}


def test_a_spreadsheets_trailing_comma_reads_the_same_and_another_azure_file_is_told_what_replays(
        tmp_path: Path) -> None:
    """Saved from a spreadsheet, every line ends in a comma (an empty column after minute N): the same trace.
    The durations file of the same tarball is neither a trace nor a table: the refusal says what would be."""
    day = day_file(tmp_path / "d.csv", [("f-a", "http", {1: 2, 1440: 3})])
    saved = tmp_path / "saved.csv"
    saved.write_text("".join(line + ",\n" for line in day.read_text().splitlines()))
    trace = read_csv(saved)
    assert sorted(zip(trace.slot.tolist(), trace.requests.tolist(), strict=True)) == [(0, 2.0), (1439, 3.0)]
    durations = tmp_path / "function_durations_percentiles.anon.d01.csv"
    durations.write_text("HashOwner,HashApp,HashFunction,Average,Count\no,a,f,120,4\n")
    result = simulate(tmp_path, durations)
    assert result.returncode == 2
    assert result.stderr.strip().endswith(
        "missing timestamp_s; missing model; missing requests; or a per-minute table: a row per model, then "
        "columns named 1, 2, ... for its minutes")


def test_a_tables_lost_cells_are_read_as_no_row_and_said_once(tmp_path: Path) -> None:
    """pandas writes a table's missing values as empty cells, Grafana as `null`, and NaN is what both read: the
    long trace read such rows as lost scrapes, the table refused its first ("minute 2: requests must be a
    number, got ''"). Each is read as no row, and one warning, in the long trace's words, counts them, names
    their first lines and minutes, and the function whose every cell is one (it replays none)."""
    day = day_file(tmp_path / "d.csv", [("f-a", "http", {1: 2, 2: "", 3: "NaN", 1440: 3}),
                                        ("f-b", "timer", {**HOURLY, 7: "null", 8: " nan "}),
                                        ("f-c", "http", {})], minutes=1440)
    text = day.read_text().splitlines()
    text[3] = ",".join(text[3].split(",")[:4] + ["NaN"] * 1440)  # f-c: never scraped
    day.write_text("\n".join(text) + "\n")
    result = simulate(tmp_path, day, "--policies", "fixed")
    assert result.returncode == 0, result.stderr
    [said] = [line for line in result.stderr.splitlines() if "empty, NaN or null" in line]
    assert said.endswith("write 0"), said
    assert said.startswith("simulate: warning: 1,444 of 4,320 cells have requests empty, NaN or null (line 2: "
                           "minute 2, line 2: minute 3, line 3: minute 7, line 3: minute 8, line 4: minute 1, ...), "
                           "as Grafana and pandas write lost scrapes: read as no row, so their models replay no "
                           "requests in those intervals; model 'f-c' has no cell with requests (all 1,440 of its "
                           "cells), so it replays none"), said
    written = report(tmp_path)
    assert written["trace"]["requests"] == 2 + 3 + 24
    assert [f"simulate: warning: {w}" for w in written["warnings"] if "empty, NaN or null" in w] == [said]


def test_a_table_of_nothing_but_lost_cells_is_refused_as_the_long_trace_is(tmp_path: Path) -> None:
    day = day_file(tmp_path / "d.csv", [("f-a", "http", {})], minutes=3)
    day.write_text(day.read_text().replace(",0,0,0", ",NaN,,null"))
    result = simulate(tmp_path, day)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"{FAILED}{day}: every cell's requests is empty, NaN or null (3 cells: line 2: minute 1, line 2: minute 2, "
        "line 2: minute 3): nothing to replay; fill them with the requests of each interval")


def test_the_converter_reads_lost_cells_as_no_row_and_says_so(tmp_path: Path) -> None:
    day = day_file(tmp_path / "d01.csv", [("f-a", "http", {1: 4, 2: "NaN", 3: 5})], minutes=4)
    result = convert(day, "--out", tmp_path / "trace.csv", "--quiet")
    assert result.returncode == 0, result.stderr
    assert f"{day}: 1 of 4 cells have requests empty, NaN or null (line 2: minute 2)" in result.stderr
    trace = read_csv(tmp_path / "trace.csv")
    assert sorted((s, r) for s, r in zip(trace.slot.tolist(), trace.requests.tolist(), strict=True) if r) == [
        (0, 4.0), (2, 5.0)]  # and a row of 0 that states the step, as the converter writes


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=st.lists(st.lists(st.one_of(st.integers(0, 9).map(str), st.sampled_from(["", "NaN", "null", " nan "])),
                               min_size=4, max_size=4), min_size=1, max_size=5))
def test_a_tables_lost_cells_read_as_cells_of_0_and_are_all_counted(tmp_path: Path, table: list[list[str]]) -> None:
    """Wherever a table's cells are written empty, NaN or null, and however spelt: the trace read is that of the
    table with 0 in them, and the one warning counts every one of them (a table of nothing but them is refused)."""
    lost = {"", "NaN", "null", " nan "}
    if all(cell in lost or cell == "0" for row in table for cell in row):
        table[0][0] = "1"
    header = "HashFunction,1,2,3,4\n"
    written = tmp_path / "lost.csv"
    written.write_text(header + "".join(f"f{i},{','.join(row)}\n" for i, row in enumerate(table)))
    zeros = tmp_path / "zeros.csv"
    zeros.write_text(header + "".join(f"f{i},{','.join('0' if c in lost else c for c in row)}\n"
                                      for i, row in enumerate(table)))
    read, want = read_csv(written), read_csv(zeros)
    assert (read.models, read.intervals) == (want.models, want.intervals)
    assert sorted(zip(read.slot.tolist(), read.model.tolist(), read.requests.tolist(), strict=True)) == sorted(
        zip(want.slot.tolist(), want.model.tolist(), want.requests.tolist(), strict=True))
    count = sum(cell in lost for row in table for cell in row)
    said = [note for note in read.notes if "empty, NaN or null" in note]
    assert said == ([] if not count else [said[0]]), read.notes
    assert not count or said[0].startswith(f"{count:,} of {4 * len(table):,} cells have requests empty"), said
