"""The request-log converter as a user runs it: logs with a row per request in, a trace `simulate` replays out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from autoscaler.simulation.trace import read_csv
from tests.simulation.runs import CONVERT_FAILED, REPO, convert


def test_one_file_per_model_with_iso_times_becomes_counts_per_second(tmp_path: Path) -> None:
    """As the Azure LLM inference traces come: a TIMESTAMP column with seven fractional digits, a file per
    model. Counted by hand: code has 2 requests in second 0 and 1 in second 2; conv 1 in second 1."""
    (tmp_path / "code.csv").write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                       "2023-11-16 18:17:03.9799600,4808,10\n"
                                       "2023-11-16 18:17:04.0319600,3180,8\n"
                                       "2023-11-16 18:17:06.5000000,110,27\n")
    (tmp_path / "conv.csv").write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                       "2023-11-16 18:17:05.1000000,374,44\n")
    out = tmp_path / "trace.csv"
    result = convert("code=" + str(tmp_path / "code.csv"), "conv=" + str(tmp_path / "conv.csv"), "--out", out)
    assert result.returncode == 0, result.stderr
    assert out.read_text() == "timestamp_s,model,requests\n0,code,2\n1,conv,1\n2,code,1\n"
    assert "4 requests of 2 models" in result.stderr
    trace = read_csv(out)
    assert (trace.interval_s, trace.total_requests, trace.models) == (1.0, 4.0, ("code", "conv"))


def test_a_model_column_and_unix_seconds_in_one_sparse_log_keep_the_interval(tmp_path: Path) -> None:
    """Requests 60 s apart binned by 10 s: without an anchor `simulate` would infer 60 s intervals."""
    log = tmp_path / "access.csv"
    log.write_text("ts,model,status\n1700000000.5,a,200\n1700000060.5,b,200\n1700000061,a,500\n")
    out = tmp_path / "trace.csv"
    result = convert(log, "--model-column", "model", "--interval", "10", "--out", out)
    assert result.returncode == 0, result.stderr
    assert out.read_text() == "timestamp_s,model,requests\n0,a,1\n10,a,0\n60,a,1\n60,b,1\n"
    assert read_csv(out).interval_s == 10.0


def test_the_trace_replays_in_simulate(tmp_path: Path) -> None:
    log = tmp_path / "access.csv"
    log.write_text("time,model\n" + "".join(f"{t / 4:.2f},m{t % 3}\n" for t in range(2400)))
    trace = tmp_path / "trace.csv"
    assert convert(log, "--model-column", "model", "--out", trace).returncode == 0
    result = subprocess.run([sys.executable, "-m", "autoscaler.cli", "simulate", "--trace", str(trace),
                             "--out", str(tmp_path / "report"), "--policies", "fixed,mean-hpa", "--no-plot",
                             "--quiet", "--pod-rps", "2"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert {name: policy["requests"] for name, policy in report["policies"].items()} == {
        "fixed": 2400, "mean-hpa": 2400}


def test_mistakes_get_one_line_that_says_what_to_fix(tmp_path: Path) -> None:
    log = tmp_path / "access.csv"
    log.write_text("when,model\n2023-11-16T18:17:03Z,a\n")
    result = convert(log, "--model-column", "model", "--out", tmp_path / "t.csv")
    assert result.returncode == 2
    assert "no timestamp column" in result.stderr and "--timestamp-column" in result.stderr
    assert "Traceback" not in result.stderr
    log.write_text("timestamp,model\n2023-11-16T18:17:03Z,a\nyesterday,a\n")
    result = convert(log, "--model-column", "model", "--out", tmp_path / "t.csv")
    assert result.returncode == 2 and "line 3" in result.stderr and "Traceback" not in result.stderr
    result = convert(log, "--out", tmp_path / "t.csv")  # a plain FILE needs --model-column
    assert result.returncode == 2 and "MODEL=FILE" in result.stderr


def test_a_log_of_more_than_eleven_days_keeps_every_second(tmp_path: Path) -> None:
    """Interval starts past 999,999 s were written as 1.47091e+06, so a log of two weeks at 1 s became a trace
    that `simulate` refused ('listed twice') or read at the wrong times."""
    log = tmp_path / "access.csv"
    log.write_text("ts,model\n1733011200,a\n1733011201,a\n1734481111,a\n1734481112,b\n1734481113,a\n")
    out = tmp_path / "trace.csv"
    result = convert("--model-column", "model", log, "--out", out)
    assert result.returncode == 0, result.stderr
    assert out.read_text().splitlines()[-3:] == ["1469911,a,1", "1469912,b,1", "1469913,a,1"]
    assert "over 1469914 s" in result.stderr
    trace = read_csv(out)
    assert (trace.interval_s, trace.intervals, trace.total_requests) == (1.0, 1469914, 5.0)


def test_epoch_milliseconds_are_refused_naming_the_flag_that_reads_them(tmp_path: Path) -> None:
    """Many logs (JavaScript, Kafka, Grafana) write epoch milliseconds. They were read as seconds: 2 s of
    requests became 2,000 s of trace, without a word, and every rate 1,000 times too low."""
    log = tmp_path / "access.csv"
    log.write_text("timestamp,model\n1733011200000,a\n1733011200500,b\n1733011202000,a\n")
    out = tmp_path / "t.csv"
    result = convert("--model-column", "model", log, "--out", out)
    assert result.returncode == 2
    assert result.stderr == (f"{CONVERT_FAILED}{log}, line 2: timestamp 1733011200000 is the year 56886 as seconds: "
                             "these look like milliseconds since the epoch; add --timestamp-unit ms\n")
    result = convert("--model-column", "model", log, "--out", out, "--timestamp-unit", "ms")
    assert result.returncode == 0, result.stderr
    assert out.read_text() == "timestamp_s,model,requests\n0,a,1\n0,b,1\n1,a,0\n2,a,1\n"
    assert "3 requests of 2 models over 3 s" in result.stderr


def test_a_time_that_is_not_one_says_what_is_read(tmp_path: Path) -> None:
    log = tmp_path / "access.csv"
    log.write_text("time,model\n01/Dec/2024:10:00:00 +0000,a\n")
    result = convert("--model-column", "model", log, "--out", tmp_path / "t.csv")
    assert result.stderr == (f"{CONVERT_FAILED}{log}, line 2: timestamp must be Unix seconds (see --timestamp-unit) or "
                             "an ISO 8601 date-time, got '01/Dec/2024:10:00:00 +0000'\n")


def test_a_big_log_is_binned_in_a_few_dozen_bytes_a_request(tmp_path: Path) -> None:
    """Every request was kept as a Python (time, model) pair, about 150 bytes: a 2 GB access log (30 million
    requests) needed 4.5 GB. Measured in a fresh process, as a user runs it."""
    requests = 300_000
    log = tmp_path / "access.csv"
    with log.open("w") as fh:
        fh.write("ts,model\n")
        fh.writelines(f"{1733011200 + i / 1000:.3f},model-{i % 50}\n" for i in range(requests))
    script = ("import resource, sys\n"
              "from autoscaler.simulation.request_log import main\n"
              "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
              "main(['--model-column', 'model', sys.argv[1], '--out', sys.argv[2]])\n"
              "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)\n")
    result = subprocess.run([sys.executable, "-c", script, str(log), str(tmp_path / "t.csv")], capture_output=True,
                            text=True, check=True, timeout=120, cwd=REPO)
    assert f"{requests} requests of 50 models over 300 s" in result.stderr
    assert int(result.stdout) * 1024 / requests < 40, f"{int(result.stdout) * 1024 / requests:.0f} bytes a request"
    assert read_csv(tmp_path / "t.csv").total_requests == requests


def test_a_model_named_by_two_columns_keeps_functions_of_two_apps_apart(tmp_path: Path) -> None:
    """Azure Functions' 2021 invocation trace (app, func, end_timestamp, duration): a func id is unique only
    within its app, so `--model-column func` made one model of two apps' functions. With `app,func` the second
    app's function is its own model: a/f has 2 requests in second 0, b/f 1 in second 1."""
    log = tmp_path / "invocations.csv"
    log.write_text("app,func,end_timestamp,duration\na,f,5160.14,0.134\nb,f,5161.28,0.013\na,f,5160.9,0.2\n")
    out = tmp_path / "trace.csv"
    result = convert(log, "--model-column", "app,func", "--timestamp-column", "end_timestamp", "--out", out,
                     "--quiet")
    assert result.returncode == 0, result.stderr
    assert out.read_text() == "timestamp_s,model,requests\n0,a/f,2\n1,b/f,1\n"
    result = convert(log, "--model-column", "app,fn", "--timestamp-column", "end_timestamp", "--out", out, "--quiet")
    assert result.returncode == 2
    assert "no model column (fn) in the header app, func, end_timestamp, duration" in result.stderr
