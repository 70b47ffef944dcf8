"""Pods added while the warm pods saturate on many quiet models get copies of them, as in ModelMesh.

A reviewer's trace (500 models, each about 0.24 req/s, every one called every minute): skew-aware sat at
maxReplicas for 12 h at 1.93x mean-hpa's pod-hours and delayed 41% of the requests, as many as mean-hpa; the
pods it added idled while the warm pods queued 160,000 requests. The simulated rate check left a copy under 8
requests in its 10 s at ModelMesh's 2000 rpm fallback every time, where ModelMesh adds a copy's completed
requests up across checks until it has 64 (`getRpmScaleThreshold`, ModelMesh.java l.2766-2784): the fallback
holds only for a copy with fewer than 8 since it loaded. A copy on a saturated pod then measures the pod's fair
level for a bandwidth (rate_check.fair_level), here under its own rate, and asks for another copy (l.5762), which
the added, empty pods take (placement.py).
"""

from __future__ import annotations

from pathlib import Path

from tests.simulation.runs import report, simulate, write_trace

MODELS = 60


def quiet_models_trace(tmp_path: Path) -> Path:
    """`MODELS` models, 15 requests a minute each for 10 minutes (15 req/s in all), then 45 (0.75 req/s each,
    7.5 requests in a 10 s check): with 30 copies a pod the two warm pods hold every model once, and at 45 req/s
    each serves 22.5 req/s of its 20."""
    rows = "".join(f"{60 * minute},m{m},{15 if minute < 10 else 45}\n" for minute in range(90) for m in range(MODELS))
    return write_trace(tmp_path, rows)


def test_the_pods_added_for_quiet_models_take_their_copies_and_serve(tmp_path: Path) -> None:
    result = simulate(tmp_path, quiet_models_trace(tmp_path), "--cache-models", "30",
                      "--policies", "fixed,mean-hpa,skew-aware")
    assert result.returncode == 0, result.stderr
    policies = report(tmp_path)["policies"]
    assert policies["fixed"]["delayed_ratio"] == 0.0  # 3 pods holding the models from the start
    for name in ("mean-hpa", "skew-aware"):
        # Was 0.96 for both, skew-aware at 1.94x mean-hpa's pod-hours: its added pods never held a model
        assert policies[name]["delayed_ratio"] < 0.1, (name, policies[name])
        assert policies[name]["copy_loads"] >= 20, (name, policies[name])
    assert policies["skew-aware"]["pod_hours"] < 1.6 * policies["mean-hpa"]["pod_hours"]  # was 1.94x
