"""The advice's compare command pasted into a fresh shell, whose PATH has no virtual environment on it: it said
`modelmesh-autoscaler simulate ...`, and bash answered "modelmesh-autoscaler: command not found" unless the venv
the first run came from was activated there too."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from autoscaler.cli import PROG
from tests.simulation.runs import SIMULATE

FRESH_PATH = "/usr/local/bin:/usr/bin:/bin"
"""A login shell's PATH: no venv's bin on it."""


def compare_line(stdout: str) -> str:
    """The first compare command the printed advice gives."""
    return next(line.split(": ", 1)[1] for line in stdout.splitlines() if line.lstrip().startswith("compare"))


@pytest.mark.parametrize("started", ["script", "module"])
def test_the_compare_command_runs_pasted_into_a_shell_without_the_venv(tmp_path: Path, started: str) -> None:
    """Started as the venv's `modelmesh-autoscaler` (or `python -m autoscaler.cli`), the command it prints runs
    from another folder in a shell with only the system's PATH, and writes the report it names."""
    first = [str(Path(sys.executable).parent / PROG), "simulate"] if started == "script" else SIMULATE
    result = subprocess.run([*first, "--synthetic", "--models", "50", "--hours", "1", "--out", "out", "--no-plot",
                             "--quiet"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    command = compare_line(result.stdout)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    pasted = subprocess.run(["bash", "--noprofile", "--norc", "-c", command], capture_output=True, text=True,
                            timeout=120, cwd=elsewhere, env={"PATH": FRESH_PATH, "HOME": str(tmp_path)})
    assert pasted.returncode == 0, (command, pasted.stderr)
    words = shlex.split(command.split(" && ")[-1])
    written = json.loads((Path(words[words.index("--out") + 1]) / "report.json").read_text())
    assert set(written["policies"]) == {"mean-hpa", "skew-aware"}
