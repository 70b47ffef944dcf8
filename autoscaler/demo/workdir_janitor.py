"""Removes the demo's directory when the demo is killed with SIGKILL, once the processes it started have ended.

The demo removes its directory itself when it ends (and keeps it, for its log, when it fails), but SIGKILL (a CI
job's timeout, the OOM killer) ends it before it can: the directory, with the fake ModelMesh's private key, was
left in /tmp. A small process started beside it waits on a pipe that only the demo holds. The demo tells it down
that pipe each process it starts (its id and start time, `Janitor.watch`), and says `ENDED` when it has dealt with
the directory itself. End of file without that word means the demo was killed: the janitor waits for the processes
it was told of (stopping on their parent-death SIGTERM, `parent_death`) to end, kills those that have not after
`stop_s` (as the demo itself kills a process that does not stop in time), and removes the directory.

- It runs in a session of its own: a SIGKILL sent to the demo's whole process group (GNU `timeout -s KILL`, a CI
  runner's) killed it with the rest, and left the directory.
- It signals only the processes the demo told it of, and only while their start time is the one it was told: a
  `tail -f` of the demo's log started in the same script (one process group, no job control), which names the
  directory as the demo's processes do, was SIGKILLed; a process id reused since is never hit.
- Without /proc (macOS) it cannot tell a process from a later one with its id: it signals none, and removes the
  directory only once each id it was told of has gone (where the demo's group was killed, at once).
- The processes' temporary files (the adapter's self-signed certificate) are made inside the directory, as they
  get it as TMPDIR (`fleet.child_environment`): they go with it.

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
UNKNOWN = "-"
"""The start time the demo sends where it has none (no /proc)."""
PROC = Path("/proc")


def start_time(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot, /proc/PID/stat's 22nd field), or None where there is no
    such process, it has ended (a zombie, not yet reaped by init, holds nothing), or no /proc."""
    try:
        stat = (PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    fields = stat.rsplit(b")", 1)[-1].split()  # the name, in parentheses, may hold spaces and ')'
    if len(fields) < 20 or fields[0] == b"Z":
        return None
    return fields[19].decode()


class Janitor:
    """The janitor of the demo's directory, as the demo sees it: `watch` each process it starts, `release` it when
    the demo ends on its own."""

    def __init__(self, directory: Path, stop_s: float) -> None:
        """`stop_s`: how long the demo's processes get to stop before the janitor kills them. Its pipe is this
        process's alone (Python's descriptors are not inherited), so that its end of file means that this process
        has gone; its own session keeps it out of a signal sent to this process's group."""
        self.process = subprocess.Popen([sys.executable, "-m", __name__, str(directory), str(stop_s)],
                                        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)

    @property
    def pid(self) -> int:
        return self.process.pid

    def watch(self, pid: int) -> None:
        """The demo started process `pid`: the janitor waits for it, and kills it if it does not stop in time."""
        self._say(f"{pid} {start_time(pid) or UNKNOWN}\n".encode())

    def release(self) -> None:
        """The demo has dealt with its directory: the janitor ends without touching it (waited for, so that the
        demo leaves no process behind)."""
        self._say(ENDED)
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)

    def _say(self, line: bytes) -> None:
        assert self.process.stdin is not None
        with contextlib.suppress(OSError):  # a janitor that has gone: the demo runs on without one
            self.process.stdin.write(line)
            self.process.stdin.flush()


def running(pid: int, started: str) -> bool:
    """Whether the process the demo started as `pid` at `started` still runs: not one given its id since."""
    if started != UNKNOWN:
        return start_time(pid) == started
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # there, but not ours to signal
    return True


def clean_up(directory: Path, watched: dict[int, str], stop_s: float) -> None:
    """Wait for the demo's processes to end, at most `stop_s`, kill those left that can be told apart from a
    later process with their id, and remove `directory` unless some of them may still use it."""
    deadline = time.monotonic() + stop_s
    while (left := [pid for pid, started in watched.items() if running(pid, started)]) \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in left:
        if watched[pid] != UNKNOWN and running(pid, watched[pid]):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    if any(watched[pid] == UNKNOWN for pid in left):
        return  # it may run on in the directory: that stays, as it did before the janitor
    shutil.rmtree(directory, ignore_errors=True)


def main(argv: list[str]) -> int:
    """`python -m autoscaler.demo.workdir_janitor DIRECTORY STOP_S`, started by the demo (`Janitor`); one line
    `PID START_TIME` a process, then `ended` or end of file."""
    directory, stop_s = Path(argv[0]), float(argv[1])
    watched: dict[int, str] = {}
    for line in sys.stdin.buffer:
        if line == ENDED:
            return 0
        with contextlib.suppress(ValueError):
            pid, started = line.decode().split()
            watched[int(pid)] = started
    clean_up(directory, watched, stop_s)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
