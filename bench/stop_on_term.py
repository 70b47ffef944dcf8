"""Stopping a benchmark with SIGTERM cleans up as Ctrl-C does.

`timeout 600 python bench/bench_fleet.py`, a cancelled CI job and a plain `kill` send SIGTERM, whose default
ends Python at once: no `finally` runs, so the adapter, fake fleet and bare server a benchmark started stay
behind, holding their ports and a core and skewing the next run (a killed fleet run left its adapter serving
and refreshing 2,000 pods). Exiting through `SystemExit` instead runs the same clean-up a Ctrl-C does.

Only in the process that installed the handler: a multiprocessing worker forked afterwards inherits it, and
its pool stops it with SIGTERM, which must still just end it. A benchmark that re-runs its own script as a
helper (`bench_exporter.py --serve ...`, `bench_request_cost.py --serve-bare ...`) ends that helper with SIGTERM
when done with it: the helper unwinds too, but quietly, or every normal run would say it had been stopped.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from types import FrameType

STARTED_BY = "MM_BENCH_STARTED_BY"
"""Set by the outermost benchmark for the processes below it: a helper that finds it set was started by one."""


def run(main: Callable[[], None]) -> None:
    """Run a benchmark's `main` so that SIGTERM unwinds it (every `finally` runs) and exits 128 + 15."""
    owner = os.getpid()
    helper = STARTED_BY in os.environ  # its SIGTERM is the benchmark's way of ending it, not a user's stop
    os.environ.setdefault(STARTED_BY, str(owner))

    def stop(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != owner:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        signal.signal(signum, signal.SIG_IGN)  # a second SIGTERM must not cut the clean-up short
        if not helper:
            print(f"{os.path.basename(sys.argv[0])}: stopped by SIGTERM; stopping the processes it started",
                  file=sys.stderr)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    main()
