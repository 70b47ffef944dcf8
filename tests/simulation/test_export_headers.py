"""Headers that exports write, refused naming the change that makes them a trace: Grafana's table export
(`Time,model,Value`), its default export (a column per model), a request log's `timestamp`. They were refused
"missing timestamp_s; missing requests", which said nothing of what to rename."""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.simulation.trace_file import TraceError, columns
from tests.simulation.runs import FAILED, SIMULATE, report, simulate

GRAFANA_TABLE = ('"Time","model","Value"\n'
                 + "".join(f'"2024-01-01 10:{minute:02d}:00","{model}",{3 + minute}\n'
                           for minute in range(30) for model in ("a", "b")))
"""Grafana's CSV of `sum by (model) (increase(COUNTER[60s]))` with the query's Format set to Table: a quoted
header, the time formatted in the browser's zone, a row per model and step."""

RENAME = re.compile(r"(?:rename| and) (\w+(?: #\w+)?) to (\w+)")
"""Each change a refusal tells: "rename Time to timestamp_s and Value to requests"."""


def refused(tmp_path: Path, text: str) -> str:
    """`simulate`'s one line about a trace of `text`, its name and `FAILED` taken off."""
    trace = tmp_path / "export.csv"
    trace.write_text(text)
    result = simulate(tmp_path, trace)
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"{FAILED}{trace}: line 1: "), line
    return line.removeprefix(f"{FAILED}{trace}: line 1: ")


def renamed(text: str, said: str) -> str:
    """`text` with its header changed as `said` tells, and nothing else."""
    header, rest = text.split("\n", 1)
    names = [name.strip('"') for name in header.split(",")]
    for old, new in RENAME.findall(said):
        names[names.index(old)] = new
    return ",".join(names) + "\n" + rest


def test_grafanas_table_export_is_told_the_two_renames_that_make_it_replay(tmp_path: Path) -> None:
    said = refused(tmp_path, GRAFANA_TABLE)
    assert RENAME.findall(said) == [("Time", "timestamp_s"), ("Value", "requests")], said
    assert "per-minute table" not in said, said  # the generic alternative, beside the point here
    fixed = tmp_path / "fixed.csv"
    fixed.write_text(renamed(GRAFANA_TABLE, said))
    result = simulate(tmp_path, fixed, "--policies", "fixed")
    assert result.returncode == 0, result.stderr
    assert report(tmp_path)["policies"]["fixed"]["requests"] == sum(2 * (3 + minute) for minute in range(30))


def test_a_request_logs_timestamp_column_is_told_its_name(tmp_path: Path) -> None:
    said = refused(tmp_path, "timestamp,model,requests\n0,a,1\n60,a,2\n")
    assert RENAME.findall(said) == [("timestamp", "timestamp_s")], said


def test_a_log_of_single_requests_is_told_the_converter(tmp_path: Path) -> None:
    """`timestamp,model` and no count: a row per request, which `request_log` bins."""
    said = refused(tmp_path, "timestamp,model\n1700000000,a\n1700000001,b\n")
    assert "python -m autoscaler.simulation.request_log --model-column model" in said, said
    assert not RENAME.findall(said), said


def test_grafanas_default_export_a_column_per_model_is_told_how_to_export_rows(tmp_path: Path) -> None:
    """"Series joined by time": `Time` then a column per series. Nothing here reads that layout, so the
    refusal says how to have Grafana write a row per model instead, and the renames that follow."""
    said = refused(tmp_path, '"Time","a","b"\n"2024-01-01 10:00:00",3,4\n"2024-01-01 10:01:00",5,6\n')
    assert "a column per model" in said and "Format to Table" in said, said
    assert "rename Time to timestamp_s and Value to requests" in said, said


NAMES_OF_TIME = st.sampled_from(["timestamp_s", "Time", "time", "TIMESTAMP", "ts", "Date", "datetime"])
NAMES_OF_COUNT = st.sampled_from(["requests", "Value", "value", "Value #A", "count", "Counts"])
OTHERS = st.lists(st.sampled_from(["", "instance", "job", "le", "latency_ms"]), max_size=3, unique=True)


@settings(max_examples=300, deadline=None)
@given(time=NAMES_OF_TIME, count=NAMES_OF_COUNT, others=OTHERS, order=st.randoms(use_true_random=False))
def test_a_header_renamed_as_told_is_read(time: str, count: str, others: list[str], order: random.Random) -> None:
    """Whatever the export calls its time and count columns, and whatever else it keeps, in any order: a header
    refused with renames is read once they are made, and one that needs none is read as it is."""
    header = [time, "model", count, *others]
    order.shuffle(header)
    try:
        columns(header, "export.csv")
        return
    except TraceError as refusal:
        said = str(refusal)
    changes = dict(RENAME.findall(said))
    assert changes, said
    at = columns([changes.get(h, h) for h in header], "export.csv")
    assert [header[i] for i in at[:3]] == [time, "model", count]


def test_a_count_column_of_another_name_is_named_not_sent_to_request_log(tmp_path: Path) -> None:
    """`Time,model,rps` was told the request_log line, which counts rows: followed, 60 requests of 2 models, the
    rps dropped without a word. It is told to rename rps (a count) or to multiply it first (a rate)."""
    text = "Time,model,rps\n" + "".join(f"{60 * minute},{model},{2 + minute}\n"
                                        for minute in range(30) for model in ("a", "b"))
    said = refused(tmp_path, text)
    assert "request_log" not in said, said
    assert RENAME.findall(said) == [("Time", "timestamp_s"), ("rps", "requests")], said
    assert "if it is a rate per second instead, multiply it by the interval's length in seconds" in said, said
    fixed = tmp_path / "fixed.csv"
    fixed.write_text(renamed(text, said))
    result = simulate(tmp_path, fixed, "--policies", "fixed")
    assert result.returncode == 0, result.stderr
    assert report(tmp_path)["policies"]["fixed"]["requests"] == sum(2 * (2 + minute) for minute in range(30))


def test_several_numeric_columns_are_named_and_text_ones_are_not(tmp_path: Path) -> None:
    said = refused(tmp_path, "timestamp,model,status,latency_ms,path\n0,a,200,12,/x\n")
    assert "if one of status, latency_ms is the number of requests" in said and "request_log" not in said, said
    said = refused(tmp_path, "timestamp,model,path\n0,a,/x\n")
    assert "request_log" in said, said


REQUEST_LOG_LINE = re.compile(r"python -m autoscaler\.simulation\.request_log .*$")
"""The converter's command line that a refusal ends with."""


@pytest.mark.parametrize(("file", "time", "piped"), [("log.csv", "timestamp", False), ("my log.csv", "Time", False),
                                                     ("log.csv", "datetime", False), ("it's.csv", "Date", False),
                                                     ("log.csv", "timestamp", True), ("log.csv", "date", True)])
def test_the_request_log_line_told_runs_as_pasted(tmp_path: Path, file: str, time: str, piped: bool) -> None:
    """The line told for a log of a row per request is run as a user pastes it, in a shell: it said "standard
    input" as a path for `--trace -`, left out the `--timestamp-column` a `date` column needs, and split a name
    with a space in two. Followed, the trace it writes replays every request."""
    log = tmp_path / file
    log.write_text(f"{time},model\n" + "".join(f"2024-01-01T10:{second // 60:02d}:{second % 60:02d}Z,{model}\n"
                                               for second in range(0, 600, 7) for model in ("a", "b")))
    rows = len(range(0, 600, 7)) * 2
    trace = "-" if piped else file
    result = subprocess.run([*SIMULATE, "--trace", trace, "--out", "out", "--no-plot", "--quiet"], cwd=tmp_path,
                            input=log.read_text() if piped else None, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    said = result.stderr.strip().splitlines()[-1]
    line = REQUEST_LOG_LINE.search(said)
    assert line is not None and ("pipe it into" in said) == piped, said
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # `python` is the tests' Python
    ran = subprocess.run(["bash", "-c", f"cat {shlex.quote(file)} | {line[0]}" if piped else line[0]],
                         cwd=tmp_path, env={**os.environ, "PATH": path}, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, (line[0], ran.stderr)
    result = subprocess.run([*SIMULATE, "--trace", "trace.csv", "--out", "out", "--no-plot", "--quiet",
                             "--policies", "fixed"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "out" / "report.json").read_text())["trace"]["requests"] == rows


@settings(max_examples=300, deadline=None)
@given(time=st.sampled_from(["timestamp_s", "Time", "ts", "Date", "datetime"]),
       others=st.lists(st.tuples(st.sampled_from(["rps", "status", "path", "", "job", "qps #A"]),
                                 st.sampled_from(["3", "0.5", "1e3", "/x", "ok", ""])), max_size=3,
                       unique_by=lambda other: other[0]),
       order=st.randoms(use_true_random=False))
def test_request_log_is_told_only_where_no_other_column_holds_a_number(
    time: str, others: list[tuple[str, str]], order: random.Random,
) -> None:
    """request_log counts rows: told for a header with a column of numbers besides the time, that column was
    dropped without a word. Such a column is named instead, as the one to rename."""
    cells = [(time, "2024-01-01T00:00:00"), ("model", "a"), *others]
    order.shuffle(cells)
    with pytest.raises(TraceError) as refusal:
        columns([name for name, _ in cells], "export.csv", [value for _, value in cells])
    said = str(refusal.value)
    numbers = [name for name, value in others if name and value in ("3", "0.5", "1e3")]
    assert ("request_log" in said) == (not numbers), said
    assert all(f" {name} " in said or f" {name}," in said for name in numbers), said
