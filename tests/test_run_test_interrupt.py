"""Ctrl-C on `./run test` ends it: the type check that runs beside the tests goes with them.

`run` starts mypy in the background (`&`), and a non-interactive bash starts background jobs with SIGINT
ignored, so the terminal's Ctrl-C reached pytest alone; pytest ended ("no tests ran"), and `run` went on to wait
for mypy, which on a fresh clone checks for two minutes more (an outside review: 138 s after the Ctrl-C, then
"Success: no issues found"). The script runs here in a stand-in tree, under a real pseudo-terminal, with
stand-ins for the tools: a mypy that would check for ten minutes and a pytest that waits for its Ctrl-C."""

from __future__ import annotations

import contextlib
import hashlib
import os
import pty
import select
import shutil
import signal
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

PYTEST_STAND_IN = """#!/usr/bin/env bash
# `python -m pytest ...` (the only call of python here once the stamp is there): waits for Ctrl-C, as pytest
# does when it is interrupted, ends with pytest's status for an interrupted run.
trap 'echo "pytest: interrupted"; exit 2' INT
echo "pytest: started"
while true; do sleep 0.1; done
"""
MYPY_STAND_IN = """#!/usr/bin/env bash
echo $$ > "$(dirname "$0")/../mypy.pid"
sleep 600
echo "Success: no issues found"
"""


def stand_in_tree(root: Path) -> Path:
    """A copy of `run` and pyproject.toml with a .venv of stand-ins, stamped as installed."""
    shutil.copy(REPO / "run", root / "run")
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, text in {"python": PYTEST_STAND_IN, "mypy": MYPY_STAND_IN, "ruff": "#!/bin/sh\nexit 0\n"}.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    version = hashlib.sha256((root / "pyproject.toml").read_bytes()).hexdigest()[:16]
    (root / ".venv" / f".installed-{version}-test").touch()
    return root / ".venv" / "mypy.pid"


def read_until(fd: int, needle: bytes, deadline: float) -> bytes:
    """What the terminal shows until `needle`, the terminal closes, or `deadline` (never blocking past it)."""
    seen = b""
    while needle not in seen and time.monotonic() < deadline:
        if not select.select([fd], [], [], 0.2)[0]:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    return seen


def test_ctrl_c_on_run_test_ends_it_and_the_type_check_beside_it(tmp_path: Path) -> None:
    mypy_pid_file = stand_in_tree(tmp_path)
    pid, fd = pty.fork()
    if pid == 0:  # the child: `./run test` as a person types it, in a terminal of its own
        os.chdir(tmp_path)
        os.execv("./run", ["./run", "test"])
    try:
        said = read_until(fd, b"pytest: started", time.monotonic() + 60)
        assert b"pytest: started" in said, said.decode(errors="replace")
        while not mypy_pid_file.exists():
            time.sleep(0.05)
        mypy_pid = int(mypy_pid_file.read_text())
        os.write(fd, b"\x03")  # Ctrl-C, through the terminal: SIGINT to the foreground process group
        said += read_until(fd, b"Success: no issues found", time.monotonic() + 30)  # until the terminal closes
        ended_by = time.monotonic() + 60
        done, status = 0, 0
        while not done and time.monotonic() < ended_by:
            done, status = os.waitpid(pid, os.WNOHANG)
            time.sleep(0.05)
        assert done, f"./run test still running a minute after Ctrl-C: {said.decode(errors='replace')!r}"
        assert os.waitstatus_to_exitcode(status) != 0, said.decode(errors="replace")
        assert b"Success: no issues found" not in said, "run waited for the type check after Ctrl-C"
        try:
            os.kill(mypy_pid, 0)
            mypy_alive = True
        except ProcessLookupError:
            mypy_alive = False
        assert not mypy_alive, f"the type check (pid {mypy_pid}) was left running after Ctrl-C"
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)  # the run's session: the stand-ins too, whatever the outcome
        os.close(fd)
