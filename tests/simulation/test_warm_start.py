"""The replay starts as a runtime that has served the trace's first load for a while: the hot models already
have the copies ModelMesh's rate check gives them. A start short of that delays requests under every policy
alike, which on a day that delays none after it decided the ratio of delays between policies (a day of the
500 busiest Azure Functions read 0.998x mean-hpa's delays, every one in the first four minutes)."""

from __future__ import annotations

from pathlib import Path

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
