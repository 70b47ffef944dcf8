"""Traces as users bring them (CSV) and as the generator draws them."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from autoscaler.simulation.synthetic_trace import synthetic
from autoscaler.simulation.trace import TraceError, from_rows, read_csv
from autoscaler.simulation.trace_buckets import buckets
from autoscaler.simulation.trace_write import write_csv
from tests.simulation.runs import simulate, write_trace
from tests.simulation.test_scrape_times import periodic_clients


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_csv_trace_is_read_with_its_interval_inferred(tmp_path: Path) -> None:
    trace = read_csv(write(tmp_path / "t.csv", "timestamp_s,model,requests\n"
                           "1000,resnet,120\n1000,bert,6\n1060,resnet,60\n1180,bert,3\n"))
    assert trace.models == ("bert", "resnet")  # by name, whatever the order of the rows
    assert (trace.interval_s, trace.intervals, trace.total_requests) == (60.0, 4, 189.0)
    # 126 requests in the first minute, 60 in the second, none in the third, 3 in the fourth.
    assert trace.rate_per_interval().tolist() == [2.1, 1.0, 0.0, 0.05]


@pytest.mark.parametrize(("text", "message"), [
    ("time,model,requests\n0,a,1\n", "line 1: expected the header timestamp_s,model,requests"),
    ("timestamp_s,model,requests\n0,a,1\n60,a,-2\n", "line 3: requests must be >= 0"),
    ("timestamp_s,model,requests\n0,a,inf\n", "line 2: requests must be finite"),
    ("timestamp_s,model,requests\n0,a,nan\n", "every row's requests is empty, NaN or null \\(1 row: line 2\\)"),
    ("timestamp_s,model,requests\n0,a,1\n60,a\n", "line 3: expected 3 fields"),
    ("timestamp_s,model,requests\n0,a,1\n60,b,1\n90,b,1\n130,a,1\n", "line 5: timestamp 130 is not on the 30 s grid"),
    ("timestamp_s,model,requests\n0,a,1\n60,a,1\n0,a,4\n", "line 4: model 'a' at 0 is listed twice"),
    # The line a user opens the file at, past blank lines and a quoted model name that spans two lines.
    ("timestamp_s,model,requests\n\n\n0,a,1\n60,a,2\n60,a,3\n", "line 6: model 'a' at 60 is listed twice"),
    ("timestamp_s,model,requests\n0,\"two\nlines\",1\n60,a,1\n90,a,1\n130,a,1\n",
     "line 6: timestamp 130 is not on the 30 s grid"),
    ("timestamp_s,model,requests\n0,\"two\nlines\",1\n\n60,a,x\n", "line 5: requests must be a number"),
    ("timestamp_s,model,requests\n0,a,1\n1200,a,1\n", "intervals must be 1 s to 10 min"),
    # Grafana's CSV export writes epoch milliseconds or dates: say what timestamp_s wants.
    ("timestamp_s,model,requests\n1733011200000,a,5\n1733011215000,a,6\n",
     "15000 s apart; intervals must be 1 s to 10 min: these look like milliseconds since the epoch; divide "
     "timestamp_s by 1000"),
    ("timestamp_s,model,requests\n1 Dec 2024,a,5\n",
     "line 2: timestamp_s must be seconds since the epoch or an ISO 8601 date-time, got '1 Dec 2024'"),
    # epoch seconds are named as written, not as 1.73e+09
    ("timestamp_s,model,requests\n1733011200,a,5\n1733011260,a,6\n1733011200,a,4\n",
     "line 4: model 'a' at 1733011200 \\(2024-12-01T00:00:00Z\\) is listed twice"),
    ("timestamp_s,model,requests\n1733011200,a,5\n1733011240,a,6\n1733011300,a,4\n",
     "line 4: timestamp 1733011300 \\(2024-12-01T00:01:40Z\\) is not on the 40 s grid starting at 1733011200"),
    # Excel's dates as a US locale shows them: say how to write one
    ("timestamp_s,model,requests\n12/1/2025 0:00,a,1\n",
     "got '12/1/2025 0:00': write the date-time as ISO 8601, such as 2025-12-01T00:00:00 for 1 December 2025 "
     "\\(Excel: Format Cells, Custom, yyyy-mm-ddThh:mm:ss, before saving\\)"),
    # a name with a space before it is the name without: said where two rows then repeat a model
    ("timestamp_s,model,requests\n0,m0,1\n0, m0,2\n",
     "line 3: model 'm0' at 0 is listed twice; model names are read without the spaces around them: ' m0' on "
     "line 3 is 'm0'"),
    ("timestamp_s,model,requests\n0,,1\n", "line 2: model is empty"),
    ("timestamp_s,model,requests\n", "no rows after the header"),
    ("", "empty file; expected the header timestamp_s,model,requests"),
    # a collector's jittered times: named as a step of about 60 s, rounded to it (flooring to the smallest
    # gap's grid, as it said before, put 119.5 with 60 and read as a row listed twice)
    ("timestamp_s,model,requests\n0,a,1\n60,a,1\n119.5,a,1\n180,a,1\n",
     "timestamps are about 60 s apart but not exactly \\(up to 0.5 s off, as scrape times are; line 4: 119.5\\): "
     "round every timestamp to the 60 s step \\(pandas: .dt.round\\('60s'\\)"),
    # no common step (gaps of 60.5 and 89.5 s): the step to floor to is the grid named, in whole seconds (it
    # said "not on the 60.5 s grid ... .dt.floor('75s')", the median gap, which merges the 60.5 s rows' minutes)
    ("timestamp_s,model,requests\n0,a,1\n60.5,a,1\n150,a,1\n210.5,a,1\n300,a,1\n",
     "line 4: timestamp 150 is not on the 60.5 s grid starting at 0: round every timestamp down to a 60 s step "
     "\\(pandas: .dt.floor\\('60s'\\)"),
    # Excel in locales with a decimal comma writes ';' between fields; some exports use tabs
    ("timestamp_s;model;requests\n0;a;1\n", "line 1: fields are separated by ';', not commas: save the file as "
     "comma-separated CSV"),
    ("timestamp_s\tmodel\trequests\n0\ta\t1\n", "line 1: fields are separated by tabs, not commas: save the "
     "file as comma-separated CSV"),
])
def test_bad_traces_are_refused_with_the_line_and_the_fix(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        read_csv(write(tmp_path / "bad.csv", text))


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="cannot read trace"):
        read_csv(tmp_path / "nope.csv")


def test_minute_intervals_spread_over_ticks_and_second_intervals_add_up() -> None:
    minute = from_rows([0.0, 0.0, 60.0], ["a", "b", "a"], [120.0, 30.0, 60.0])
    length, parts = buckets(minute, 5.0)
    assert length == 60.0
    assert [(b.models, b.rates) for b in parts] == [([0, 1], [2.0, 0.5]), ([0], [1.0])]
    seconds = from_rows([0.0, 1.0, 2.0, 5.0], ["a"] * 4, [1.0, 2.0, 3.0, 10.0])
    length, parts = buckets(seconds, 5.0)
    assert length == 5.0
    assert [b.rates for b in parts] == [[6.0 / 5], [10.0 / 5]]
    with pytest.raises(TraceError, match="not a multiple of --tick"):
        buckets(from_rows([0.0, 7.0], ["a", "a"], [1.0, 1.0]), 5.0)


def test_csv_round_trip(tmp_path: Path) -> None:
    trace = synthetic(models=20, hours=0.5, seed=3)
    write_csv(trace, tmp_path / "t.csv")
    again = read_csv(tmp_path / "t.csv")
    assert again.total_requests == trace.total_requests
    assert again.interval_s == trace.interval_s
    assert np.allclose(again.rate_per_interval(), trace.rate_per_interval()[: again.intervals])


def test_the_generator_repeats_for_a_seed_and_draws_the_shapes_it_names() -> None:
    a, b = synthetic(models=50, hours=2, seed=7), synthetic(models=50, hours=2, seed=7)
    assert a.total_requests == b.total_requests and np.array_equal(a.model, b.model)
    assert synthetic(models=50, hours=2, seed=8).total_requests != a.total_requests
    day_steady = synthetic(models=50, hours=24, shape="steady", seed=1).rate_per_interval()
    day_cycle = synthetic(models=50, hours=24, shape="diurnal", seed=1).rate_per_interval()
    assert day_steady.max() / day_steady.min() < 1.5  # Poisson noise only
    assert day_cycle.max() / day_cycle.min() > 4  # 1.7 / 0.3 at the extremes
    heavy = synthetic(models=200, hours=1, shape="heavy-tailed", seed=1)
    top = np.bincount(heavy.model, weights=heavy.requests).max() / heavy.total_requests
    assert top > 0.3  # with s = 1.6 the hottest of 200 models takes about 40% of requests


def test_a_trace_as_spreadsheets_and_converters_write_it_is_read(tmp_path: Path) -> None:
    """Excel's "CSV UTF-8" starts with a byte-order mark and ends lines with CRLF; converters put the columns
    in their own order and use epoch seconds. The same three columns, by name, read the same trace."""
    epoch = 1_700_000_000
    text = (f"model,requests,timestamp_s\r\nresnet,120,{epoch}\r\nbert,6,{epoch}\r\nresnet,60,{epoch + 60}\r\n"
            f"bert,3,{epoch + 180}\r\n")
    (tmp_path / "excel.csv").write_bytes(b"\xef\xbb\xbf" + text.encode())
    trace = read_csv(tmp_path / "excel.csv")
    assert trace.models == ("bert", "resnet")  # by name, whatever the order of the rows
    assert (trace.start_s, trace.interval_s, trace.intervals) == (epoch, 60.0, 4)
    assert trace.rate_per_interval().tolist() == [2.1, 1.0, 0.0, 0.05]


def test_a_gzipped_trace_is_read_as_it_is(tmp_path: Path) -> None:
    """Traces of a fleet run to gigabytes and are kept compressed: FILE.csv.gz is read without unpacking."""
    import gzip

    with gzip.open(tmp_path / "t.csv.gz", "wt", encoding="utf-8") as fh:
        fh.write("timestamp_s,model,requests\n0,a,30\n5,a,10\n5,b,5\n")
    trace = read_csv(tmp_path / "t.csv.gz")
    assert (trace.models, trace.interval_s, trace.total_requests) == (("a", "b"), 5.0, 45.0)
    # gzip's first bytes, then not its format: damaged gzip; no gzip bytes at all: plain text misnamed
    (tmp_path / "broken.csv.gz").write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(TraceError, match=r"broken.csv.gz: a damaged gzip file \(Unknown compression method\)"):
        read_csv(tmp_path / "broken.csv.gz")
    (tmp_path / "plain.csv.gz").write_text("timestamp_s,model,requests\n0,a,30\n")
    with pytest.raises(TraceError, match=r"plain.csv.gz: not a gzip file .*; name it .csv if it is plain text"):
        read_csv(tmp_path / "plain.csv.gz")


def test_the_header_is_read_in_any_case(tmp_path: Path) -> None:
    trace = read_csv(write(tmp_path / "t.csv", "Timestamp_s,Model,REQUESTS\n0,a,60\n60,a,120\n"))
    assert (trace.models, trace.total_requests) == (("a",), 180.0)


def test_a_header_with_a_column_missing_or_extra_names_it(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"line 1: .*missing requests"):
        read_csv(write(tmp_path / "a.csv", "timestamp_s,model,count\n0,a,1\n"))
    with pytest.raises(TraceError, match=r"line 1: .*model listed twice"):
        read_csv(write(tmp_path / "b.csv", "timestamp_s,model,model\n0,a,1\n"))


def test_iso_8601_timestamps_as_pandas_and_bigquery_write_them_are_read(tmp_path: Path) -> None:
    """A spreadsheet or a database export writes dates, not epoch seconds; the request-log converter reads them,
    so the trace reader does too (without a zone: UTC; only differences matter)."""
    trace = read_csv(write(tmp_path / "t.csv", "timestamp_s,model,requests\n"
                           "2024-12-01 00:00:00,a,60\n2024-12-01T00:01:00Z,a,120\n"
                           "2024-12-01 00:02:00+00:00,b,30\n2024-12-01 00:03:00.000000 UTC,b,6\n"))
    assert (trace.models, trace.interval_s, trace.intervals, trace.start_s) == (("a", "b"), 60.0, 4, 1733011200.0)
    assert trace.rate_per_interval().tolist() == [1.0, 2.0, 0.5, 0.1]


@pytest.mark.parametrize(("order", "most"), [("time", 80), ("series", 130)])
def test_a_big_trace_is_read_in_a_few_dozen_bytes_a_row(tmp_path: Path, order: str, most: int) -> None:
    """A week of 2,000 models at 60 s (15 million rows, 370 MB) peaked at 3.9 GB while read, 250 bytes a row as
    Python lists: a 2 GB export could not be read on a laptop. Measured in a fresh process, as a user runs it. It
    was 214 bytes a row again (the rows put in order were copied, the copies' temporaries kept, and their file
    lines made a list of Python ints), unseen as the figure read began at pytest's own peak. Rows in time order (as
    `write_csv` and a query_range export write them) are not copied; a model's rows after another's (pandas' melt
    of a wide frame) are, once."""
    rows = 400_000
    with (tmp_path / "big.csv").open("w") as fh:
        fh.write("timestamp_s,model,requests\n")
        fh.writelines(f"{1733011200 + 60 * (i // 400)},model-{i % 400:04d},{i % 97}\n" if order == "time" else
                      f"{1733011200 + 60 * (i % 1000)},model-{i // 1000:04d},{i % 97}\n" for i in range(rows))
    # The process's own high-water mark (VmHWM): ru_maxrss starts at the parent's (pytest's) peak, carried across
    # the exec, so the reading's peak showed only past pytest's: it passed in the whole suite and failed alone.
    # A small trace is read first: the modules a read imports as it goes are compiled on a clean clone (no
    # bytecode yet), 4 MB that read as 84 bytes a row in CI where 72 was the read's own
    (tmp_path / "small.csv").write_text("timestamp_s,model,requests\n1733011200,m,1\n1733011260,m,2\n")
    script = ("import re, sys\n"
              "from autoscaler.simulation.trace import read_csv\n"
              "def peak(): return int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))\n"
              "read_csv(sys.argv[2])\n"
              "before = peak()\n"
              "trace = read_csv(sys.argv[1])\n"
              "print(len(trace.slot), peak() - before)\n")
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "big.csv"), str(tmp_path / "small.csv")],
                         capture_output=True, text=True, check=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2]).stdout.split()
    assert int(out[0]) == rows
    assert int(out[1]) * 1024 / rows < most, f"{int(out[1]) * 1024 / rows:.0f} bytes a row"


def test_buckets_of_a_big_trace_take_a_few_dozen_bytes_a_row() -> None:
    """The replay's buckets were lists of Python numbers made once for all policies: 1.6 GB for a week of 2,000
    models at 60 s, on top of the trace. Each bucket is now made when the replay reaches it."""
    trace = synthetic(models=400, hours=4, mean_rps=4000, seed=1)
    assert len(trace.slot) > 80_000
    tracemalloc.start()
    length, parts = buckets(trace, 5.0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak / len(trace.slot) < 64, f"{peak / len(trace.slot):.0f} bytes a row"
    assert (length, len(parts)) == (60.0, trace.intervals)
    assert sum(sum(b.rates) for b in parts) * length == pytest.approx(trace.total_requests)
    assert [(b.models, b.rates) for b in parts[-2:]] == [(parts[i].models, parts[i].rates) for i in (-2, -1)]


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz"])
def test_reading_a_long_trace_says_how_far_it_got(tmp_path: Path, suffix: str) -> None:
    """A 2 GB export takes minutes to read; before, `simulate` said nothing until it was read, which looked like
    a hang. 200,000 rows (three reports on the way, every 65,536 rows) and one at the end, in bytes of the file
    as it is on disk (compressed for .gz)."""
    import gzip

    rows = "".join(f"{5 * (i // 2)},m{i % 2},1\n" for i in range(200_000))
    path = tmp_path / f"long{suffix}"
    text = "timestamp_s,model,requests\n" + rows
    if suffix.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    size = path.stat().st_size
    seen: list[tuple[int, int]] = []
    trace = read_csv(path, lambda done, total: seen.append((done, total)))
    assert trace.total_requests == 200_000
    assert len(seen) == 4 and seen[-1] == (size, size)
    assert all(total == size for _, total in seen)
    done = [d for d, _ in seen]
    assert done == sorted(done) and 0 < done[0] < size


EPOCH = 1764547200  # 2025-12-01T00:00:00Z


def night_cron(night_model: str) -> str:
    """Two days at 60 s: five models busy 07-22 h, and at night 100 requests every 5 minutes for `night_model`."""
    busy = range(7 * 60, 22 * 60)
    return "".join(f"{EPOCH + 60 * i},m{m},{300 + (i * 7 + m) % 50}\n" if i % 1440 in busy else
                   f"{EPOCH + 60 * i},{night_model},100\n"
                   for i in range(2 * 1440) if i % 1440 in busy or i % 5 == 0
                   for m in (range(5) if i % 1440 in busy else range(1)))


def test_a_night_cron_on_the_minute_grid_is_not_told_the_exports_step_changed(tmp_path: Path) -> None:
    """A 60 s trace busy by day whose nights hold only a job's batch every 5 minutes: every row is on the trace's
    minute grid, and the job's model never came a minute apart, so no export's step changed there (it was told
    "rows come every 300 s ... but every 60 s elsewhere ... export the whole trace at one step")."""
    trace = read_csv(write(tmp_path / "t.csv", "timestamp_s,model,requests\n" + night_cron("batch")))
    assert not [note for note in trace.notes if "rows come every" in note], trace.notes


def test_a_stretch_exported_at_a_coarser_step_is_still_named(tmp_path: Path) -> None:
    """Two hours of a 15 s export with an hour between at 60 s, the same models, each 60 s row holding four 15 s
    rows' requests (as `increase(...[60s])` at a 60 s step writes them): the export's step changed."""
    times = [*range(0, 3600, 15), *range(3600, 7200, 60), *range(7200, 10800, 15)]
    rows = "".join(f"{EPOCH + t},m{m},{(5 + m) * (4 if 3600 <= t < 7200 else 1)}\n" for t in times for m in range(3))
    trace = read_csv(write(tmp_path / "t.csv", "timestamp_s,model,requests\n" + rows))
    [note] = [note for note in trace.notes if "rows come every" in note]
    assert "rows come every 60 s from 1764550800 (2025-12-01T01:00:00Z)" in note, note
    assert "but every 15 s elsewhere" in note and "export the whole trace at one step" in note, note


def busy_then_sparse(interval: int, step: int, fine: int, coarse: int) -> str:
    """One model at `interval` s: 40 intervals of `fine` requests a row (every seventh missing at 1 s, as a
    request log has no row for a second without requests), 30 rows `step` s apart of `coarse` requests each,
    then 40 intervals of `fine` again."""
    times = [*range(0, 40 * interval, interval), *range(40 * interval, 40 * interval + 30 * step, step)]
    times += range(times[-1] + step, times[-1] + step + 40 * interval, interval)
    coarse_from, coarse_to = 40 * interval, 40 * interval + 30 * step
    return "".join(f"{EPOCH + t},api,{coarse if coarse_from <= t < coarse_to else fine}\n" for i, t in
                   enumerate(times) if coarse_from <= t < coarse_to or interval > 1 or i % 7)


@pytest.mark.parametrize(("interval", "step", "fine", "coarse"), [(1, 10, 3, 1), (15, 60, 200, 5)],
                         ids=["1s-log-health-check", "15s-export-cron"])
def test_a_model_that_comes_less_often_for_a_while_is_not_told_the_exports_step_changed(
        tmp_path: Path, interval: int, step: int, fine: int, coarse: int) -> None:
    """The reviewer's traces, shortened: a 1 s trace from a request log whose model is busy, then only a health
    check every 10 s, then busy again (and a 15 s export whose model gets a cron's few requests once a minute)
    were told "rows come every 10 s ... but every 1 s elsewhere ... export the whole trace at one step", which a
    request log cannot do. Rows carrying fewer requests than the rows next to them are traffic that sparse."""
    result = simulate(tmp_path, write_trace(tmp_path, busy_then_sparse(interval, step, fine, coarse)),
                      "--policies", "fixed")
    assert result.returncode == 0, result.stderr
    assert "rows come every" not in result.stderr, result.stderr


@pytest.mark.parametrize(("interval", "step", "fine"), [(1, 10, 3), (15, 60, 200)], ids=["1s", "15s"])
def test_a_stretch_whose_rows_carry_the_requests_of_a_coarser_step_is_named(
        tmp_path: Path, interval: int, step: int, fine: int) -> None:
    """The same shape where each coarse row holds `step / interval` times the requests of the rows next to it,
    as an export at that step writes the same traffic: the export's step changed there, and it is said."""
    trace = busy_then_sparse(interval, step, fine, fine * step // interval)
    result = simulate(tmp_path, write_trace(tmp_path, trace), "--policies", "fixed")
    assert result.returncode == 0, result.stderr
    assert f"rows come every {step} s from {EPOCH + 40 * interval} " in result.stderr, result.stderr
    assert f"but every {interval} s elsewhere" in result.stderr, result.stderr
    assert "export the whole trace at one step" in result.stderr, result.stderr


def test_a_one_second_trace_kept_with_its_row_of_0_is_written_and_read_back_as_it_was(tmp_path: Path) -> None:
    """A 1 s trace whose models each come every 15 s at their own second states its step with the row of 0 the
    refusal asks for; write_csv dropped that row (and pinned the second interval with another model), so the
    file it wrote was refused when read again."""
    rows = periodic_clients()
    first, model = rows.split(",")[:2]
    kept = read_csv(write(tmp_path / "kept.csv", f"timestamp_s,model,requests\n{int(first) + 1},{model},0\n{rows}"))
    assert kept.interval_s == 1.0
    write_csv(kept, tmp_path / "again.csv")
    again = subprocess.run([sys.executable, "-m", "autoscaler.cli", "simulate", "--trace", str(tmp_path / "again.csv"),
                            "--out", str(tmp_path / "out"), "--no-plot", "--quiet", "--policies", "fixed"],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert (read_csv(tmp_path / "again.csv").interval_s, read_csv(tmp_path / "again.csv").total_requests) == \
        (1.0, kept.total_requests)


ROWS = st.dictionaries(st.tuples(st.integers(0, 120), st.sampled_from("abc")),
                       st.integers(0, 40) | st.floats(0.0, 1e6, allow_nan=False), min_size=1, max_size=60)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.filter_too_much])
@given(rows=ROWS, step=st.sampled_from([1, 15, 60]))
def test_a_trace_written_by_write_csv_reads_back_as_it_was_read(tmp_path: Path, rows: dict[tuple[int, str], float],
                                                               step: int) -> None:
    """Whatever trace read_csv reads, write_csv writes a file that reads back to it: the same start, step,
    models and rows (rows of 0 kept), with at most a row of 0 in each of the first two intervals to pin them."""
    text = "".join(f"{EPOCH + step * slot},{model},{requests!r}\n" for (slot, model), requests in rows.items())
    try:
        first = read_csv(write(tmp_path / "first.csv", "timestamp_s,model,requests\n" + text))
    except TraceError:
        assume(False)
        raise
    write_csv(first, tmp_path / "again.csv")
    again = read_csv(tmp_path / "again.csv")
    assert (again.models, again.start_s, again.interval_s, again.intervals) == \
        (first.models, first.start_s, first.interval_s, first.intervals)
    before = set(zip(first.slot.tolist(), first.model.tolist(), first.requests.tolist(), strict=True))
    after = set(zip(again.slot.tolist(), again.model.tolist(), again.requests.tolist(), strict=True))
    assert before <= after, sorted(before - after)
    assert all(slot < 2 and requests == 0 for slot, _, requests in after - before), sorted(after - before)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from([1, 15, 60]), st.integers(2, 10), st.integers(1, 500), st.booleans())
def test_a_coarser_stretch_is_named_exactly_where_its_rows_hold_the_requests_of_their_step(
        tmp_path: Path, interval: int, every: int, fine: int, exported: bool) -> None:
    """Whatever the step and the load: rows `every` intervals apart that each hold `every` intervals' requests
    (an export at that step) are named, and rows no heavier than the rows around them (traffic that comes less
    often) are not."""
    assume(every * interval <= 600)
    trace = busy_then_sparse(interval, every * interval, fine, fine * every if exported else fine)
    read = read_csv(write(tmp_path / "t.csv", "timestamp_s,model,requests\n" + trace))
    assert any("rows come every" in note for note in read.notes) == exported, read.notes
