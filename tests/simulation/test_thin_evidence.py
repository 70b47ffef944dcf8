"""Advice measured on a trace too short to show much says so: an hour of 50 models advised `raise scale_down_tau_s
300 -> 600` on 143 delayed requests and one scale event, in the same words as a day's advice resting on fifty."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.simulation.runs import SIMULATE


def test_an_hours_advice_says_it_rests_on_one_scale_event_and_still_gives_the_setting(tmp_path: Path) -> None:
    result = subprocess.run([*SIMULATE, "--synthetic", "--models", "50", "--hours", "1", "--out", str(tmp_path / "out"),
                             "--no-plot", "--quiet"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    markdown = (tmp_path / "out" / "report.md").read_text()
    for said in (result.stdout, markdown):
        lines = said.split("What to change", 1)[1].split("\n\n", 1)[0].splitlines()
        advised = next(at for at, line in enumerate(lines) if line.startswith("  raise scale_down_tau_s 300 -> 600: "))
        caveat = lines[advised + 1]
        assert caveat.startswith("    thin evidence: "), lines
        assert "1 scale event in this run and 0 in the replay" in caveat, caveat
        assert "fewer than 20" in caveat, caveat  # the rule, said where it applies
        assert any(line.lstrip().startswith("compare") for line in lines[advised:]), lines  # the advice is all there
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    [entry] = [e for e in report["advice"] if e["part"] == "delayed"]
    assert entry["settings"][0]["measured"]["evidence"]["thin"] is True
