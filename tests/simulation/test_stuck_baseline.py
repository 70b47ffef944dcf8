"""A sudden jump in load can leave mean-hpa stuck below its target: it adds a pod, ModelMesh places no copy on
it, and the idle pod pulls the mean GPU busy under the 80% target while the other pods queue, for hours. The
report divided skew-aware's delays by that baseline's with no word of it ("0.029x the delays of mean-hpa")."""

from __future__ import annotations

import datetime
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.simulation.engine import Timeline
from autoscaler.simulation.idle_watch import BucketUse
from autoscaler.simulation.stuck_baseline import LONG_S, stuck_note, stuck_text
from tests.simulation.runs import report, simulate, write_trace

MODELS = 10


def step_trace(tmp_path: Path, before_rpm: int, after_rpm: int, minutes: int = 90, step_at: int = 20,
               start: int = 0) -> Path:
    """`MODELS` models, each `before_rpm` requests a minute until `step_at`, then `after_rpm`, in 60 s rows
    from `start`."""
    rows = "".join(f"{start + 60 * minute},m{m},{before_rpm if minute < step_at else after_rpm}\n"
                   for minute in range(minutes) for m in range(MODELS))
    return write_trace(tmp_path, rows)


def test_a_mean_hpa_held_below_its_target_by_an_idle_pod_is_said_in_every_output(tmp_path: Path) -> None:
    """The reviewer's trace, shortened: 25 -> 250 req/s over 10 models at 20 min. mean-hpa goes 2 -> 3 pods;
    the third takes no request, the mean busy reads 67% and it scales no more while the others queue."""
    result = simulate(tmp_path, step_trace(tmp_path, 150, 1500), "--policies", "mean-hpa,skew-aware")
    assert result.returncode == 0, result.stderr

    stuck = report(tmp_path)["policies"]["mean-hpa"]["stuck_below_target"]
    assert stuck["idle_pods"] == 1 and stuck["replicas"] == 3
    assert 60 * 60 <= stuck["seconds"] <= 70 * 60  # from soon after the step (20 min) to the end (90 min)
    assert stuck["longest"]["to_s"] == 90 * 60
    assert 0.6 < stuck["longest"]["mean_gpu_busy"] < 0.7
    assert stuck["delayed_share"] > 0.9  # nearly all of mean-hpa's delays came while it was stuck

    said = re.compile(r"mean-hpa was stuck below its 80% target for 1\.\d+ h .*1 of its 3 pods Ready and idle "
                      r".*while the others queued")
    for text in (result.stdout, (tmp_path / "out" / "report.md").read_text()):
        assert said.search(text), text
        assert "ModelMesh placed no copy" in text
        assert "ratios against mean-hpa" in text


def test_the_stuck_stretch_is_named_by_the_traces_own_times_as_the_other_notes_name_times(tmp_path: Path) -> None:
    """The note said where the stretch was as hours from the trace's start to three digits: a 20-minute stretch
    at 101.1 h read "from 101 h to 101 h", and unlike every other note no timestamp to find in the file. It now
    names the stretch's first and last moments as the trace writes them (epoch seconds with their UTC time)."""
    epoch = 1764547200  # 2025-12-01T00:00:00Z
    result = simulate(tmp_path, step_trace(tmp_path, 150, 1500, start=epoch), "--policies", "mean-hpa,skew-aware")
    assert result.returncode == 0, result.stderr
    longest = report(tmp_path)["policies"]["mean-hpa"]["stuck_below_target"]["longest"]
    assert (longest["from_timestamp_s"], longest["to_timestamp_s"]) == (epoch + longest["from_s"],
                                                                        epoch + longest["to_s"])

    def said(seconds: float) -> str:
        moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"{seconds:.15g} ({moment})"

    stretch = f"from {said(epoch + longest['from_s'])} to {said(epoch + longest['to_s'])}"
    for text in (result.stdout, (tmp_path / "out" / "report.md").read_text()):
        assert stretch in text, text


def test_no_such_note_where_mean_hpa_scales_to_the_load(tmp_path: Path) -> None:
    """The same jump where mean-hpa's new pods take requests: no idle pod, no note."""
    result = simulate(tmp_path, step_trace(tmp_path, 150, 600), "--policies", "mean-hpa,skew-aware")
    assert result.returncode == 0, result.stderr
    mean = report(tmp_path)["policies"]["mean-hpa"]
    assert mean["scale_events"] >= 1  # it did scale up for the jump
    assert "stuck_below_target" not in mean
    for text in (result.stdout, (tmp_path / "out" / "report.md").read_text()):
        assert "stuck below" not in text


def test_no_note_in_words_where_the_stuck_spell_carried_none_of_the_delays(tmp_path: Path) -> None:
    """A reviewer's day had report.md say mean-hpa was stuck for 16 min and then "0% of mean-hpa's delayed
    requests came then": a paragraph on what the ratios divide by, about a spell that is none of it. Here mean-hpa
    is stuck 12 min after a jump (150 -> 1500 requests a minute over 10 models at 20 min), then 10 new models at
    300,000 a minute each from 33 min hold every policy at --max-replicas 4 and delay nearly every request: the
    spell carries 0.2% of mean-hpa's delays. report.json keeps the spell, with its share; the words leave it out."""
    rows = "".join(f"{60 * minute},m{m},{150 if minute < 20 else 1500}\n"
                   for minute in range(33) for m in range(MODELS))
    rows += "".join(f"{60 * minute},n{m},300000\n" for minute in range(33, 60) for m in range(MODELS))
    result = simulate(tmp_path, write_trace(tmp_path, rows), "--policies", "mean-hpa,skew-aware",
                      "--max-replicas", "4")
    assert result.returncode == 0, result.stderr
    stuck = report(tmp_path)["policies"]["mean-hpa"]["stuck_below_target"]
    assert stuck["seconds"] >= LONG_S and stuck["delayed_share"] < 0.005
    for text in (result.stdout, (tmp_path / "out" / "report.md").read_text()):
        assert "stuck below" not in text and "0% of mean-hpa's delayed requests" not in text


BUCKET = st.tuples(st.sampled_from([0, 1, 1, 2]), st.sampled_from([0.4, 1.0, 1.0]), st.floats(0.5, 1.0),
                   st.sampled_from([0.0, 3.0, 3.0]), st.integers(2, 6))
"""(idle pods, share of ticks some pod ran full, mean busy, delayed requests, replicas): often stuck, with
maxReplicas 6."""
RUNS = st.lists(st.tuples(st.integers(1, 25), BUCKET), max_size=8)
"""Runs of like buckets: long stretches of stuck ones, as a replay has, and short ones."""


@given(RUNS, st.sampled_from([60.0, 300.0]), st.floats(0.0, 1.0), st.sampled_from([0.0, 363_000.0, 1764547200.0]))
def test_the_note_counts_only_long_stretches_within_the_trace_and_a_share_of_the_delays(
        runs: list[tuple[int, tuple[int, float, float, float, int]]], bucket_s: float, cut: float,
        start_s: float) -> None:
    """Whatever the pods did: a note's stretches are each at least ten minutes (less what the trace's end cuts
    off its last bucket), within the trace, at a mean busy under which the HPA does not scale up, with delays
    that are a share of the policy's; and wherever the trace starts, its words name the longest stretch's first
    and last moments as two different times of the trace, as far apart as the stretch is long."""
    timeline = Timeline(bucket_s=bucket_s)
    for length, (idle, full, busy, delayed, replicas) in runs:
        for _ in range(length):
            timeline.t_s.append(len(timeline.t_s) * bucket_s)
            timeline.pods_use.append(BucketUse(idle, full, busy))
            timeline.delayed.append(delayed)
            timeline.replicas.append(replicas)
    duration = max(0.0, (len(timeline.t_s) - cut) * bucket_s)
    note = stuck_note(timeline, 6, 0.8, duration, start_s)
    if note is None:
        return
    longest = note["longest"]
    duration += 0.05  # the note's seconds are to a tenth
    assert note["seconds"] >= note["stretches"] * LONG_S - bucket_s
    # each of from_s, to_s and seconds is rounded to a tenth: their difference may pass the sum by one
    assert longest["to_s"] - longest["from_s"] <= note["seconds"] + 0.1 + 1e-9
    assert note["seconds"] <= duration
    assert 0 <= longest["from_s"] < longest["to_s"] <= duration
    assert longest["mean_gpu_busy"] <= note["scales_up_above"] == 0.88
    assert note["idle_pods"] >= 1 and note["replicas"] < 6
    assert 0 < note["delayed_share"] <= 1 and note["delayed_requests"] <= sum(timeline.delayed)
    said = stuck_text({"policies": {"mean-hpa": {"stuck_below_target": note}}}, "mean-hpa")
    assert said is not None
    [(began, ended)] = re.findall(r"from (\d+(?:\.\d+)?)(?: \([-:T\dZ]+\))? to (\d+(?:\.\d+)?)", said)
    assert float(ended) - float(began) == pytest.approx(longest["to_s"] - longest["from_s"])
    assert float(began) == pytest.approx(start_s + longest["from_s"])
