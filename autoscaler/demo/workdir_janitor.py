"""Removes the demo's directory when the demo is killed with SIGKILL, once the processes it started have ended.

The demo removes its directory itself when it ends (and keeps it, for its log, when it fails), but SIGKILL (a CI
job's timeout, the OOM killer) ends it before it can: the directory, with the fake ModelMesh's private key, was
left in /tmp. A small process started beside it waits on a pipe that only the demo holds; the demo says `ENDED`
down it when it has dealt with the directory itself. End of file without that word means the demo was killed: the
janitor waits for the processes still naming the directory in their command line (the exporters and the adapter,
stopping on their parent-death SIGTERM, `parent_death`) to end, kills those of its process group that have not after
`stop_s` (as the demo itself kills a process that does not stop in time), and removes the directory.

It imports nothing but the standard library: it starts beside every demo, and is the one process that outlives
it, by a second or two.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ENDED = b"ended\n"
"""What the demo says down the pipe once it removed (or kept) its directory itself."""


def start_janitor(directory: Path, stop_s: float) -> subprocess.Popen[bytes]:
    """The janitor of `directory`; `release` it when the demo ends on its own. `stop_s`: how long the demo's
    processes get to stop before the janitor kills them. Its pipe is this process's alone (Python's descriptors are
    not inherited), so that its end of file means that this process has gone."""
    return subprocess.Popen([sys.executable, "-m", __name__, str(directory), str(stop_s)], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def release(janitor: subprocess.Popen[bytes]) -> None:
    """The demo has dealt with its directory: the janitor ends without touching it (waited for, so that the demo
    leaves no process behind)."""
    assert janitor.stdin is not None
    with contextlib.suppress(OSError):  # a janitor that has gone (a Ctrl-C while it started, before it ignores one)
        janitor.stdin.write(ENDED)
        janitor.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        janitor.wait(timeout=5)


def users(directory: Path) -> list[int]:
    """The processes of this process group whose command line names `directory`: those the demo started (an
    editor or a `tail -f` of its log in another terminal is in another group, and is left alone)."""
    own, group, named, found = os.getpid(), os.getpgrp(), os.fsencode(directory), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == own:
            continue
        with contextlib.suppress(OSError, ValueError):
            if os.getpgid(int(entry.name)) == group and named in (entry / "cmdline").read_bytes():
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":  # ended, not yet reaped by init: it holds nothing
                    found.append(int(entry.name))
    return found


def clean_up(directory: Path, stop_s: float) -> None:
    """Wait for the demo's processes to end, at most `stop_s`, kill those left, and remove `directory`."""
    deadline = time.monotonic() + stop_s
    while (left := users(directory)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    shutil.rmtree(directory, ignore_errors=True)


def main(argv: list[str]) -> int:
    """`python -m autoscaler.demo.workdir_janitor DIRECTORY STOP_S`, started by the demo (`start_janitor`)."""
    # A terminal's Ctrl-C and hang-up reach the whole group: they are the demo's to handle, and it releases this.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    directory, stop_s = Path(argv[0]), float(argv[1])
    if sys.stdin.buffer.read() != ENDED:
        clean_up(directory, stop_s)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
