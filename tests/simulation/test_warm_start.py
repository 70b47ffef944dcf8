"""The replay starts as a runtime that has served the trace's first load for a while: the hot models already
have the copies ModelMesh's rate check gives them. A start short of that delays requests under every policy
alike, which on a day that delays none after it decided the ratio of delays between policies (a day of the
500 busiest Azure Functions read 0.998x mean-hpa's delays, every one in the first four minutes)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.simulation.cluster import Cluster, ClusterShape
from tests.simulation.runs import report, simulate


def test_a_steady_load_with_hot_models_delays_nothing_from_the_first_minute(tmp_path: Path) -> None:
    """Ten models at 60 requests/s each (three pods' worth apiece at 20 a pod) and 100 at 1 a second, the same
    every minute for 30 minutes: 700 requests/s, which `fixed` serves on 44 pods at 80% busy. Nothing changes,
    nothing needs a new copy, so nothing waits: 0 delayed of 1,260,000. (Four rounds of warming left the hot
    models short of copies: 213,379 delayed, all in the first minutes.)"""
    rows = ["timestamp_s,model,requests"]
    for minute in range(30):
        rows += [f"{minute * 60},hot-{h},3600" for h in range(10)]
        rows += [f"{minute * 60},quiet-{q},60" for q in range(100)]
    trace = tmp_path / "steady.csv"
    trace.write_text("\n".join(rows) + "\n")
    result = simulate(tmp_path, trace, "--policies", "fixed,mean-hpa", timeout=300)
    assert result.returncode == 0, result.stderr
    written = report(tmp_path)
    assert written["cluster"]["fixed_replicas"] == 44
    for policy in ("fixed", "mean-hpa"):
        entry = written["policies"][policy]
        assert (entry["requests"], entry["delayed_requests"]) == (1_260_000, 0), policy


def test_a_runtime_whose_models_outnumber_its_slots_starts_holding_its_busiest_one(tmp_path: Path) -> None:
    """Two hours of `hot` at 480 requests a minute and 11 quiet models at 12, on 2 pods of 5 slots: 12 models for
    10 slots. A runtime serving this for a while keeps `hot` (LRU evicts the least used) and refuses loads of two
    quiet models at most (every copy used within the churn age). The warm start loaded the quiet ones first and
    the churn limit locked `hot` out for the whole trace: fixed and mean-hpa failed 59,040 requests, 80% of them,
    every one of `hot`'s 57,600 among them, with 0 cold loads, and the report blamed ModelMesh's churn limit."""
    rows = ["timestamp_s,model,requests"]
    for minute in range(120):
        rows.append(f"{minute * 60},hot,480")
        rows += [f"{minute * 60},quiet{q:02d},12" for q in range(11)]
    trace = tmp_path / "warm12.csv"
    trace.write_text("\n".join(rows) + "\n")
    result = simulate(tmp_path, trace, "--cache-models", "5", "--policies", "fixed,mean-hpa")
    assert result.returncode == 0, result.stderr
    written = report(tmp_path)
    assert written["cluster"]["fixed_replicas"] == 2
    two_quiet_models = 2 * 12 * 120
    for policy in ("fixed", "mean-hpa"):
        entry = written["policies"][policy]
        assert entry["requests"] == 120 * (480 + 11 * 12), policy
        assert entry["refused_requests"] <= two_quiet_models, (policy, entry["refused_requests"])
    text = (tmp_path / "out" / "report.md").read_text()
    assert "failed 80% of the requests" not in text


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4), st.integers(1, 6), st.lists(st.integers(1, 600), min_size=1, max_size=30),
       st.sampled_from([300.0, 0.0]))
def test_after_the_warm_start_no_model_left_out_is_busier_than_one_held(pods: int, slots: int, rpm: list[int],
                                                                        churn_age_s: float) -> None:
    """A runtime that has served the first interval's load for a while holds its busiest models: where the caches
    are full, every model left uncached has a rate no higher than every model held; where they have room, every
    model is held. (The warm start held the quietest and left the busiest out, whatever the rates.)"""
    shape = ClusterShape(pod_rps=20.0, cache_models=slots, load_time_s=10.0, min_churn_age_s=churn_age_s)
    cluster = Cluster(shape, pods, tick_s=5.0)
    models = list(range(len(rpm)))
    rates = [r / 60.0 for r in rpm]
    cluster.warm(0.0, models, rates)
    held = [m for m in models if m in cluster.holders]
    left_out = [m for m in models if m not in cluster.holders]
    if all(len(pod.cache) < slots for pod in cluster.pods):
        assert not left_out
    if held and left_out:
        assert max(rates[m] for m in left_out) <= min(rates[m] for m in held), (held, left_out, rates)
    assert cluster.cold_loads == 0 and cluster.refused == 0.0  # none of the warm start's loads counted
