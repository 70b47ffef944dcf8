"""`modelmesh-autoscaler demo`'s flags as a new user meets them: a value it cannot run with is refused before
anything starts, in one line that names the flag and the value, as `serve` refuses one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autoscaler.demo.run import Demo

REPO = Path(__file__).resolve().parent.parent


def demo(*flags: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autoscaler.cli", "demo", *flags], capture_output=True, text=True,
                          timeout=60, cwd=cwd, env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--pods", "0", "must be 1 to 32"),
    ("--pods", "-1", "must be 1 to 32"),
    ("--pods", "2.5", "expected a whole number"),
    ("--max-pods", "0", "must be 1 to 32"),
    # Accepted, 100,000 pods began to start one by one (an exporter process each) on a 2-core machine.
    ("--pods", "100000", "must be 1 to 32 (each is an exporter process here)"),
    ("--max-pods", "33", "must be 1 to 32"),
    ("--duration", "0", "must be 1 to 86400 seconds"),
    ("--duration", "-5", "must be 1 to 86400 seconds"),
    # Accepted, `nan` started every process and ended at once; `inf` never reached the demo's later phases.
    ("--duration", "nan", "must be a finite number"),
    ("--duration", "inf", "must be a finite number"),
    ("--duration", "1 min", "expected a number of seconds, got '1 min'"),
    # "must be greater than 0" where 0.5 said "must be at least 1 s": one range, whichever side.
    ("--interval", "0", "must be 1 to 600 seconds, got '0' (the demo's adapter refreshes once a second"),
    # Accepted, the demo ran its whole duration without printing a single table.
    ("--interval", "nan", "must be a finite number"),
    # Accepted, 363 lines in 20 s: a table more often than the adapter refreshes repeats the last one.
    ("--interval", "1e-9", "must be 1 to 600 seconds, got '1e-9' (the demo's adapter refreshes once a second"),
    ("--interval", "500ms", "must be 1 to 600 seconds"),
    # Accepted, the demo printed no table in its whole run.
    ("--interval", "1e300", "must be 1 to 600 seconds"),
    ("--start-timeout", "0", "must be 1 to 3600 seconds"),
    ("--start-timeout", "inf", "must be a finite number"),
])
def test_a_value_the_demo_cannot_run_with_is_one_line_naming_the_flag(flag: str, value: str, says: str,
                                                                     tmp_path: Path) -> None:
    """The line was "demo: --pods, --duration and --interval must be positive, --max-pods at least --pods",
    whichever was wrong and with what value, in a format of its own; `nan` and `inf` were not refused."""
    done = demo(flag, value, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"modelmesh-autoscaler demo: error: argument {flag}: {says}"), line
    assert repr(value) in line, line
    assert done.stdout == "", "nothing may start"


def test_max_pods_below_pods_names_both_values(tmp_path: Path) -> None:
    done = demo("--pods", "4", "--max-pods", "3", cwd=tmp_path)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line == ("modelmesh-autoscaler demo: error: --max-pods (3) must be at least --pods (4): the HPA's "
                    "maxReplicas cannot be below the replicas the demo starts with"), line
    assert done.stdout == ""


@pytest.mark.parametrize(("pods", "says"), [(1, "demo: 1 fake ModelMesh pod, 1 exporter, adapter on "),
                                            (4, "demo: 4 fake ModelMesh pods, 4 exporters, adapter on ")])
def test_the_first_line_counts_pods_in_words_that_agree(pods: int, says: str, tmp_path: Path) -> None:
    """`demo --pods 1` began "demo: 1 fake ModelMesh pods, 1 exporters"."""
    line = Demo(pods, 60.0, 3.0, tmp_path).describe_start(6443)
    assert line.startswith(says + "https://127.0.0.1:6443 (logs in "), line
