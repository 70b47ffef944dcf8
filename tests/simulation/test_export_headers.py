"""Headers that exports write, refused naming the change that makes them a trace: Grafana's table export
(`Time,model,Value`), its default export (a column per model), a request log's `timestamp`. They were refused
"missing timestamp_s; missing requests", which said nothing of what to rename."""

from __future__ import annotations

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
from tests.simulation.replays import replay_once
from tests.simulation.runs import FAILED, SIMULATE, simulate

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


def assert_renamed_replays(tmp_path: Path, text: str, said: str, requests: int) -> None:
    """The trace renamed as the error told replays, every one of its `requests`."""
    fixed = tmp_path / "fixed.csv"
    fixed.write_text(renamed(text, said))
    assert replay_once(fixed)["policies"]["fixed"]["requests"] == requests


def test_grafanas_table_export_is_told_the_two_renames_that_make_it_replay(tmp_path: Path) -> None:
    said = refused(tmp_path, GRAFANA_TABLE)
    assert RENAME.findall(said) == [("Time", "timestamp_s"), ("Value", "requests")], said
    assert "per-minute table" not in said, said  # the generic alternative, beside the point here
    assert_renamed_replays(tmp_path, GRAFANA_TABLE, said, sum(2 * (3 + minute) for minute in range(30)))


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
    assert RENAME.findall(said) == [("Time", "timestamp_s"), ("rps", "requests")], said
    assert said.startswith("if rps is the number of requests in each interval, rename ") or \
        "; if rps is the number of requests in each interval, rename " in said, said
    assert "if it is a rate per second instead, multiply it by the interval's length in seconds" in said, said
    fixed = tmp_path / "fixed.csv"
    fixed.write_text(renamed(text, said))
    assert replay_once(fixed)["policies"]["fixed"]["requests"] == sum(2 * (2 + minute) for minute in range(30))


def test_several_numeric_columns_are_named_and_text_ones_are_not(tmp_path: Path) -> None:
    said = refused(tmp_path, "timestamp,model,status,latency_ms,path\n0,a,200,12,/x\n")
    assert "if one of status, latency_ms is the number of requests" in said, said
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
    assert replay_once(tmp_path / "trace.csv")["trace"]["requests"] == rows


CELLS = st.sampled_from(["3", "0.5", "1e3", "/x", "ok", ""])
"""A cell of a column besides the time and the model: numbers, text, or empty (Grafana's step with no value)."""


@settings(max_examples=300, deadline=None)
@given(time=st.sampled_from(["timestamp_s", "Time", "ts", "Date", "datetime"]),
       others=st.lists(st.tuples(st.sampled_from(["rps", "status", "path", "", "job", "qps #A"]),
                                 st.lists(CELLS, min_size=3, max_size=3)), max_size=3,
                       unique_by=lambda other: other[0]),
       order=st.randoms(use_true_random=False))
def test_a_column_that_may_be_the_count_is_named_beside_the_request_log_line(
    time: str, others: list[tuple[str, list[str]]], order: random.Random,
) -> None:
    """request_log counts rows: told alone for a header with a column of numbers besides the time (judged from
    its first cell, empty in Grafana's export of a step with no value), that column was dropped without a word;
    told only to rename such a column, a request log's latencies were counted as requests. Every column whose
    cells are numbers (or empty) is named as the one to rename, no column of text is, and the request_log line is
    always told, last, for the reading where each row is a request."""
    cells = [(time, ["2024-01-01T00:00:00"] * 3), ("model", ["a"] * 3), *others]
    order.shuffle(cells)
    with pytest.raises(TraceError) as refusal:
        columns([name for name, _ in cells], "export.csv", [[column[at] for _, column in cells] for at in range(3)])
    said = str(refusal.value)
    numbers = [name for name, column in others if name and all(cell in ("3", "0.5", "1e3", "") for cell in column)]
    texts = [name for name, column in others if name and name not in numbers]
    assert REQUEST_LOG_LINE.search(said) is not None, said
    assert ("if each row is one request" in said) == bool(numbers), said
    assert all(f" {name} " in said or f" {name}," in said for name in numbers), said
    assert not any(f" {name} " in said or f" {name}," in said for name in texts), said


def pasted(tmp_path: Path, said: str, piped: str | None = None) -> subprocess.CompletedProcess[str]:
    """The request_log line that `said` ends with, run in bash as a user pastes it (`cat piped | LINE` where the
    log was piped in), in tmp_path."""
    line = REQUEST_LOG_LINE.search(said)
    assert line is not None, said
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # `python` is the tests' Python
    return subprocess.run(["bash", "-c", line[0] if piped is None else f"cat {shlex.quote(piped)} | {line[0]}"],
                          cwd=tmp_path, env={**os.environ, "PATH": path}, capture_output=True, text=True,
                          timeout=60)


def replayed(tmp_path: Path, trace: str) -> int:
    """The requests `simulate` replays from tmp_path/trace."""
    return int(replay_once(tmp_path / trace)["trace"]["requests"])


def test_a_count_column_whose_first_cell_is_empty_is_still_told_as_a_count(tmp_path: Path) -> None:
    """Grafana writes a step with no value as an empty cell: `Time,model,rps` whose first rps is empty was told
    only the request_log line, which, followed, replayed a request a row, the rps dropped without a word."""
    text = "Time,model,rps\n0,a,\n" + "".join(f"{60 * minute},a,{50 + minute}\n" for minute in range(1, 30))
    said = refused(tmp_path, text)
    assert RENAME.findall(said) == [("Time", "timestamp_s"), ("rps", "requests")], said
    fixed = tmp_path / "fixed.csv"
    fixed.write_text(renamed(text, said))
    assert replayed(tmp_path, "fixed.csv") == sum(50 + minute for minute in range(1, 30))


def test_a_request_log_with_numeric_columns_is_told_both_readings(tmp_path: Path) -> None:
    """`timestamp,model,status,latency_ms` is a request log, a row per request: it was told only to rename
    status or latency_ms to requests, which, followed, replayed the latencies as requests. Both readings are
    told, each with its change, and the request_log line, pasted, replays a request a row."""
    log = tmp_path / "access.csv"
    log.write_text("timestamp,model,status,latency_ms\n" + "".join(f"{1733011200 + second},{model},200,{12 + second}\n"
                                                                  for second in range(0, 300, 3) for model in "ab"))
    said = refused(tmp_path, log.read_text())
    assert "if one of status, latency_ms is the number of requests in each interval, rename" in said, said
    assert "if each row is one request, bin it into a trace with python -m autoscaler.simulation.request_log" in said
    ran = pasted(tmp_path, said)
    assert ran.returncode == 0, ran.stderr
    assert replayed(tmp_path, "trace.csv") == 200


@pytest.mark.parametrize(("scale", "unit"), [(1000, "ms"), (1_000_000, "us")])
def test_epoch_milliseconds_are_told_with_their_unit(tmp_path: Path, scale: int, unit: str) -> None:
    """`Time,model` with epoch milliseconds was told a line without `--timestamp-unit ms`, which, pasted, was
    refused saying to add it."""
    log = tmp_path / "log.csv"
    log.write_text("Time,model\n" + "".join(f"{(1733011200 + second) * scale},a\n" for second in range(0, 120, 2)))
    said = refused(tmp_path, log.read_text())
    assert f"--timestamp-unit {unit}" in said, said
    ran = pasted(tmp_path, said)
    assert ran.returncode == 0, ran.stderr
    assert replayed(tmp_path, "trace.csv") == 60


@pytest.mark.parametrize("piped", [False, True])
def test_a_log_whose_name_starts_with_a_dash_is_told_a_line_that_runs(tmp_path: Path, piped: bool) -> None:
    """`--trace ./-x.csv` was told `... -x.csv --out trace.csv`, which argparse reads as an option: pasted, it
    was refused "the following arguments are required"."""
    (tmp_path / "-x.csv").write_text("date,model\n" + "".join(f"2024-01-01T10:00:{second:02d}Z,a\n"
                                                                for second in range(40)))
    result = subprocess.run([*SIMULATE, "--trace", "-" if piped else "./-x.csv", "--out", "out", "--no-plot",
                             "--quiet"], cwd=tmp_path, input=(tmp_path / "-x.csv").read_text() if piped else None,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    ran = pasted(tmp_path, result.stderr.strip().splitlines()[-1], "./-x.csv" if piped else None)
    assert ran.returncode == 0, ran.stderr
    assert replayed(tmp_path, "trace.csv") == 40


@pytest.mark.parametrize("label", ["modelId", "model_id", "model_name", "modelName", "MODELID", "vModelId"])
def test_a_prometheus_export_of_modelmeshs_model_label_is_told_to_rename_it(tmp_path: Path, label: str) -> None:
    """ModelMesh's per-model metrics carry the label `modelId` (`vModelId`, the InferenceService), and an export
    of them has that column: it was refused "missing model; or a per-minute table", which named no change. It is
    told the rename, and the trace renamed as told replays every request."""
    text = f"timestamp_s,{label},requests\n" + "".join(f"{60 * minute},{model},{1 + minute}\n"
                                                      for minute in range(10) for model in ("a", "b"))
    said = refused(tmp_path, text)
    assert RENAME.findall(said) == [(label, "model")], said
    assert "per-minute table" not in said, said
    assert_renamed_replays(tmp_path, text, said, sum(2 * (1 + minute) for minute in range(10)))


def test_grafanas_table_export_of_modelid_is_told_all_three_renames(tmp_path: Path) -> None:
    said = refused(tmp_path, GRAFANA_TABLE.replace('"model"', '"modelId"'))
    assert sorted(RENAME.findall(said)) == [("Time", "timestamp_s"), ("Value", "requests"), ("modelId", "model")]


def test_both_of_modelmeshs_labels_are_named_as_the_choice_they_are(tmp_path: Path) -> None:
    """`modelId` and `vModelId` both name a model (a ModelMesh model, or the InferenceService over it): either
    renamed replays, so the refusal names both and renames neither of its own accord."""
    said = refused(tmp_path, "timestamp_s,modelId,vModelId,requests\n0,m-1,isvc,3\n")
    assert "rename one of modelId, vModelId to model" in said, said


def test_a_column_of_another_name_is_not_taken_for_the_model(tmp_path: Path) -> None:
    said = refused(tmp_path, "timestamp_s,pod,requests\n0,a,3\n")
    assert "rename" not in said and "per-minute table" in said, said


def test_a_request_log_with_both_of_modelmeshs_labels_is_told_which_the_line_takes_and_how_to_take_the_other(
        tmp_path: Path) -> None:
    """A log of `timestamp,modelId,vModelId` was told a request_log line with `--model-column modelId`, the first,
    without a word: a user who counts InferenceServices (`vModelId`) binned by ModelMesh models unawares. The
    refusal says which the line takes and the flag that takes the other, and each, pasted, bins by its own."""
    text = "timestamp,modelId,vModelId\n" + "".join(f"{minute},{model},isvc-a\n"
                                                  for minute in range(10) for model in ("m-1", "m-2"))
    said = refused(tmp_path, text)
    before, _, line = said.partition("python -m autoscaler.simulation.request_log")
    assert "--model-column modelId" in line, said
    assert "modelId" in before and "--model-column vModelId" in before, said
    assert pasted(tmp_path, said).returncode == 0
    assert {row.split(",")[1] for row in (tmp_path / "trace.csv").read_text().splitlines()[1:]} == {"m-1", "m-2"}
    assert pasted(tmp_path, said.replace("--model-column modelId", "--model-column vModelId")).returncode == 0
    assert {row.split(",")[1] for row in (tmp_path / "trace.csv").read_text().splitlines()[1:]} == {"isvc-a"}
