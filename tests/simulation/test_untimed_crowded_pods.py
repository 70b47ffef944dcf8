"""Untimed, two copies on one pod, each under ModelMesh's scaleUpRpmThreshold but together over what the pod serves,
are never copied, and the report said nothing of it (s58 review).

After following the stuck-copies warning (`--queue-untimed --scaleup-rpm 1080` on 20 req/s pods) a 12-hour trace
still delayed 18.9% of requests under mean-hpa and skew-aware (fixed-max 0.03%) with no warning: one pod held a
model at 11 req/s beside one at 5.5, so no copy reached 18 req/s. The hand trace here: a at 12 req/s, b and c at
10, two pods: a and b share one (22 req/s) under every policy but fixed-max, and no copy is made.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.simulation.runs import report, simulate, write_trace

FLAGS = ("--pod-rps", "20", "--queue-untimed")


def hand_trace(tmp_path: Path) -> Path:
    return write_trace(tmp_path, "".join(f"{60 * minute},{model},{60 * rps}\n"
                                         for minute in range(20) for model, rps in (("a", 12), ("b", 10), ("c", 10))))


def test_a_pod_crowded_by_copies_each_under_the_threshold_is_named_and_the_named_threshold_copies_them(
        tmp_path: Path) -> None:
    trace = hand_trace(tmp_path)
    result = simulate(tmp_path, trace, *FLAGS, "--scaleup-rpm", "1080")
    assert result.returncode == 0, result.stderr
    written = report(tmp_path)
    assert written["policies"]["mean-hpa"]["delayed_ratio"] > 0.5
    [note] = [w for w in written["warnings"] if "--queue-untimed" in w]  # not the single copy's warning
    assert "a with b (26,400 requests, up to 22 req/s together, a's copy at 12 req/s or more)" in note, note
    for said in ("more than a pod serves (20 req/s)", "1080 rpm", "MM_SCALEUP_RPM_THRESHOLD",
                 "perModelConcurrencyLimit", "under 720 rpm here; --scaleup-rpm 720 replays it"):
        assert said in note, said
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert note in markdown and note in result.stderr
    assert written["policies"]["mean-hpa"]["untimed_crowded_requests"] == 26400
    # Following it: the copy comes, and the delays go
    rpm = re.search(r"--scaleup-rpm (\d+) replays it", note)
    assert rpm is not None
    (followed := tmp_path / "followed").mkdir()
    again = simulate(followed, trace, *FLAGS, "--scaleup-rpm", rpm.group(1))
    assert again.returncode == 0, again.stderr
    assert [w for w in report(followed)["warnings"] if "--queue-untimed" in w] == []
    assert {name: p["delayed_requests"] for name, p in report(followed)["policies"].items()} == {
        "fixed": 0, "fixed-max": 0, "mean-hpa": 0, "skew-aware": 0}


def test_no_crowded_note_timed(tmp_path: Path) -> None:
    result = simulate(tmp_path, hand_trace(tmp_path), "--pod-rps", "20")
    assert result.returncode == 0, result.stderr
    assert "untimed_crowded_requests" not in report(tmp_path)["policies"]["mean-hpa"]
    assert not [w for w in report(tmp_path)["warnings"] if "together" in w]
