"""The processes the demo starts end with it, even where it is killed with SIGKILL.

A signal the demo can handle (Ctrl-C, SIGTERM, SIGHUP) stops what it started (`fleet.DemoFleet.running`), but
SIGKILL (a CI job's timeout, the OOM killer) ends it at once: its exporters and its adapter (with the adapter's
serving worker and multiprocessing's resource tracker) were handed to init and ran for good, holding their ports and
scraping fake pods that no longer existed. On Linux each child the demo starts asks the kernel, right after the
fork, for SIGTERM when its parent ends (`prctl(PR_SET_PDEATHSIG)`): an exporter stops as on any SIGTERM, and the
adapter stops its worker and its resource tracker ends after it. Elsewhere nothing changes.

The kernel sends the signal when the THREAD that forked the child ends, not the process: the demo starts every
process from its main thread (its event loop's), which lives as long as the demo.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def dies_with_this_process() -> Callable[[], None] | None:
    """A `preexec_fn` for `subprocess.Popen` that has the child sent SIGTERM when this process ends (Linux), or
    None where it cannot be had. The C library is found here, before the fork: the child only calls it.

    A demo killed between the fork and the request would leave the child with a parent that never ends (init, or
    the nearest subreaper): the child checks that its parent is still the demo, and ends at once if not."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def request() -> None:
        with contextlib.suppress(OSError):
            if prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) == 0 and os.getppid() != parent:
                os._exit(1)  # the demo has gone already: no SIGTERM will come

    return request
