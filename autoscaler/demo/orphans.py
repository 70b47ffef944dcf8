"""The processes the demo's processes start (the adapter's serving worker and multiprocessing's resource tracker),
which outlive them by a moment, or for good where one is killed.

Waiting for the adapter alone was not enough: its resource tracker ends only once the adapter has ended (when the
last holder of its pipe closes it), and a worker the adapter could not stop in time was left when the demo killed
it. The demo ended first, and a Ctrl-C left processes in the terminal's group. On Linux the demo becomes their
"subreaper": a process orphaned below it is handed to it rather than to init, so it can wait for each, and stop
it, before it says "every process stopped". Elsewhere nothing is adopted, and nothing changes.

The demo itself killed with SIGKILL stops nothing: there the processes it started end on their own, told by the
kernel (`parent_death`), and its directory is removed by a process left for that (`workdir_janitor`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
_adopting = False
_spared: set[int] = set()


def spare(pid: int) -> None:
    """Leave the child `pid` to its own end: `stop_adopted` stops every other child. The demo's directory janitor
    (`workdir_janitor`), which the demo releases after its processes have stopped."""
    _spared.add(pid)


def adopt_orphans() -> bool:
    """Have the processes orphaned below this one handed to it (Linux); whether they will be. Only the demo's own
    process calls it (`command.run_demo`), where every child is the demo's: `stop_adopted` stops them all."""
    global _adopting
    if sys.platform.startswith("linux") and not _adopting:
        with contextlib.suppress(OSError, AttributeError):
            _adopting = ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    return _adopting


def children(parent: int | None = None) -> list[int]:
    """The children of `parent` (this process by default), from /proc (each process's parent is the field after
    its name)."""
    own, found = os.getpid() if parent is None else parent, []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == own:
                found.append(int(entry.name))
    return found


def stop_adopted(timeout: float = 5.0) -> None:
    """Once every process the demo started has been waited for, wait for the children it has left: those it
    adopted. SIGTERM to each first (a resource tracker ignores it, and ends by itself as its pipe closes); whatever
    is left after `timeout` is killed. Each is reaped, so none is left even as a zombie. Nothing where this process
    adopts nothing (`adopt_orphans`): another program's children (a test's) are not the demo's to stop."""
    if not _adopting:
        return
    signalled: set[int] = set()
    deadline = time.monotonic() + timeout
    # again each time: one that ends hands its own children on to this process
    while left := [pid for pid in children() if pid not in _spared]:
        late = time.monotonic() >= deadline
        for pid in left:
            if late or pid not in signalled:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL if late else signal.SIGTERM)
                signalled.add(pid)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0 if late else os.WNOHANG)
        time.sleep(0.05)
