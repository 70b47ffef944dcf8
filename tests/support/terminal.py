"""A command as a person runs it in a terminal, and Ctrl-C pressed at a chosen moment of its start-up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def start_in_a_terminal(command: Sequence[str], env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
    """The command as a shell starts a foreground job: its own process group, which Ctrl-C signals as a
    whole, with SIGINT at its default (a non-interactive shell's background job would have it ignored). `env`:
    variables set in that shell (TMPDIR)."""
    return subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def seconds_to(command: Sequence[str], line: str) -> float:
    """How long the command takes on this machine, now, to print a line containing `line`."""
    process = start_in_a_terminal(command)
    assert process.stdout is not None
    started = time.monotonic()
    for text in process.stdout:
        if line in text:
            break
    took = time.monotonic() - started
    os.killpg(process.pid, signal.SIGTERM)
    process.communicate(timeout=30)
    return took


@dataclass(frozen=True)
class Interrupted:
    returncode: int
    output: str
    left: list[str]
    """Processes of its group still there after it exited: pid, state and command line of each."""

    @property
    def ended_by_ctrl_c(self) -> bool:
        """Status 130, or killed by SIGINT, which a shell reports as 130 too: Python 3.11 ends that way even
        when the program handled the KeyboardInterrupt, if it was raised inside `exec` of a string (as
        dataclasses and namedtuple run while their module is imported)."""
        return self.returncode in (130, -2)


def ctrl_c_after(command: Sequence[str], seconds: float) -> Interrupted:
    process = start_in_a_terminal(command)
    time.sleep(seconds)
    return _ctrl_c(process)


def ctrl_c_once(command: Sequence[str], started: Callable[[int], bool], timeout: float = 60) -> Interrupted:
    """Ctrl-C as soon as `started(process group)` holds (polled): a moment of the start-up reached through what
    can be seen of it, rather than a time that a loaded machine moves."""
    process = start_in_a_terminal(command)
    deadline = time.monotonic() + timeout
    while not started(process.pid):
        assert process.poll() is None, f"it ended before the moment came: {process.communicate()[0]}"
        assert time.monotonic() < deadline, f"the moment did not come within {timeout:g} s"
        time.sleep(0.05)
    return _ctrl_c(process)


def _ctrl_c(process: subprocess.Popen[str]) -> Interrupted:
    os.killpg(process.pid, signal.SIGINT)
    output, _ = process.communicate(timeout=60)
    pids = subprocess.run(["pgrep", "-g", str(process.pid)], capture_output=True, text=True).stdout.split()
    # Each with its state and command line: a pid alone (a CI run: ['30720']) does not say which process stayed.
    described = subprocess.run(["ps", "-o", "pid=,stat=,args=", "-p", ",".join(pids)], capture_output=True,
                               text=True).stdout.splitlines() if pids else []
    # A zombie (state Z) has ended: its entry waits for its new parent, init, to reap it, moments after the demo's own
    # exit (a loaded CI run: '11546 Z [python] <defunct>', gone a moment later). Only processes still alive are left.
    alive = [line.strip() for line in described if line.split()[1:2] and not line.split()[1].startswith("Z")]
    left = alive if described else pids  # (gone between the two: still said)
    return Interrupted(process.returncode, output, left)


def moment_of_start_up(command: Sequence[str], line: str, share: float) -> float:
    """Seconds after its start at which `share` of the command's own start-up (after the interpreter's, which
    no code of ours can handle a Ctrl-C in, until it prints `line`) has passed, measured now on this machine
    so that a loaded machine moves the moment with it."""
    return moments_of_start_up(command, line)(share)


def moments_of_start_up(command: Sequence[str], line: str) -> Callable[[float], float]:
    """`moment_of_start_up` of each share, from one measure taken now: for tests that press Ctrl-C at several
    shares in a row, where a start-up measured for each (the demo's starts its whole fleet) cost as much as the
    run it timed."""
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", ""], check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    interpreter = 2 * (time.monotonic() - started)
    start_up = max(0.0, seconds_to(command, line) - interpreter)
    return lambda share: interpreter + share * start_up
