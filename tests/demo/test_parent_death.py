"""The demo's children start through `parent_death`, which asks for SIGTERM when the demo ends, then becomes the
command: the command must start as it would have without it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from autoscaler.demo.parent_death import dying_with_this_process


def test_a_command_started_through_it_gets_default_sigpipe_and_sigxfsz() -> None:
    """Python ignores SIGPIPE and SIGXFSZ and an ignored signal stays ignored across exec: a reviewer found the
    demo's children started with both ignored (SigIgn 0000000001001000), where Popen starts a command with them
    at their defaults (`yes | head` then said "yes: standard output: Broken pipe")."""
    command = dying_with_this_process(["/bin/grep", "SigIgn", "/proc/self/status"])
    done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=True)
    ignored = int(done.stdout.split()[1], 16)
    for default in (signal.SIGPIPE, signal.SIGXFSZ):
        assert not ignored >> (default - 1) & 1, (default.name, done.stdout)


def test_the_command_keeps_its_exit_status_and_output() -> None:
    command = dying_with_this_process(["/bin/sh", "-c", "echo out; echo err >&2; exit 7"])
    done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (7, "out\n", "err\n")
    assert command[:3] == [sys.executable, "-m", "autoscaler.demo.parent_death"] and command[3] == str(os.getpid())
