"""On a trace of many quiet models (Azure Functions' shape) mean-hpa sits at minReplicas, below what holding the
models in use takes (the cache oracle), so the goal's pod-hours part, at most 1.15x mean-hpa's, asks a policy to
hold fewer pods than the models used within target_lru_age_s need. The report said "skew-aware: missed:
pod-hours 1.358x" and never that meeting that part means cold loads, as its "Bound:" sentence says when the delay
part is out of reach."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from autoscaler.simulation.figures import figure
from autoscaler.simulation.goal_ceiling import FIELD, goal_ceiling_note, goal_ceiling_text
from tests.simulation.runs import report, simulate, write_trace

SAID = "Pod-hours goal below the cache oracle"


def outputs(tmp_path: Path, stdout: str) -> tuple[str, str]:
    """What a user reads: the printed summary and report.md."""
    return stdout, (tmp_path / "out" / "report.md").read_text()


def test_a_pod_hours_goal_below_what_holding_the_models_takes_is_said_with_its_numbers(tmp_path: Path) -> None:
    """200 models, each asked once every 5 minutes, 20 copies a pod: all 200 are used within 600 s, so holding
    them takes 10 pods, while their 40 requests a minute keep mean-hpa's 2 pods nearly idle at minReplicas."""
    rows = "".join(f"{60 * t},m{m:03d},1\n" for t in range(30) for m in range(200) if (t + m) % 5 == 0)
    result = simulate(tmp_path, write_trace(tmp_path, rows), "--cache-models", "20",
                      "--policies", "mean-hpa,skew-aware")
    assert result.returncode == 0, result.stderr
    got = report(tmp_path)
    mean_hpa = got["policies"]["mean-hpa"]
    assert mean_hpa["scale_events"] == 0 and mean_hpa["peak_replicas"] == 2  # at minReplicas all along
    cache = got["cache_oracle_pod_hours"]
    goal = 1.15 * mean_hpa["pod_hours"]  # the goal's pod-hours: 2 pods for 30 minutes, 1.15 pod-hours
    assert goal < cache

    note = got[FIELD]
    assert note["goal_pod_hours"] == pytest.approx(goal, rel=1e-5)
    assert note["cache_oracle_pod_hours"] == cache
    assert note["goal_vs_cache_oracle"] == round(goal / cache, 3)
    assert note["short_of"] == "models_in_use"
    assert "cold loads on models used within target_lru_age_s" in note["means"]
    # the verdicts are the same as without it: skew-aware holds the models, and misses the pod-hours part
    assert got["policies"]["skew-aware"]["goal"]["parts"]["pod_hours"]["met"] is False

    said = (f"{SAID}: at most 1.15x mean-hpa's pod-hours is {goal:.3g} pod-hours, {round(goal / cache, 3):g}x the "
            f"{cache:.3g} pod-hours of the cache oracle (enough pods each interval to serve its requests at full "
            f"capacity and hold the models used within target_lru_age_s).")
    for text in outputs(tmp_path, result.stdout):
        assert said in text, text
        assert ("This part of the goal asks a policy to hold fewer pods than the models in use need: meeting it "
                "means cold loads on models used within target_lru_age_s, and a policy that holds them misses "
                "it.") in text, text


def test_a_pod_hours_goal_below_what_the_requests_need_says_it_means_delays(tmp_path: Path) -> None:
    """One model at 100 requests a second needs 5 pods of 20 at full capacity; --max-replicas 2 holds mean-hpa
    at 2, so the goal's pod-hours is short of serving the requests, not of holding the model."""
    rows = "".join(f"{60 * t},chat,6000\n" for t in range(20))
    result = simulate(tmp_path, write_trace(tmp_path, rows), "--max-replicas", "2",
                      "--policies", "mean-hpa,skew-aware")
    assert result.returncode == 0, result.stderr
    got = report(tmp_path)
    goal = 1.15 * got["policies"]["mean-hpa"]["pod_hours"]
    assert goal < got["oracle_pod_hours"] <= got["cache_oracle_pod_hours"]
    assert got[FIELD]["short_of"] == "requests"
    for text in outputs(tmp_path, result.stdout):
        assert (f"This part of the goal asks a policy for fewer pods than serving the requests takes with every "
                f"pod at full capacity (the requests' oracle, {got['oracle_pod_hours']:.3g} pod-hours): meeting it "
                f"means delayed requests.") in text, text


def test_nothing_new_is_said_where_the_cache_oracle_is_within_the_pod_hours_goal(tmp_path: Path) -> None:
    """Ten busy models that one pod's cache holds: mean-hpa scales for their requests, and holding them takes
    no more than serving them."""
    rows = "".join(f"{60 * t},m{m},{600 if t < 10 else 1500}\n" for t in range(40) for m in range(10))
    result = simulate(tmp_path, write_trace(tmp_path, rows), "--policies", "mean-hpa,skew-aware")
    assert result.returncode == 0, result.stderr
    got = report(tmp_path)
    assert 1.15 * got["policies"]["mean-hpa"]["pod_hours"] >= got["cache_oracle_pod_hours"]
    assert FIELD not in got
    for text in outputs(tmp_path, result.stdout):
        assert not re.search("goal below|fewer pods than", text), text


HOURS = st.floats(0.01, 10_000.0).map(figure)  # pod-hours as report.json keeps them


@given(HOURS, HOURS, st.floats(0.0, 1.0))
@example(86.93, 100.0, 0.5)  # 99.97 pod-hours against 100: 0.9997x, which three decimals write "1x"
def test_the_note_appears_only_where_the_goal_reads_below_the_cache_oracle(mean_hpa: float, cache: float,
                                                                           requests_share: float) -> None:
    """Whatever the pod-hours: a note says a ratio under 1x (never "1x the cache oracle"), and where there is
    none the goal's pod-hours is within what three decimals of that ratio show of the cache oracle, or above."""
    got: dict[str, Any] = {"policies": {"mean-hpa": {"pod_hours": mean_hpa}}, "cache_oracle_pod_hours": cache,
                           "oracle_pod_hours": figure(cache * requests_share)}
    note = goal_ceiling_note(got, "mean-hpa")
    if note is None:
        assert 1.15 * mean_hpa >= cache * (1 - 0.0005)
        return
    got[FIELD] = note
    text = goal_ceiling_text(got, "mean-hpa")
    assert text is not None
    said = re.search(r"pod-hours, (<?)([\d.]+)x the", text)
    assert said is not None, text
    assert float(said[2]) < 1, text
    assert note["short_of"] == ("requests" if 1.15 * mean_hpa < got["oracle_pod_hours"] else "models_in_use")
