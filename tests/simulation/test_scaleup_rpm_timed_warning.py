"""`--scaleup-rpm` on a timed run was ignored in silence (s58 review): `simulate --scaleup-rpm 1080` without
`--queue-untimed` replayed ModelMesh's measured thresholds and said nothing, so the figures read as the threshold's.
It now says so in one warning line, on stderr and in the report's warnings."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.simulation.runs import SIMULATE, report

SAID = ("--scaleup-rpm 1080 does nothing in this run: the queue is timed, where ModelMesh copies at 90% of a copy's "
        "measured bandwidth and the simulator ignores it; add --queue-untimed to replay a runtime not annotated "
        "perModelConcurrencyLimit, or leave --scaleup-rpm out")


def run(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SIMULATE, "--synthetic", "--models", "20", "--hours", "1", "--policies", "fixed", "--quiet",
                           "--no-plot", "--out", str(tmp_path / "out"), *flags], capture_output=True, text=True,
                          timeout=120)


def test_a_scaleup_rpm_on_a_timed_run_is_said_to_do_nothing(tmp_path: Path) -> None:
    result = run(tmp_path, "--scaleup-rpm", "1080")
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stderr.splitlines() if "--scaleup-rpm" in line] == [
        f"simulate: warning: {SAID}"]
    assert SAID in report(tmp_path)["warnings"]
    assert SAID in (tmp_path / "out" / "report.md").read_text()


def test_no_such_warning_untimed_or_at_the_default(tmp_path: Path) -> None:
    for flags in (("--queue-untimed", "--scaleup-rpm", "1080"), ()):
        (here := tmp_path / str(len(flags))).mkdir()
        result = run(here, *flags)
        assert result.returncode == 0, result.stderr
        assert "does nothing in this run" not in result.stderr
        assert not [w for w in report(here)["warnings"] if "--scaleup-rpm" in w and "does nothing" in w]
