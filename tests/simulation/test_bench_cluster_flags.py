"""The bench scripts that replay the simulator read its cluster flags as `simulate` does: `python
bench/simulate_shapes.py --min-churn-age 1e300` was taken as a plain float (and ran a day whose full pods refused
every load), while `simulate` refuses it past a day; `--pod-rps` and `--cache-models` likewise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

REFUSED = [
    ("simulate_shapes.py", "--min-churn-age", "1e300", "must be 0 to 86400 seconds"),
    ("simulate_cache.py", "--min-churn-age", "1e300", "must be 0 to 86400 seconds"),
    ("simulate_cache.py", "--min-churn-age", "-1", "must be 0 (off) or more"),
    ("simulate_shapes.py", "--pod-rps", "1e300", "must be 0.001 to 100000 req/s"),
    ("simulate_shapes.py", "--cache-models", "0", "must be 1 to 1000000"),
    ("bench_simulate.py", "--pod-rps", "1e-300", "must be 0.001 to 100000 req/s"),
    ("bench_simulate.py", "--cache-models", "1" + "0" * 400, "must be 1 to 1000000"),
]


@pytest.mark.parametrize(("script", "flag", "value", "says"), REFUSED,
                         ids=[f"{s}:{f}={v[:8]}" for s, f, v, _ in REFUSED])
def test_a_bench_script_refuses_a_cluster_flag_out_of_range_as_simulate_does(script: str, flag: str, value: str,
                                                                            says: str) -> None:
    done = subprocess.run([sys.executable, str(REPO / "bench" / script), flag, value], capture_output=True, text=True,
                          timeout=120, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.splitlines()[-1].endswith(f"argument {flag}: {says}, got {value!r}"), done.stderr[-2000:]


def test_the_bench_scripts_take_the_churn_limit_in_the_units_simulate_takes() -> None:
    """`--min-churn-age 5m` was refused ("invalid float value") where `simulate` takes it."""
    from bench import simulate_cache, simulate_shapes

    for module in (simulate_shapes, simulate_cache):
        assert module.build_parser().parse_args(["--min-churn-age", "5m"]).min_churn_age == 300.0
