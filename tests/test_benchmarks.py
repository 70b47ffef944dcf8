"""Every benchmark's small run in docs/performance.md runs: a user tries one before a full run of minutes, and
a script that no longer starts (a renamed import, a flag the docs still give) shows here, not in their hands.
The figures are not looked at: tests never assert timings."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
SECTION = (REPO / "docs" / "performance.md").read_text().split("## A quick run of each benchmark\n", 1)[1]
ROWS = re.findall(r"^\| `(\w+\.py)` \| `python (bench/\S+\.py[^`]*)` \| ([^|]+) \|$", SECTION.split("\n## ")[0],
                  flags=re.M)


def test_every_benchmark_has_a_small_run() -> None:
    scripts = {p.name for p in (REPO / "bench").glob("bench_*.py")} | {"simulate_shapes.py"}
    assert {script for script, _, _ in ROWS} == scripts


QUICK_S = 10
"""Small runs up to this long run here; the longer ones (process start-ups and waits, 15-36 s each) would add a
minute to every CI run, and `tests/test_docs.py` still sees each of those scripts start and answer `--help`."""


def _seconds(took: str) -> float | None:
    took = took.strip()
    return float(took.removesuffix(" s")) if took.endswith(" s") else None


@pytest.mark.parametrize("command", [command for _, command, took in ROWS
                                     if (seconds := _seconds(took)) is not None and seconds <= QUICK_S],
                         ids=lambda command: command.split()[0].removeprefix("bench/"))
def test_the_small_run_runs(command: str) -> None:
    result = subprocess.run([sys.executable, *command.split()], capture_output=True, text=True, timeout=300,
                            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stdout.strip(), "printed no figures"
