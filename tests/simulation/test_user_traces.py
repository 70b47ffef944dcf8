"""`simulate` on traces as users bring them from public datasets and their own fleets: Azure Functions'
invocations per minute (thousands of quiet models, most rows absent), traces pasted together from several
sources, files compressed or saved by a spreadsheet. Each ends in a right report or one line that says what
to fix, never a run that does not end, a traceback, or figures that read as something else."""

from __future__ import annotations

import bz2
import gzip
import lzma
import random
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from autoscaler.simulation.figures import hours_text
from autoscaler.simulation.report_text import bound_text
from autoscaler.simulation.trace import read_csv
from tests.simulation.runs import CONVERT_FAILED, FAILED, HEADER, convert, report, run_module, simulate, write_trace


@pytest.mark.parametrize(("rows", "said"), [
    # a converted trace (seconds from its start) pasted onto an export in epoch seconds: 54 years between
    ("0,a,5\n60,a,3\n1699999980,a,4\n1700000040,a,2\n",
     "line 4: no rows for 53.9 years before 1699999980 (2023-11-14T22:13:00Z), after 60 on line 3: the "
     "timestamps mix seconds from the trace's start with seconds since the epoch"),
    # and where the epoch part is not on the first part's grid, which read "not on the 60 s grid"
    ("0,a,5\n60,a,3\n1700000000,a,4\n1700000060,a,2\n", "mix seconds from the trace's start with seconds since"),
    # two captures a year apart
    ("0,a,5\n60,a,3\n31536000,a,4\n31536060,a,2\n",
     "line 4: no rows for 365 days before 31536000, after 60 on line 3"),
])
def test_a_trace_that_is_mostly_one_gap_is_refused_at_once_not_replayed_for_days(tmp_path: Path, rows: str,
                                                                                 said: str) -> None:
    """Rows of two captures with different time origins (or a year apart) replayed decades of nothing: a
    warning, then a progress bar at 0% for hours (and Python lists of every empty minute)."""
    trace = write_trace(tmp_path, rows)
    result = simulate(tmp_path, trace, timeout=60)
    assert result.returncode == 2, result.stderr[-2000:]
    line = result.stderr.strip().splitlines()[-1]
    assert said in line, line
    assert not (tmp_path / "out").exists()


def test_a_gap_of_days_is_warned_about_and_replayed(tmp_path: Path) -> None:
    """The refusal is for gaps of over a month that are most of the trace: two days without rows between two
    hours of them replay, said."""
    rows = "".join(f"{60 * i},a,{1 + i % 3}\n" for i in range(60))
    rows += "".join(f"{86400 * 2 + 60 * i},a,{1 + i % 3}\n" for i in range(60))
    trace = write_trace(tmp_path, rows)
    result = simulate(tmp_path, trace, "--policies", "fixed")
    assert result.returncode == 0, result.stderr
    assert any(w.startswith("no rows for 47 h") for w in report(tmp_path)["warnings"])


def test_rows_that_repeat_a_model_and_interval_are_counted_and_how_to_sum_them_is_said(tmp_path: Path) -> None:
    """A converted public trace repeats many rows (a function under two triggers, two regions' files pasted
    together): the refusal named the first and told a pandas user to sum by (model) in PromQL."""
    trace = write_trace(tmp_path, "0,a,1\n0,b,1\n60,a,2\n0,a,3\n60,a,1\n0,b,5\n")
    result = simulate(tmp_path, trace)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        f"{FAILED}{trace}: line 5: model 'a' at 0 is listed twice; 3 rows in all repeat a model and interval "
        "(one row per model and interval: sum them first: pandas df.groupby(['timestamp_s', 'model'], "
        "as_index=False).sum(); an export per pod: sum by (model) in PromQL)")


def test_a_trace_whose_every_row_counts_no_requests_is_refused(tmp_path: Path) -> None:
    """Every row 0 (the wrong column taken as requests, an export of an idle runtime): the report said 0
    pod-hours of oracle and "0.00 x oracle" for every policy, figures of nothing that read as a result."""
    trace = write_trace(tmp_path, "0,a,0\n60,b,0\n120,a,0\n")
    result = simulate(tmp_path, trace)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (f"{FAILED}{trace}: every row's requests is 0 (3 rows): nothing to replay; "
                                     "requests is the count of requests in each interval")


def test_a_gzipped_trace_not_named_gz_is_read_as_one(tmp_path: Path) -> None:
    """A download saved as trace.csv that is gzip inside (curl without --compressed, a renamed file) read
    "not UTF-8 text (invalid start byte)"."""
    rows = HEADER + "0,a,60\n60,b,30\n120,a,12\n"
    plain, packed = tmp_path / "plain.csv", tmp_path / "packed.csv"
    plain.write_text(rows)
    packed.write_bytes(gzip.compress(rows.encode()))
    assert read_csv(packed).requests.tolist() == read_csv(plain).requests.tolist()
    result = simulate(tmp_path, packed, "--policies", "fixed")
    assert result.returncode == 0, result.stderr
    assert report(tmp_path)["trace"]["requests"] == 102


@pytest.mark.parametrize(("encoding", "said"), [
    # Excel's plain "CSV" writes the locale's code page: a model named café read "not UTF-8 text (invalid
    # continuation byte)", with no line to look at in a file of millions
    ("cp1252", "line 3: not UTF-8 text (invalid continuation byte at b'\\xe9'): save it as CSV UTF-8"),
    # Excel's "Unicode Text" and PowerShell's Out-File write UTF-16: "not UTF-8 text (invalid start byte)" did not
    # say what to do
    ("utf-16", "UTF-16 text, not UTF-8: save it as CSV UTF-8 (PowerShell: Out-File -Encoding utf8)"),
])
def test_a_trace_not_in_utf8_says_where_and_how_to_save_it(tmp_path: Path, encoding: str, said: str) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_bytes((HEADER + "0,a,5\n60,café,3\n").encode(encoding))
    result = simulate(tmp_path, trace)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == f"{FAILED}{trace}: {said}"


@pytest.mark.parametrize("mistake", ["code page", "gzip cut short", "gzip named csv"])
def test_the_request_log_converter_reads_or_names_what_users_save(tmp_path: Path, mistake: str) -> None:
    """A log in a code page, or a gzip cut short (a download stopped), was a UnicodeDecodeError or EOFError
    traceback; a gzip named .csv was read as not UTF-8."""
    log = tmp_path / "log.csv"
    text = "timestamp,model\n1700000000,café\n1700000001,a\n"
    log.write_bytes({"code page": text.encode("cp1252"), "gzip cut short": gzip.compress(text.encode())[:30],
                     "gzip named csv": gzip.compress(text.encode())}[mistake])
    result = convert("--model-column", "model", log, "--out", "-")
    if mistake == "gzip named csv":
        assert result.returncode == 0 and result.stdout.splitlines()[1:] == ["0,café,1", "1,a,1"], result.stderr
        return
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip() == {
        "code page": f"{CONVERT_FAILED}{log}: line 2: not UTF-8 text (invalid continuation byte at b'\\xe9'): save it "
                     "as CSV UTF-8",
        # named .csv, read as gzip for its first bytes only: as simulate says it of such a trace
        "gzip cut short": f"{CONVERT_FAILED}{log}: not UTF-8 text: it begins as gzip does, but does not unpack (cut "
                          "short?)"}[mistake]


def damaged(data: bytes, where: str) -> bytes:
    """`data` gzipped, then one byte flipped: in the deflate stream (a bit error on a disk or in a transfer), or
    in the CRC at the end (the data unpacks, then is found wrong)."""
    packed = bytearray(gzip.compress(data))
    packed[20 if where == "stream" else -6] ^= 0x55
    return bytes(packed)


DAMAGED_READERS = {  # what each reader is given (its own kind of file), its exit status and its message's start
    "simulate": (HEADER + "0,a,5\n60,a,3\n120,b,4\n", 2, FAILED),
    "request_log": ("timestamp,model\n1700000000,a\n1700000001,b\n", 2, CONVERT_FAILED),
    "minute_table": ("HashOwner,HashApp,HashFunction,Trigger,1,2\no,a,f,http,1,2\n", 2,
                     "python -m autoscaler.simulation.minute_table: error: "),
}


def read_with(reader: str, tmp_path: Path, path: Path) -> subprocess.CompletedProcess[str]:
    """`path` given to `reader` as a user runs it."""
    if reader == "simulate":
        return simulate(tmp_path, path)
    if reader == "request_log":
        return convert("--model-column", "model", path, "--out", tmp_path / "t.csv", "--quiet")
    return run_module("autoscaler.simulation.minute_table", path, "--out", tmp_path / "t.csv", "--quiet")


@pytest.mark.parametrize("where", ["stream", "crc"])
@pytest.mark.parametrize("reader", list(DAMAGED_READERS))
def test_a_damaged_gzip_is_named_damaged_by_every_reader(tmp_path: Path, reader: str, where: str) -> None:
    """A byte flipped in a .csv.gz (a bad disk, a transfer) was a zlib.error traceback (status 1) from the
    deflate stream, and "not a gzip file; name it .csv if it is plain text" from its CRC: it is gzip, damaged."""
    text, status, start = DAMAGED_READERS[reader]
    path = tmp_path / "in.csv.gz"
    path.write_bytes(damaged(text.encode(), where))
    result = read_with(reader, tmp_path, path)
    assert result.returncode == status, result.stderr
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    line = result.stderr.strip()
    assert line.startswith(f"{start}{path}: a damaged gzip file (") and line.endswith("): copy or download it again"), \
        line


@pytest.mark.parametrize("reader", list(DAMAGED_READERS))
def test_plain_text_named_gz_is_told_to_be_named_csv_by_every_reader(tmp_path: Path, reader: str) -> None:
    text, status, start = DAMAGED_READERS[reader]
    path = tmp_path / "in.csv.gz"
    path.write_text(text)
    result = read_with(reader, tmp_path, path)
    assert result.returncode == status, result.stderr
    assert result.stderr.strip() == (f"{start}{path}: not a gzip file (Not a gzipped file ({text[:2].encode()!r})); "
                                     "name it .csv if it is plain text")


def packed(data: bytes, how: str, tmp_path: Path) -> bytes:
    """`data` as the tool `how` packs it (a zip holds it as in.csv)."""
    if how == "zip":
        archive = tmp_path / "archive.zip"
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
            zipped.writestr("in.csv", data)
        return archive.read_bytes()
    return lzma.compress(data) if how == "xz" else bz2.compress(data)


@pytest.mark.parametrize(("how", "suffix", "said"), [
    ("xz", ".csv.xz", "an xz file, not CSV: unpack it first (xz -d FILE) and give the file it makes"),
    ("xz", ".tar.xz", "an xz file, not CSV: unpack it first (tar -xf FILE) and give a CSV file in it"),
    ("bzip2", ".csv.bz2", "a bzip2 file, not CSV: unpack it first (bunzip2 FILE) and give the file it makes"),
    ("zip", ".zip", "a zip archive, not CSV: unpack it first (unzip FILE) and give the CSV file in it"),
])
@pytest.mark.parametrize("reader", list(DAMAGED_READERS))
def test_an_xz_bzip2_or_zip_file_is_told_to_be_unpacked_by_every_reader(tmp_path: Path, reader: str, how: str,
                                                                         suffix: str, said: str) -> None:
    """Public traces ship as .tar.xz (Azure Functions 2019) or .zip: such a file read "line 1: not UTF-8 text
    (invalid start byte at b'\\xfd'): save it as CSV UTF-8", advice for Excel's code pages. Only gzip is read
    as it is; the others are named from their first bytes, with the tool that unpacks them."""
    text, status, start = DAMAGED_READERS[reader]
    path = tmp_path / f"in{suffix}"
    path.write_bytes(packed(text.encode(), how, tmp_path))
    result = read_with(reader, tmp_path, path)
    assert result.returncode == status, result.stderr
    assert result.stderr.strip() == f"{start}{path}: {said.replace('FILE', str(path))}"


@pytest.mark.parametrize(("stamp", "said"), [
    ("1733011260000000", "line 3: timestamp_s 1733011260000000 is the year 54,918,910 as seconds since the "
                         "epoch: these look like microseconds; divide timestamp_s by 1000000"),
    ("1e300", "line 3: timestamp_s 1e300 is past the year 300,000 as seconds since the epoch"),
])
def test_a_timestamp_of_another_unit_or_none_is_named_on_its_line(tmp_path: Path, stamp: str, said: str) -> None:
    """Epoch microseconds read "timestamps are 6e+07 s apart: export at a step of 10 min or less"; a stray
    1e300 printed numpy's RuntimeWarning and told the user to floor to '5e+299s'."""
    trace = write_trace(tmp_path, f"0,a,5\n{stamp},a,3\n")
    result = simulate(tmp_path, trace)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and said in result.stderr, result.stderr


@pytest.mark.parametrize(("rows", "flags", "warning"), [
    # 120 models each requested every minute, 10 copies a pod: 12 pods hold them. --max-replicas 4 ran, and the
    # report's table read as a policy result: most requests refused, with nothing said at the start and the
    # bound's text naming the requests' need only.
    ("".join(f"{60 * t},m{m:03d},2\n" for t in range(30) for m in range(120)),
     ("--cache-models", "10", "--max-replicas", "4"),
     "--max-replicas 4 pods hold 40 model copies (--cache-models 10), fewer than the 120 models the trace uses "
     "within 600 s (target_lru_age_s) at its busiest, which need 12 pods"),
    # 1,800 requests in the first minute (30 a second) on pods of 20: 2 pods at 80% busy (30 / 16). At
    # --max-replicas 1 the README promised a warning before the run; only the bound's line said it, afterwards.
    ("0,m1,1800\n60,m1,0\n120,m1,600\n", ("--min-replicas", "1", "--max-replicas", "1"),
     "--max-replicas 1 is below the 2 pods the trace's peak (30 requests/s) needs at 80% busy (--pod-rps 20)"),
], ids=["short-of-cache", "short-of-requests"])
def test_a_max_replicas_below_what_the_peak_needs_is_warned_about_at_the_start(
        tmp_path: Path, rows: str, flags: tuple[str, ...], warning: str) -> None:
    trace = write_trace(tmp_path, rows)
    result = simulate(tmp_path, trace, *flags, "--policies", "fixed-max")
    assert result.returncode == 0, result.stderr
    assert warning in result.stderr, result.stderr
    assert any(w.startswith(warning) for w in report(tmp_path)["warnings"])


def test_where_the_models_in_use_size_the_runtime_the_report_reads_pod_hours_against_the_cache_oracle(
        tmp_path: Path) -> None:
    """A day of quiet models (Azure Functions' shape) at 20 copies a pod needs its pods for the cache, not the
    requests: the table's "x oracle" (the requests' oracle) read 58x for a policy within 1.1x of what holding
    the models takes, and fixed, sized from requests alone, was described as the peak's need."""
    rows = "".join(f"{60 * t},m{m:03d},1\n" for t in range(20) for m in range(200))
    trace = write_trace(tmp_path, rows)
    result = simulate(tmp_path, trace, "--cache-models", "20", "--policies", "fixed,fixed-max")
    assert result.returncode == 0, result.stderr
    got = report(tmp_path)
    cache = got["cache_oracle_pod_hours"]
    fixed_max = got["policies"]["fixed-max"]["pod_hours"]
    said = (f"The models in use, not the requests, size this runtime: holding them takes {hours_text(cache)} pod-hours "
            f"(the cache oracle), {cache / got['oracle_pod_hours']:.3g}x the requests' oracle that `x oracle` "
            f"divides by; against it: fixed {got['policies']['fixed']['pod_hours'] / cache:.2f}x, fixed-max "
            f"{fixed_max / cache:.2f}x.")
    assert said in result.stdout, result.stdout
    assert said in (tmp_path / "out" / "report.md").read_text()
    assert "fewer than the 10 pods the models in use need" in got["policies"]["fixed"]["description"]


def test_a_trace_whose_models_fit_one_pod_is_not_said_to_be_sized_by_its_models(tmp_path: Path) -> None:
    """One model, 30 requests a minute for 2 minutes in every 20: the requests' oracle counts no pod in the idle
    minutes and the cache oracle holds the model 600 s after its use, 4.75x more, so the report said "The models
    in use, not the requests, size this runtime" of a runtime whose models fit in one pod's 100 copies."""
    rows = "".join(f"{t},chat,30\n" for t in range(0, 7200, 60) if (t // 60) % 20 < 2)
    result = simulate(tmp_path, write_trace(tmp_path, rows))
    assert result.returncode == 0, result.stderr
    assert "The models in use" not in result.stdout, result.stdout
    assert "The models in use" not in (tmp_path / "out" / "report.md").read_text()
    got = report(tmp_path)
    assert got["cache_oracle_pod_hours"] > 1.5 * got["oracle_pod_hours"] and got["cluster"]["peak_models"] == 1


def test_the_bound_names_the_cache_where_holding_the_models_needs_more_pods_than_the_requests() -> None:
    """A day of 5,000 quiet models at --max-replicas 10: its requests need 19 pods at 80% busy and its models 31;
    83% of requests were refused loads, and the bound's words named the requests' 19 only."""
    bound = {"policy": "fixed-max", "replicas": 10, "delayed_requests": 14_039_608, "delayed_ratio": 0.8294,
             "delayed_waiting_for_loads": 5766, "delayed_vs_mean-hpa": 0.953, "delay_goal_reachable": False}
    cluster = {"max_replicas": 10, "fixed_replicas": 19, "peak_pods": 31, "cache_models": 100}
    text = bound_text({"bound": bound, "cluster": cluster})
    assert "maxReplicas (10) is below the 31 pods the peak needs to hold the models it uses" in text, text
    cluster["peak_pods"] = 19  # the requests' need is the larger (or as large): it is named
    assert "maxReplicas (10) is below the 19 pods the peak needs at 80% busy" in bound_text({"bound": bound,
                                                                                              "cluster": cluster})


lines = st.lists(st.tuples(st.integers(0, 40), st.sampled_from(["a", "b,c", 'say "hi"', "模型-ü", " d "]),
                           st.one_of(st.integers(0, 10**6), st.floats(0, 1e6, allow_nan=False))),
                 min_size=1, max_size=40, unique_by=lambda row: (row[0], row[1].strip()))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=lines, shuffle=st.randoms(use_true_random=False), crlf=st.booleans(), bom=st.booleans(),
       packed=st.booleans(), epoch=st.sampled_from([0, 1_700_000_040]))
# The anchor's two rows state the 60 s step; rows at 13 and 25 minutes alone made 720 s the common gap, and the
# first row was refused as a stray of that step.
@example(rows=[(13, "a", 0), (25, "a", 0)], shuffle=random.Random(0), crlf=False, bom=False, packed=False,
         epoch=0)
def test_a_trace_reads_the_same_in_any_row_order_line_ending_encoding_and_time_origin(
        tmp_path: Path, rows: list[tuple[int, str, float]], shuffle: Any, crlf: bool, bom: bool, packed: bool,
        epoch: int) -> None:
    """The promise users lean on when they convert a trace their own way: rows in any order, CRLF, a BOM,
    gzip, quoted names with commas, quotes and non-ASCII, and epoch or relative seconds all read as the same
    requests per model and interval."""
    def per_model(path: Path) -> dict[tuple[float, str], float]:
        trace = read_csv(path)
        return {(trace.start_s + s * trace.interval_s, trace.models[m]): r for s, m, r in
                zip(trace.slot.tolist(), trace.model.tolist(), trace.requests.tolist(), strict=True)}

    def text(ordered: list[tuple[int, str, float]], newline: str) -> str:
        quoted = ['"' + m.replace('"', '""') + '"' for _, m, _ in ordered]
        return newline.join([HEADER.strip(), *(f"{epoch + 60 * t},{q},{r!r}" for (t, _, r), q in
                                               zip(ordered, quoted, strict=True))]) + newline

    rows = [(0, "anchor", 1.0), (1, "anchor", 1.0), *rows]  # on a 60 s grid whatever else is drawn
    base = tmp_path / "base.csv"
    base.write_text(text(sorted(rows), "\n"), encoding="utf-8")
    mixed = list(rows)
    shuffle.shuffle(mixed)
    data = text(mixed, "\r\n" if crlf else "\n").encode("utf-8-sig" if bom else "utf-8")
    other = tmp_path / ("other.csv.gz" if packed else "other.csv")
    other.write_bytes(gzip.compress(data) if packed else data)
    expected = per_model(base)
    assert per_model(other) == expected
    assert sum(expected.values()) == pytest.approx(sum(r for _, _, r in rows))


def test_the_same_rows_in_another_order_give_the_same_report(tmp_path: Path) -> None:
    """An export sorted by time and one sorted by series (or re-exported) are the same trace: models were
    numbered as they first appeared in the file, and models of equal load were routed and placed in that order,
    so fixed-max's delays (the bound) moved by 14% and every policy's figures with them."""
    from autoscaler.simulation.synthetic_trace import synthetic
    from autoscaler.simulation.trace_write import write_csv

    write_csv(synthetic(models=20, hours=1, seed=0), tmp_path / "by-time.csv")
    header, *rows = (tmp_path / "by-time.csv").read_text().splitlines()
    results = []
    for name, ordered in (("by-time", rows), ("reversed", rows[::-1]),
                          ("by-model", sorted(rows, key=lambda row: (row.split(",")[1], float(row.split(",")[0]))))):
        path = tmp_path / f"{name}.csv"
        path.write_text("\n".join([header, *ordered]) + "\n")
        done = simulate(tmp_path, path)
        assert done.returncode == 0, done.stderr
        results.append({policy: {key: value for key, value in figures.items() if key != "wall_seconds"}
                        for policy, figures in report(tmp_path)["policies"].items()})
    assert results[1] == results[0] and results[2] == results[0]


def test_a_sparse_trace_is_told_how_to_state_its_step(tmp_path: Path) -> None:
    """Rows only where a model has requests, none of them one minute apart: the step read is the smallest gap,
    120 s, and 300 is off that grid. The fix said was to floor every timestamp to 120 s, which moved requests
    and changed the step; the trace's own grid is 60 s, and one row of 0 requests states it."""
    trace = write_trace(tmp_path, "0,a,30\n120,a,40\n300,a,20\n420,a,10\n")
    done = simulate(tmp_path, trace)
    assert done.returncode == 2
    assert "line 4: timestamp 300 is not on the 120 s grid starting at 0" in done.stderr, done.stderr
    assert "every timestamp is on a 60 s grid" in done.stderr
    assert "add a row of 0 requests at 60" in done.stderr
    assert "floor" not in done.stderr

    fixed = write_trace(tmp_path, "0,a,30\n60,a,0\n120,a,40\n300,a,20\n420,a,10\n")
    done = simulate(tmp_path, fixed)
    assert done.returncode == 0, done.stderr
    assert report(tmp_path)["trace"]["interval_s"] == 60


@pytest.mark.parametrize("stray", ["4210", "4213"])
def test_one_stray_row_off_the_step_is_named_not_taken_for_the_step(tmp_path: Path, stray: str) -> None:
    """Two hours of a 60 s trace and one row more, some seconds off the minute. 10 s off, the stray set the step
    (the smallest gap): every minute's requests replayed within 10 s, six times the rate, mean-hpa 91% delayed,
    and the warning named the good rows; 13 s off, the refusal named a good row (line 4). The row is named."""
    rows = "".join(f"{t},a,600\n{t},b,300\n" for t in range(0, 7200, 60))
    done = simulate(tmp_path, write_trace(tmp_path, rows + f"{stray},c,5\n"))
    assert done.returncode == 2
    assert f"line 242: timestamp {stray} is off the 60 s step of the trace's other 120 timestamps" in done.stderr, \
        done.stderr


@settings(max_examples=100, deadline=None)
@given(delays=st.dictionaries(st.sampled_from(["fixed", "mean-hpa", "skew-aware"]), st.integers(0, 30_000),
                              max_size=3), bound_delays=st.integers(0, 30_000))
def test_the_bound_is_called_the_fewest_delays_only_where_no_policy_delayed_fewer(delays: dict[str, int],
                                                                                   bound_delays: int) -> None:
    """A 1 s trace replayed at --tick 1: fixed's 13 pods delayed 13,657 requests and fixed-max's 20 (the bound)
    15,286, and the report said the bound was "about the fewest any replica policy within these bounds gets"
    beside that table. Whatever the policies delay, the sentence is true to the table: the fewest where none
    delayed fewer, else the policy that delayed fewest named with its count."""
    bound = {"policy": "fixed-max", "replicas": 20, "delayed_requests": bound_delays, "delayed_ratio": 0.03,
             "delayed_waiting_for_loads": 0}
    policies = {name: {"delayed_requests": count} for name, count in delays.items()}
    policies["fixed-max"] = {"delayed_requests": bound_delays}
    text = bound_text({"bound": bound, "cluster": {}, "policies": policies})
    fewest = min(delays.values(), default=bound_delays)
    if fewest >= bound_delays:
        assert "about the fewest any replica policy within these bounds gets" in text, text
    else:
        named = min((count, name) for name, count in delays.items())
        assert f"yet {named[1]} delayed fewer ({named[0]}) on no more pods" in text, text
        assert "the fewest" not in text, text
