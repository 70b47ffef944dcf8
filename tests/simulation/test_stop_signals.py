"""Stopping `simulate` part way: one line, the signal's status, and no empty `--out` directory left behind.

A run stopped by SIGTERM (`timeout 60 modelmesh-autoscaler simulate ...`, a CI job cancelled, a pod deleted)
ended with status 143 and no word, and left the `--out` directory it had made, empty, where a script then found
no report; Ctrl-C left it too. A directory the user made, or one holding files, is theirs and stays.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SIMULATE = [sys.executable, "-m", "autoscaler.cli", "simulate"]
LONG_RUN = ["--synthetic", "--models", "200", "--hours", "24", "--no-plot"]


def stop_while_simulating(out: Path, signum: int) -> subprocess.CompletedProcess[str]:
    """Start a run of several policies, send `signum` once the first has finished (its bar, on stderr, at 100%:
    the run is simulating the next), and wait for the end."""
    process = subprocess.Popen([*SIMULATE, *LONG_RUN, "--out", str(out)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if "100%" in line:
            break
    assert process.poll() is None, "".join(seen)
    os.kill(process.pid, signum)
    stdout, stderr = process.communicate(timeout=60)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, "".join(seen) + stderr)


@pytest.mark.parametrize(("signum", "status", "line"), [(signal.SIGTERM, 143, "terminated."),
                                                         (signal.SIGINT, 130, "interrupted.")])
def test_a_stopped_run_says_so_and_leaves_no_empty_directory(tmp_path: Path, signum: int, status: int,
                                                            line: str) -> None:
    out = tmp_path / "report"
    run = stop_while_simulating(out, signum)
    assert run.returncode == status, run.stderr
    assert run.stderr.strip().splitlines()[-1] == line, run.stderr
    assert "Traceback" not in run.stderr
    assert not out.exists(), list(out.iterdir())


def test_a_directory_the_user_made_stays_even_empty(tmp_path: Path) -> None:
    out = tmp_path / "report"
    out.mkdir()
    run = stop_while_simulating(out, signal.SIGTERM)
    assert run.returncode == 143, run.stderr
    assert out.is_dir() and not list(out.iterdir())
