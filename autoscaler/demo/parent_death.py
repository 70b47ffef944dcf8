"""The processes the demo starts end with it, even where it is killed with SIGKILL.

A signal the demo can handle (Ctrl-C, SIGTERM, SIGHUP) stops what it started (`fleet.DemoFleet.running`), but
SIGKILL (the OOM killer, a `kill -9`) ends it at once: its exporters and its adapter (with the adapter's serving
worker and multiprocessing's resource tracker) were handed to init and ran for good, holding their ports and
scraping fake pods that no longer existed. On Linux each child the demo starts asks the kernel, first thing, for
SIGTERM when its parent ends (`prctl(PR_SET_PDEATHSIG)`): an exporter stops as on any SIGTERM, and the adapter stops
its worker and its resource tracker ends after it. Elsewhere nothing changes.

The request is made by this module run as the child's command (`dying_with_this_process`), which then replaces
itself with the real one (`exec`, which keeps the request, the process id and its start time), rather than by a
`preexec_fn`: the demo has threads, and Python warns that code run between fork and exec in a process with threads
can deadlock. The kernel sends the signal when the THREAD that forked the child ends, not the process: the demo
starts every process from its main thread (its event loop's), which lives as long as the demo.

It imports nothing but the standard library: it runs before each of the demo's processes.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def dying_with_this_process(command: list[str]) -> list[str]:
    """`command`, run so that it is sent SIGTERM when this process ends (Linux); `command` itself elsewhere."""
    if not sys.platform.startswith("linux"):
        return command
    return [sys.executable, "-m", __name__, str(os.getpid()), *command]


def main(argv: list[str]) -> int:
    """`python -m autoscaler.demo.parent_death PARENT_PID COMMAND...`: ask for SIGTERM when the parent ends, then
    become COMMAND. A parent killed before the request left this with a parent that never ends (init, or the
    nearest subreaper): no SIGTERM would come, so it ends at once (status 1) rather than run for good."""
    parent, command = int(argv[0]), argv[1:]
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
        asked = prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) == 0
    except (OSError, AttributeError):
        asked = False  # no such call here: the command runs as it would without this
    if asked and os.getppid() != parent:
        return 1
    # Python ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across exec: put them back as
    # `subprocess.Popen(restore_signals=True)` gives them to a command started directly (a reviewer).
    for restored in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(restored, signal.SIG_DFL)
    os.execv(command[0], command)
    return 1  # not reached: execv returns only by raising


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
