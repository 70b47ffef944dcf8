"""The report's words about the replay fit a trace of any length: on a 2-hour trace the Bound line said "with
every pod maxReplicas allows (14) all day", of a run that lasted two hours."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.simulation.runs import SIMULATE


def test_a_three_hour_trace_is_not_said_to_last_all_day(tmp_path: Path) -> None:
    """Three hours where no replica policy reaches the delay goal: the Bound line, the advice that says so and
    fixed-max's description each speak of the trace, printed and in report.md."""
    result = subprocess.run([*SIMULATE, "--synthetic", "--models", "100", "--hours", "3", "--rps", "40", "--out",
                             str(tmp_path / "out"), "--no-plot", "--quiet"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    markdown = (tmp_path / "out" / "report.md").read_text()
    for said in (result.stdout, markdown):
        assert "all day" not in said, said
        assert "Bound: with every pod maxReplicas allows (6) throughout the trace, " in said, said
        assert "out of reach of any replica policy: fixed-max, every pod maxReplicas allows throughout the trace" \
            in said, said
    assert "6 replicas (maxReplicas throughout the trace: a bound" in markdown, markdown
