"""The loads a scale-down causes have one name wherever a user reads them: `simulate`'s table and report.md call
them "moved by scale-down", while the README, the simulator's guide and bench/simulate_shapes.py's table said
"migrated loads", so that a user reading the README and then the CLI's output could not match the two. The
report.json key, `migrated_loads`, stays (scripts read it), and the docs say once that it carries that column."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()
SIMULATION = (REPO / "docs" / "simulation.md").read_text()
WORDS = "moved by scale-down"
OTHER_NAME = re.compile(r"migrated loads?\b", re.I)


def test_the_cli_s_table_calls_them_moved_by_scale_down() -> None:
    from autoscaler.simulation.report_text import table

    policy = {"pod_hours": 1.0, "delayed_requests": 0, "delayed_ratio": 0.0, "cold_loads": 3,
              "avoidable_cold_loads": 0, "migrated_loads": 7, "overloaded_seconds": 0.0, "scale_events": 1}
    header, _, row = table({"oracle_pod_hours": 1.0, "policies": {"fixed": policy}}).splitlines()
    columns = [cell.strip() for cell in header.strip("|").split("|")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[columns.index(WORDS)] == "7"


def test_the_readme_and_the_guide_use_the_cli_s_words() -> None:
    for name, text in (("README.md", README), ("docs/simulation.md", SIMULATION)):
        found = [" ".join(m.group(0).split()) for m in OTHER_NAME.finditer(text)]
        assert not found, f"{name} says {found}, where simulate's table says {WORDS!r}"


def test_the_docs_say_which_report_json_key_carries_the_column() -> None:
    said = re.search(rf"`migrated_loads`[^.;]{{0,80}}{WORDS}|{WORDS}[^.;]{{0,80}}`migrated_loads`",
                     " ".join(README.split()))
    assert said, f"the README does not say that report.json's migrated_loads is the table's {WORDS!r}"


def test_the_shapes_bench_heads_its_column_as_the_cli_and_the_readme_do() -> None:
    done = subprocess.run([sys.executable, "bench/simulate_shapes.py", "--hours", "0.05", "--models", "3",
                           "--shapes", "steady"], capture_output=True, text=True, timeout=300, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    header = done.stdout.splitlines()[0]
    assert f"cold loads ({WORDS})" in header, header
    assert header in README.splitlines(), "the README's shapes table is headed otherwise than the bench prints"
