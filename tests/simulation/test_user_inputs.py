"""`simulate` fed what users bring: tiny traces checked against figures worked out by hand, Prometheus exports of
the wrong series, and HPA files with mistakes. Each ends in a right report or one line that says what to fix."""

from __future__ import annotations

import subprocess
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.simulation.trace import read_csv
from tests.simulation import runs
from tests.simulation.runs import FAILED, SIMULATE, report, write_trace


def simulate(tmp_path: Path, rows: str, *flags: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return runs.simulate(tmp_path, write_trace(tmp_path, rows), *flags, timeout=timeout)


def test_a_queue_on_one_pod_matches_the_figures_worked_out_by_hand(tmp_path: Path) -> None:
    """1,200 requests in the first minute (20/s) on one pod serving 10/s, none in the second: the queue grows
    10/s to 600 at 60 s and drains to 0 at 120 s. A request arriving at t waits t seconds, so all but those of
    the first 0.1 s wait past the 100 ms SLO: 1,200 - 20 * 0.1 = 1,198 delayed (a whole count: the report
    counts delayed requests whole). The queue is past the SLO (1 request at 10/s) at the end of every 5 s tick
    but the last: 115 s overloaded. One pod for 120 s: 1/30 pod-hours (the report said 0.033, and 0.067 /
    0.033 = 2.03x the oracle where it is 2x)."""
    result = simulate(tmp_path, "0,a,1200\n60,a,0\n", "--pod-rps", "10", "--min-replicas", "1", "--max-replicas",
                      "1", "--policies", "fixed-max,mean-hpa,skew-aware")
    assert result.returncode == 0, result.stderr
    got = report(tmp_path)
    assert got["oracle_pod_hours"] == pytest.approx(2 / 60, rel=1e-4)  # 2 pods' worth in the first minute
    assert got["cache_oracle_pod_hours"] == pytest.approx(3 / 60, rel=1e-4)  # and a pod for the model after it
    for name, policy in got["policies"].items():
        assert policy["requests"] == 1200, name
        assert policy["pod_hours"] == pytest.approx(1 / 30, rel=1e-4), name
        assert (policy["delayed_requests"], policy["delayed_ratio"]) == (1198, round(1198 / 1200, 6)), name
        assert policy["overloaded_seconds"] == 115, name
        assert policy["cold_loads"] == 0 and policy["scale_events"] == 0, name


def test_a_model_first_requested_in_the_second_minute_waits_one_load(tmp_path: Path) -> None:
    """a at 1/s, then b at 1/s: the runtime starts warm with a, so b is one cold load whose 10 s of requests
    (1/s for the 10 s load) wait; nothing queues on pods of 20/s. Two pods for two minutes: 1/15 pod-hours."""
    result = simulate(tmp_path, "0,a,60\n60,b,60\n", "--policies", "fixed,mean-hpa,skew-aware")
    assert result.returncode == 0, result.stderr
    got = report(tmp_path)
    assert got["unavoidable_cold_loads"] == 1
    for name, policy in got["policies"].items():
        assert policy["requests"] == 120, name
        assert policy["pod_hours"] == pytest.approx(2 * 120 / 3600, rel=1e-4), name
        assert policy["cold_loads"] == 1 and policy["avoidable_cold_loads"] == 0, name
        assert policy["delayed_requests"] == 10 and policy["delayed_waiting_for_loads"] == 10, name
    table = result.stdout.splitlines()
    fixed = next(line for line in table if line.startswith("| fixed |"))
    assert fixed.startswith("| fixed | 0.0667 | 2.00 |"), fixed  # was "0.1 | 2.03"
    assert "Oracle pod-hours: 0.0333 " in (tmp_path / "out" / "report.md").read_text()  # was 0.0


@pytest.mark.parametrize(("rows", "tick", "seconds"), [
    ("".join(f"{60 * t},a,60\n" for t in range(60)), "420", 3600),  # an hour at 60 s: ticks of 7 minutes
    ("".join(f"{t},a,1\n" for t in range(63)), "5", 63),  # 63 s at 1 s: ticks of 5 s, the last 3 s of one
])
def test_pods_are_counted_for_the_traces_own_time_where_the_tick_does_not_divide_it(
        tmp_path: Path, rows: str, tick: str, seconds: int) -> None:
    """A trace of 1 request/s whose length is not a whole number of ticks: fixed runs 2 pods (--min-replicas 2)
    and fixed-max 3 (--max-replicas 3) for the trace's `seconds`. The last tick was counted whole, past the
    trace's end: an hour at --tick 2400 read 2.67 pod-hours for fixed, 63 s at the default 5 s tick 0.0361.
    The oracle, a pod for each second with requests, is 1 pod for `seconds`: fixed is 2.00x it."""
    result = simulate(tmp_path, rows, "--tick", tick, "--max-replicas", "3", "--policies", "fixed,fixed-max")
    assert result.returncode == 0, result.stderr
    got = report(tmp_path)
    assert got["oracle_pod_hours"] == pytest.approx(seconds / 3600, rel=1e-5)
    assert got["policies"]["fixed"]["pod_hours"] == pytest.approx(2 * seconds / 3600, rel=1e-5)
    assert got["policies"]["fixed-max"]["pod_hours"] == pytest.approx(3 * seconds / 3600, rel=1e-5)
    assert got["policies"]["fixed"]["requests"] == seconds
    fixed = next(line for line in result.stdout.splitlines() if line.startswith("| fixed |"))
    assert fixed.split("|")[3].strip() == "2.00", fixed  # x oracle


def test_a_fraction_of_a_delayed_request_reads_0_delayed_everywhere(tmp_path: Path) -> None:
    """a at 100 a minute for an hour, and one request of b in minute 10: b's request arrives spread over its
    minute (1/60 a second) and its 10 s cold load delays 10/60 of it. The report said 0 delayed, ratio 2.8e-05
    (1/6 of 6,001), and "1x" mean-hpa's delays where 0 against 0 reads n/a: now 0 delayed is ratio 0 and n/a."""
    rows = "".join(f"{60 * t},a,100\n" for t in range(60)) + "600,b,1\n"
    result = simulate(tmp_path, rows)
    assert result.returncode == 0, result.stderr
    got = report(tmp_path)
    for name, policy in got["policies"].items():
        assert (policy["requests"], policy["delayed_requests"], policy["delayed_ratio"]) == (6001, 0, 0), name
        if name != "mean-hpa":
            assert policy["vs_mean-hpa"]["delayed_requests"] is None and policy["goal"]["delayed"] is None, name
    assert (got["bound"]["delayed_ratio"], got["bound"]["delayed_vs_mean-hpa"]) == (0, None)
    fixed = next(line for line in result.stdout.splitlines() if line.startswith("| fixed |"))
    assert fixed.split("|")[4:6] == [" 0 ", " 0.0000 "], fixed
    # b's cold load is its first: not avoidable, and mean-hpa had no avoidable one either: no ratio
    assert fixed.split("|")[-3].strip() == "1x / n/a / n/a", fixed


def test_a_ratio_to_mean_hpa_under_a_thousandth_is_not_written_0(tmp_path: Path) -> None:
    """Azure Functions' day of 30 functions (one under two triggers): fixed-max delays 1 request where mean-hpa
    delays thousands. The ratio was rounded to 3 decimals: "0x" in the table and the bound's line, 0.0 in
    report.json, read as no delays. Now report.json keeps it (significant digits) and the text says "<0.001x"."""
    import random

    rng = random.Random(2)
    rows = ["HashOwner,HashApp,HashFunction,Trigger," + ",".join(str(i) for i in range(1, 1441))]
    for f in range(30):
        base = rng.choice([0, 1, 5, 50, 300])
        counts = [max(0, int(rng.gauss(base, base / 3 + 0.1))) for _ in range(1440)]
        rows.append(f"o{f % 5},app{f % 7},fn{f},{rng.choice(['http', 'timer'])}," + ",".join(map(str, counts)))
    rows.append("o0,app0,fn0,queue," + ",".join("1" for _ in range(1440)))  # fn0 under a second trigger
    trace = tmp_path / "functions.csv"
    trace.write_text("\n".join(rows) + "\n")
    result = runs.simulate(tmp_path, trace, "--policies", "fixed-max,mean-hpa")
    assert result.returncode == 0, result.stderr
    got = report(tmp_path)
    bound, base = got["policies"]["fixed-max"], got["policies"]["mean-hpa"]
    assert 0 < bound["delayed_requests"] < base["delayed_requests"] / 1000, (bound, base)
    ratio = bound["delayed_requests"] / base["delayed_requests"]
    assert bound["vs_mean-hpa"]["delayed_requests"] == pytest.approx(ratio, rel=0.01)
    assert got["bound"]["delayed_vs_mean-hpa"] == pytest.approx(ratio, rel=0.01)
    assert bound["goal"]["delayed"] > 0
    row = next(line for line in result.stdout.splitlines() if line.startswith("| fixed-max |"))
    assert row.split("|")[-3].strip().split(" / ")[1] == "<0.001x", row  # vs mean-hpa, before the goal column
    assert "That is <0.001x mean-hpa's delays" in result.stdout, result.stdout


def test_a_count_no_cluster_could_serve_is_refused_at_once_not_simulated_for_hours(tmp_path: Path) -> None:
    """1e12 requests in a minute (a byte count, a counter's total) sized 1.7 billion pods: a warning, then a run
    that never ended. Refused at once, naming what to check; so is a --max-replicas of that size."""
    result = simulate(tmp_path, "0,a,1e12\n60,a,1\n", timeout=60)
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"{FAILED}the trace's peak (16,666,666,667 requests/s) at --pod-rps 20 needs "), line
    assert "Check the trace's requests" in line and "--pod-rps" in line, line
    assert "Traceback" not in result.stderr and not (tmp_path / "out").exists()
    result = simulate(tmp_path, "0,a,60\n60,a,1\n", "--max-replicas", "1000000", timeout=60)
    assert result.returncode == 2, result.stderr
    assert "--max-replicas 1,000,000 is more pods than simulate runs" in result.stderr, result.stderr


def test_a_run_sized_past_what_simulate_runs_by_min_replicas_names_it(tmp_path: Path) -> None:
    """--min-replicas 25000 (a 20 requests/s trace) sizes maxReplicas 25,001 and fixed 25,000: the refusal read
    "the trace's peak ... needs 2 pods, more than simulate runs (20,000)" and sent the user to a trace that is
    fine. It names --min-replicas, for the autoscaled policies and for fixed alone."""
    rows = "0,a,600\n60,a,1200\n"
    result = simulate(tmp_path, rows, "--min-replicas", "25000", timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (f"{FAILED}--min-replicas 25,000 sizes maxReplicas 25,001 (one more): more pods "
                                     "than simulate runs (20,000). Give a smaller --min-replicas"), result.stderr
    result = simulate(tmp_path, rows, "--min-replicas", "25000", "--policies", "fixed", timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (f"{FAILED}fixed runs --min-replicas 25,000 pods, more than simulate runs "
                                     "(20,000): give a smaller --min-replicas"), result.stderr


def test_a_run_made_slow_by_min_replicas_is_warned_about_naming_it(tmp_path: Path) -> None:
    """--min-replicas 3000 on the same trace: the warning said the trace's peak "sizes maxReplicas 3,001"."""
    result = simulate(tmp_path, "0,a,600\n60,a,1200\n", "--min-replicas", "3000", "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    assert report(tmp_path)["warnings"] == ["--min-replicas 3,000 sizes maxReplicas 3,001 (one more): each policy "
                                            "simulates that many pods, which takes long. Give a smaller "
                                            "--min-replicas"]


def test_a_peak_whose_twice_is_past_what_simulate_runs_gives_both_numbers(tmp_path: Path) -> None:
    """A peak needing 10,500 pods sizes maxReplicas 21,000 (twice that), the number refused: the line read
    "needs 10,500 pods, more than simulate runs (20,000)"."""
    result = simulate(tmp_path, "0,a,12600000\n60,a,3\n", timeout=60)
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip()
    assert line.startswith(f"{FAILED}the trace's peak (210,000 requests/s) at --pod-rps 20 needs 10,500 pods, "
                           "which size maxReplicas 21,000 (twice that): more pods than simulate runs (20,000). "
                           "Check the trace's requests"), line
    assert line.endswith("or give --max-replicas"), line


def test_a_synthetic_run_sized_past_what_simulate_runs_names_rps(tmp_path: Path) -> None:
    """`--synthetic --rps 1000000` was told to check "the trace's requests (the count in each interval ...)": there
    is no file; the flag that sized it is --rps."""
    result = subprocess.run([*SIMULATE, "--synthetic", "--models", "10", "--hours", "1", "--rps", "1000000",
                             "--out", str(tmp_path / "out"), "--quiet", "--no-plot"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip()
    assert line.startswith(f"{FAILED}--rps 1e+06 draws a peak of 1,006,914 requests/s, which at --pod-rps 20 needs "
                           "50,346 pods, which size maxReplicas 100,692 (twice that): more pods than simulate runs "
                           "(20,000). Give a smaller --rps"), line
    assert "trace's requests" not in line and not (tmp_path / "out").exists()


def test_fixed_sized_past_what_simulate_runs_says_to_leave_it_out(tmp_path: Path) -> None:
    """With --max-replicas given, the autoscaled policies run; fixed is still the peak's need at 80% busy."""
    result = simulate(tmp_path, "0,a,1e9\n60,a,1\n", "--max-replicas", "10", "--policies", "fixed,mean-hpa",
                      timeout=60)
    assert result.returncode == 2, result.stderr
    assert "fixed (the peak's need at 80% busy) runs 1,041,667 pods" in result.stderr, result.stderr
    assert "leave fixed out of --policies" in result.stderr, result.stderr
    result = simulate(tmp_path, "0,a,1e9\n60,a,1\n", "--max-replicas", "10", "--policies", "mean-hpa", timeout=60)
    assert result.returncode == 0, result.stderr


def counter_rows(models: int = 3, minutes: int = 30) -> str:
    """What `curl .../query_range?query=sum by (model) (modelmesh_api_request_milliseconds_count)` gives: each
    model's running total, rising by its rate each minute (with one counter reset on model 1)."""
    rows = []
    for m in range(models):
        total = 1_000_000 * (m + 1)
        for minute in range(minutes):
            total = 50 if (m == 1 and minute == 20) else total + 60 * (m + 1)
            rows.append(f"{1733011200 + 60 * minute},model-{m},{total}\n")
    return "".join(rows)


def test_a_counters_running_total_exported_as_requests_is_named(tmp_path: Path) -> None:
    """Prometheus counters exported without increase() ran as millions of requests a minute with no word (the
    report's figures all wrong)."""
    result = simulate(tmp_path, counter_rows(), "--max-replicas", "20", "--policies", "mean-hpa")
    warnings = [line for line in result.stderr.splitlines() if "running total" in line]
    assert len(warnings) == 1, result.stderr
    assert "3 of 3 models" in warnings[0] and "increase(" in warnings[0], warnings[0]
    assert any("running total" in w for w in report(tmp_path)["warnings"])
    # The query it names must write what the trace reads: a range of the step ([1m] at a 15 s step counts each
    # request four times, with nothing in the file to show it), and a row for the interval ending at its time,
    # which the trace reads as starting there
    # (on ModelMesh's counter, labelled modelId, as the guide's export: tests/simulation/test_counter_query.py)
    assert ('(increase(COUNTER{modelId!=""}[60s]), "model", "$1", "modelId", "(.+)")) at a query_range step of 60s '
            "(the range the step") in warnings[0], warnings[0]
    assert "the interval ending at its time: move every timestamp back 60 s" in warnings[0], warnings[0]


def test_steady_or_rising_traffic_is_not_taken_for_a_counter(tmp_path: Path) -> None:
    flat = "".join(f"{60 * i},a,100\n{60 * i},b,{40 + (i % 3)}\n" for i in range(40))
    result = simulate(tmp_path, flat, "--policies", "mean-hpa")
    assert result.returncode == 0 and "running total" not in result.stderr, result.stderr
    noisy = "".join(f"{60 * i},a,{100 + 2 * i + (37 * i) % 21}\n" for i in range(40))  # rising, not every minute
    result = simulate(tmp_path, noisy, "--policies", "mean-hpa")
    assert result.returncode == 0 and "running total" not in result.stderr, result.stderr


LOST_AT = (10, 11, 40)
"""The 15 s steps of `grafana_rows` whose scrapes were lost, for every model."""


def grafana_rows(lost: str, models: int = 4, steps: int = 60) -> str:
    """A Grafana (or pandas) CSV export at 15 s whose lost scrapes came out as `lost` (NaN, an empty cell)."""
    return "".join(f"{1764547200 + 15 * step},m{m},{lost if step in LOST_AT else 30 + m}\n"
                   for step in range(steps) for m in range(models))


@pytest.mark.parametrize("lost", ["NaN", "", "nan"], ids=["NaN", "empty", "nan"])
def test_lost_scrapes_written_as_nan_or_empty_cells_are_read_as_no_row_and_named(tmp_path: Path,
                                                                                   lost: str) -> None:
    """A Grafana export with three lost scrapes was refused with the first line only ("line 42: requests must be
    finite, got 'NaN'"), no word of how many there were, what they were or what to write. Dropping those rows
    is what nearly every user would then do, so the run does it, and says how many, where, and how to replay
    them as traffic instead."""
    result = simulate(tmp_path, grafana_rows(lost), "--policies", "fixed")
    assert result.returncode == 0, result.stderr
    [warning] = [line for line in result.stderr.splitlines() if "empty, NaN or null" in line]
    assert "12 of 240 rows" in warning, warning
    assert "lines 42, 43, 44, 45, 46, ..." in warning, warning  # step 10's four models, then step 11's first
    assert "lost scrapes" in warning and "fill them" in warning and "drop those rows" in warning, warning
    assert report(tmp_path)["trace"]["requests"] == (60 - len(LOST_AT)) * sum(30 + m for m in range(4))
    assert any("empty, NaN or null" in w for w in report(tmp_path)["warnings"])


def test_a_trace_whose_every_requests_cell_is_nan_is_refused_saying_so(tmp_path: Path) -> None:
    result = simulate(tmp_path, "".join(f"{1764547200 + 15 * step},m{m},NaN\n" for step in range(3) for m in range(2)))
    assert result.returncode == 2
    assert result.stderr.startswith(FAILED), result.stderr
    said = "every row's requests is empty, NaN or null (6 rows: lines 2, 3, 4, 5, 6, ...)"
    assert said in result.stderr, result.stderr


def run_with_behavior(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    behavior = tmp_path / "hpa.yaml"
    behavior.write_text(text)
    return simulate(tmp_path, "0,a,600\n60,a,600\n", "--hpa-behavior", str(behavior), "--policies", "skew-aware")


def test_a_yaml_mistake_in_the_hpa_file_is_one_line_with_its_line_and_column(tmp_path: Path) -> None:
    """PyYAML's own message is five lines with a caret under a copy of the text; the user wants where."""
    result = run_with_behavior(tmp_path, "behavior:\n  scaleDown:\n    policies:\n    - type: Pods\n"
                                         "      value: 1\n     periodSeconds: 60\n")
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"{FAILED}{tmp_path / 'hpa.yaml'}:6:6: not valid YAML: "), result.stderr
    result = run_with_behavior(tmp_path, "\tbehavior:\n")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"{tmp_path / 'hpa.yaml'}:1:1: not valid YAML: " in result.stderr, result.stderr


@pytest.mark.parametrize(("kind", "named"), [("Deployment", "a Deployment"), ("APIService", "an APIService")])
def test_a_manifest_of_another_kind_is_named_as_such(tmp_path: Path, kind: str, named: str) -> None:
    """A Deployment given for the HPA was refused as "spec: unknown field 'replicas' (did you mean
    'minReplicas'?)", which sends the user to fix a field rather than pick the other file; the adapter's
    APIService (beside the HPA in manifests/) read "a APIService"."""
    result = run_with_behavior(tmp_path, f"apiVersion: apps/v1\nkind: {kind}\nmetadata: {{name: x}}\n"
                                         "spec:\n  replicas: 3\n")
    assert result.returncode == 2, result.stderr
    assert (f"{FAILED}{tmp_path / 'hpa.yaml'}: {named}, not a HorizontalPodAutoscaler: give the HPA's "
            "manifest (kubectl get hpa NAME -o yaml) or a mapping with `behavior:`") in result.stderr, result.stderr


def test_other_keys_beside_a_bare_behavior_are_refused_not_left_out(tmp_path: Path) -> None:
    """`behavior:` with a typo'd sibling (`minReplica:` pasted from a spec) ran, the sibling left out unread."""
    result = run_with_behavior(tmp_path, "minReplica: 3\nbehavior:\n  scaleDown: {selectPolicy: Min}\n")
    assert result.returncode == 2, result.stderr
    assert "unknown field 'minReplica' (did you mean 'minReplicas'?)" in result.stderr, result.stderr
    result = run_with_behavior(tmp_path, "maxReplicas: 4\nbehavior:\n  scaleDown: {selectPolicy: Min}\n")
    assert result.returncode == 0, result.stderr  # a spec pasted without `spec:` is read as one


def test_an_export_whose_step_changes_partway_is_named(tmp_path: Path) -> None:
    """Prometheus answers at most 11,000 points a query, so a day is exported in pieces, often at other steps:
    an hour at 60 s then an hour at 15 s was replayed in 15 s intervals, each 60 s row's requests arriving in
    15 s (4x the rate) and none in the 45 s after, with no word."""
    rows = "".join(f"{60 * i},a,600\n" for i in range(60))
    rows += "".join(f"{3600 + 15 * i},a,150\n" for i in range(240))
    result = simulate(tmp_path, rows, "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "every 60 s" in line]
    assert len(warnings) == 1, result.stderr
    assert "from 0 to 3540 (lines 2 to 61)" in warnings[0] and "every 15 s elsewhere" in warnings[0], warnings[0]


def test_a_model_requested_every_few_intervals_among_busy_ones_is_not_named(tmp_path: Path) -> None:
    rows = "".join(f"{60 * i},batch,100\n" for i in range(0, 120, 5))
    rows += "".join(f"{60 * i},a,{50 + i % 7}\n" for i in range(120))
    result = simulate(tmp_path, rows, "--policies", "mean-hpa")
    assert result.returncode == 0 and "every" not in result.stderr, result.stderr


@pytest.mark.parametrize(("step", "tick"), [(3, "6"), (7, "7"), (130, "5"), (37, "1")])
def test_a_trace_step_the_default_tick_does_not_fit_is_told_which_tick_does(tmp_path: Path, step: int,
                                                                            tick: str) -> None:
    """"choose a --tick that it divides" left the user to work out which; the message names one."""
    rows = "".join(f"{step * i},a,{step}\n" for i in range(4))
    result = simulate(tmp_path, rows, "--policies", "mean-hpa")
    if step == 130:  # 130 = 26 x 5: the default tick fits
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode == 2, result.stderr
    assert f"e.g. --tick {tick}" in result.stderr, result.stderr
    result = simulate(tmp_path, rows, "--policies", "mean-hpa", "--tick", tick)
    assert result.returncode == 0, result.stderr


def test_a_trace_of_one_timestamp_says_which_interval_it_took(tmp_path: Path) -> None:
    """With one timestamp there is no step to infer: 60 s was taken without a word, so a row of a 1 s export
    replayed its requests over a minute, at a sixtieth of their rate."""
    result = simulate(tmp_path, "1733011200,a,100\n1733011200,b,20\n", "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    assert "one timestamp" in result.stderr and "taken as 60 s" in result.stderr, result.stderr
    assert report(tmp_path)["trace"]["interval_s"] == 60


@pytest.mark.parametrize("name", ["report.json", "report.md", "timeline.png"])
def test_an_output_file_that_cannot_be_written_is_one_line_before_the_run(tmp_path: Path, name: str) -> None:
    """A directory where a report file goes (or any file that cannot be opened) ended the run, after it had
    simulated everything, in an IsADirectoryError traceback."""
    (tmp_path / "out" / name).mkdir(parents=True)
    result = runs.simulate(tmp_path, write_trace(tmp_path, "0,a,60\n60,a,60\n"), plot=True)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (f"{FAILED}--out {tmp_path / 'out'}: cannot write {name} there: it is a "
                             "directory\n"), result.stderr
    assert result.stdout == ""


def test_a_trace_finer_than_the_tick_says_its_bursts_are_spread_over_the_tick(tmp_path: Path) -> None:
    """A 1 s export replayed in the default 5 s ticks spreads each second's requests over the tick: on a trace
    with 3 s bursts skew-aware read 1.00x mean-hpa's pod-hours for 0.41x its delays, and with --tick 1 1.25x
    for 0.59x. The run said nothing of it."""
    rows = "".join(f"{t},a,{90 if t % 60 < 3 else 10}\n" for t in range(120))
    result = simulate(tmp_path, rows, "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "--tick 1" in line]
    assert len(warnings) == 1 and "1 s intervals" in warnings[0], result.stderr
    result = simulate(tmp_path, rows, "--policies", "mean-hpa", "--tick", "1")
    assert result.returncode == 0 and "warning" not in result.stderr, result.stderr


def run_with_config(tmp_path: Path, text: str, *flags: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "policy.yaml"
    config.write_text(text)
    return simulate(tmp_path, "0,a,60\n60,b,60\n", "--config", str(config), "--policies", "skew-aware", *flags)


def test_a_policy_max_below_the_hpas_min_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """`max_replicas: 1` in the policy file, minReplicas 2 (the default): a KeyError traceback mid-run."""
    result = run_with_config(tmp_path, "defaults:\n  max_replicas: 1\n")
    assert result.returncode == 2, result.stderr
    assert result.stderr == (f"{FAILED}{tmp_path / 'policy.yaml'}: defaults: max_replicas 1 is below "
                             "--min-replicas 2 (the HPA's minReplicas): raise it, or give --min-replicas 1\n")
    assert not (tmp_path / "out").exists()
    assert run_with_config(tmp_path, "defaults:\n  max_replicas: 1\n", "--min-replicas", "1").returncode == 0


def test_a_policy_min_above_the_hpas_max_is_warned_about(tmp_path: Path) -> None:
    """`min_replicas: 50` with maxReplicas 3: skew-aware ran at 3 pods, as its HPA holds it, without a word."""
    result = run_with_config(tmp_path, "defaults:\n  min_replicas: 50\n")
    assert result.returncode == 0, result.stderr
    assert (f"warning: {tmp_path / 'policy.yaml'}: defaults: min_replicas 50 is above this run's maxReplicas 3: "
            "the HPA holds skew-aware at 3") in result.stderr, result.stderr


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(counts=st.lists(st.lists(st.integers(1, 10_000), min_size=12, max_size=40), min_size=1, max_size=4),
       interval=st.sampled_from([1, 15, 60, 300]))
def test_any_counters_running_totals_are_named(tmp_path: Path, counts: list[list[int]], interval: int) -> None:
    """Whatever the traffic, its running totals (a counter exported as requests) only rise: always named."""
    rows = ["timestamp_s,model,requests"]
    for m, series in enumerate(counts):
        total = 0
        for i, count in enumerate(series):
            total += count
            rows.append(f"{1733011200 + interval * i},m{m},{total}")
    path = tmp_path / "counter.csv"
    path.write_text("\n".join(rows) + "\n")
    assert any("running total" in note for note in read_csv(path).notes)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), rates=st.lists(st.floats(2.0, 5_000.0), min_size=1, max_size=5),
       trend=st.floats(0.0, 0.005))
def test_traffic_that_rises_with_noise_is_not_taken_for_a_counter(tmp_path: Path, seed: int, rates: list[float],
                                                                   trend: float) -> None:
    """Poisson counts, even on a rising trend of up to 0.5% an interval (a daily cycle's morning doubles in
    2.3 h of 60 s rows), fall now and then: never named. A steeper rise all along the trace is named, and the
    warning says to ignore it then: by their rows alone the two cannot be told apart."""
    rng = np.random.default_rng(seed)
    rows = ["timestamp_s,model,requests"]
    for m, rate in enumerate(rates):
        for i, count in enumerate(rng.poisson(rate * (1.0 + trend) ** np.arange(60))):
            rows.append(f"{60 * i},m{m},{count}")
    path = tmp_path / "traffic.csv"
    path.write_text("\n".join(rows) + "\n")
    assert not any("running total" in note for note in read_csv(path).notes)


def test_the_plot_of_a_one_row_trace_shows_its_point(tmp_path: Path) -> None:
    """Lines through one point draw nothing: the plot of a one-row (or one-bucket) trace was empty panels."""
    result = runs.simulate(tmp_path, write_trace(tmp_path, "0,a,60\n"), plot=True)
    assert result.returncode == 0, result.stderr
    image = matplotlib.image.imread(tmp_path / "out" / "timeline.png")[..., :3]
    lower = image[image.shape[0] // 2:]  # the delayed-requests and cold-loads panels: no legend there
    red = (np.abs(lower - np.array([0xD6, 0x27, 0x28]) / 255.0).max(axis=-1) < 0.1).sum()  # skew-aware's C3
    assert red > 0


@pytest.mark.parametrize(("rows", "hint"), [
    ("0,a,6\n3600,a,6\n", "export at a step of 10 min or less"),
    ("0,a,6\n0.25,a,6\n", "sum the rows into 1 s intervals"),
])
def test_an_interval_out_of_range_says_what_to_do(tmp_path: Path, rows: str, hint: str) -> None:
    """"intervals must be 1 s to 10 min" said what was wrong, not what to do with an hourly or a per-request
    export."""
    result = simulate(tmp_path, rows)
    assert result.returncode == 2 and hint in result.stderr, result.stderr


def test_the_help_says_what_a_trace_row_counts() -> None:
    """--help named the columns only: Prometheus users put rate() values (per second) where counts belong."""
    result = subprocess.run([*SIMULATE, "--help"], capture_output=True, text=True, timeout=60)
    text = " ".join(result.stdout.split())
    assert "(a count, not a rate) that arrived for the model in the interval starting at timestamp_s" in text
    assert "python -m autoscaler.simulation.request_log" in text


def test_scrape_jitter_is_named_with_the_step_to_round_to(tmp_path: Path) -> None:
    """Timestamps a few ms off a 15 s step (scrape times, not query_range's) read "not on the 14.913 s grid
    ... (pandas: .dt.floor('60s'))": neither step was the trace's."""
    rows = "".join(f"{1733011200 + 15 * i + (0.03 if i % 2 else -0.04):.3f},a,{10 + i % 3}\n" for i in range(40))
    result = simulate(tmp_path, rows)
    assert result.returncode == 2, result.stderr
    assert "are about 15 s apart but not exactly (up to 0.04 s off, as scrape times are" in result.stderr, \
        result.stderr
    assert ".dt.round('15s')" in result.stderr and "60s" not in result.stderr, result.stderr


def test_a_negative_seed_is_refused_naming_the_flag(tmp_path: Path) -> None:
    """numpy's "expected non-negative integer" came after the flags were read, and named no flag."""
    result = subprocess.run([*SIMULATE, "--synthetic", "--out", str(tmp_path / "out"), "--hours", "1", "--models",
                             "20", "--seed", "-1", "--quiet", "--no-plot"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line == "modelmesh-autoscaler simulate: error: argument --seed: must be 0 or more, got '-1'", line


@pytest.mark.parametrize(("listed", "once"), [("fixed,fixed", "fixed"), ("fixed,mean-hpa,FIXED", "fixed,mean-hpa")])
def test_a_policy_listed_twice_is_refused_naming_it(tmp_path: Path, listed: str, once: str) -> None:
    """`--policies fixed,fixed` simulated fixed twice (twice the wait) and the report showed it once."""
    out = tmp_path / "out"
    result = subprocess.run([*SIMULATE, "--synthetic", "--out", str(out), "--hours", "0.5", "--models", "20",
                             "--rps", "5", "--policies", listed, "--quiet", "--no-plot"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line == ("modelmesh-autoscaler simulate: error: argument --policies: fixed is listed twice; name each "
                    f"policy once (--policies {once})"), line
    assert not out.exists()
