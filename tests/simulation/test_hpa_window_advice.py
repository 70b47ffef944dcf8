"""Advice on the HPA's stabilization windows, followed as a user follows it: the advice names one field of the
`--hpa-behavior` file, its figures are what changing that one field does, and its command runs that change.

A reviewer gave the shipped HPA with both windows at 600 s. The advice "lower
behavior.scaleDown.stabilizationWindowSeconds 600 -> 0: pod-hours 15.4 -> 13.3" was measured, and its compare
command run, with the whole shipped behavior in place of theirs, the scale-up window gone too: set as advised
(scale-down 0, scale-up still 600) pod-hours came to 13.9 and delays did not move, and the delay advice never named
the scale-up window that caused them.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from tests.simulation.runs import REPO, SIMULATE

DOWN: Final = "behavior.scaleDown.stabilizationWindowSeconds"
UP: Final = "behavior.scaleUp.stabilizationWindowSeconds"
RUN: Final = ["--policies", "mean-hpa,skew-aware", "--min-replicas", "1", "--max-replicas", "10", "--no-plot",
              "--quiet"]


def waves(folder: Path) -> Path:
    """Four hours of a load that jumps tenfold for 15 minutes each hour (10 busy models) over 10 quiet ones."""
    rows = ["timestamp_s,model,requests"]
    for minute in range(240):
        busy = minute % 60 < 15
        rows += [f"{minute * 60},m{m:02d},{(600 if busy else 60) if m < 10 else 30}" for m in range(20)]
    trace = folder / "waves.csv"
    trace.write_text("\n".join(rows) + "\n")
    return trace


def shipped_hpa_with(folder: Path, name: str, up_s: int, down_s: int) -> Path:
    """manifests/examples/hpa-triton.yaml with its windows set, as a user edits the HPA they run."""
    hpa = yaml.safe_load((REPO / "manifests" / "examples" / "hpa-triton.yaml").read_text())
    hpa["spec"]["behavior"]["scaleUp"]["stabilizationWindowSeconds"] = up_s
    hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] = down_s
    path = folder / name
    path.write_text(yaml.safe_dump(hpa))
    return path


def simulate_in(folder: Path, *flags: str | Path) -> dict[str, Any]:
    result = subprocess.run([*SIMULATE, *map(str, flags)], capture_output=True, text=True, timeout=300, cwd=folder)
    assert result.returncode == 0, result.stderr
    out = flags[list(flags).index("--out") + 1]
    report: dict[str, Any] = json.loads((folder / out / "report.json").read_text())
    return report


def advised(report: dict[str, Any], part: str, setting: str) -> dict[str, Any]:
    [entry] = [e for e in report["advice"] if e["part"] == part]
    named = [s for s in entry["settings"] + entry.get("not_moved", []) if s["setting"] == setting]
    assert len(named) == 1, entry
    found: dict[str, Any] = named[0]
    return found


@pytest.fixture(scope="module")
def first(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    """The reviewer's run: the shipped HPA with both windows at 600 s, the folder, the trace and the report."""
    folder = tmp_path_factory.mktemp("windows")
    trace = waves(folder)
    shipped_hpa_with(folder, "hpa600.yaml", 600, 600)
    return folder, trace, simulate_in(folder, "--trace", trace, "--out", "out", "--hpa-behavior", "hpa600.yaml", *RUN)


def test_the_scale_down_window_is_measured_and_replayed_with_the_rest_of_the_users_behavior(
        first: tuple[Path, Path, dict[str, Any]]) -> None:
    folder, trace, report = first
    setting = advised(report, "pod_hours", DOWN)
    assert (setting["now"], setting["try"]) == (600, 0)
    # The user's file with that one field changed, run as the user runs it
    shipped_hpa_with(folder, "up600-down0.yaml", 600, 0)
    edited = simulate_in(folder, "--trace", trace, "--out", "edited", "--hpa-behavior", "up600-down0.yaml",
                         "--advice", "off", *RUN)["policies"]["skew-aware"]
    assert setting["measured"]["after"] == edited["pod_hours"]
    delays = setting["measured"]["parts"]["delayed"]["after"]["figure"]
    assert delays == edited["delayed_requests"]
    # Its command, pasted into a shell, runs the same change: skew-aware's figures and behavior are the edited run's
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run(["bash", "-c", setting["command"]], capture_output=True, text=True, timeout=300,
                            cwd=folder, env=env)
    assert result.returncode == 0, result.stderr
    words = shlex.split(setting["command"].split(" && ")[-1])
    followed = json.loads((folder / words[words.index("--out") + 1] / "report.json").read_text())
    skew_aware = followed["policies"]["skew-aware"]
    assert (skew_aware["pod_hours"], skew_aware["delayed_requests"]) == (edited["pod_hours"],
                                                                           edited["delayed_requests"])
    assert skew_aware["description"] == edited["description"]
    assert "scaleUp: window 600s" in skew_aware["description"]


def test_delays_the_scale_up_window_causes_are_advised_as_that_window(first: tuple[Path, Path, dict[str, Any]]) -> None:
    folder, trace, report = first
    [entry] = [e for e in report["advice"] if e["part"] == "delayed"]
    assert [s["setting"] for s in entry["settings"]][:1] == [UP], entry
    setting = entry["settings"][0]
    assert (setting["now"], setting["try"]) == (600, 0)
    shipped_hpa_with(folder, "up0-down600.yaml", 0, 600)
    edited = simulate_in(folder, "--trace", trace, "--out", "edited-up", "--hpa-behavior", "up0-down600.yaml",
                         "--advice", "off", *RUN)["policies"]["skew-aware"]
    assert setting["measured"]["after"] == edited["delayed_requests"]
    printed = (folder / "out" / "report.md").read_text()
    assert f"lower {UP} (--hpa-behavior) 600 -> 0: delays" in printed
