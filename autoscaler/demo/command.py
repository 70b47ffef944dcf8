"""`modelmesh-autoscaler demo` as a command: its flags checked together, the working directory it makes and
removes, and the signals that stop it and every process it started."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Final

from autoscaler.demo.fleet import PROCESS_STOP_S
from autoscaler.demo.orphans import adopt_orphans, spare
from autoscaler.demo.run import Demo, DemoError
from autoscaler.demo.workdir_janitor import Janitor
from autoscaler.simulation.simulate_out import closed_pipe

STOPPING_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


async def _run_until_signalled(demo: Demo) -> int:
    """Run the demo; Ctrl-C, SIGTERM or SIGHUP (even where the shell set SIGINT to be ignored, as it does for
    background jobs; SIGHUP: a terminal closed, an SSH session dropped) cancels it, and cancelling stops every
    process it started."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()

    def stop() -> None:
        # Only the first signal cancels: a second Ctrl-C while the processes are being stopped would cancel
        # the stopping itself and leave them running.
        if not task.cancelling():
            task.cancel()

    for signum in STOPPING_SIGNALS:
        loop.add_signal_handler(signum, stop)
    try:
        await demo.run()
    except asyncio.CancelledError:
        with contextlib.suppress(OSError):  # a terminal hung up: nowhere to say it
            print("\ninterrupted: every process stopped.")
        return 130
    except BrokenPipeError:
        # A reader that stopped early (`demo | head`, `less` left with `q`): the processes are stopped by now (the
        # error left `DemoFleet.running`), and the demo ends as `simulate` does then: no word, status 141, its
        # directory removed (not kept as for a failure: nothing failed).
        return closed_pipe()
    except DemoError as error:
        print(f"demo: {error}; every process stopped; their log is kept in {demo.workdir}/processes.log",
              file=sys.stderr)
        return 1
    finally:
        for signum in STOPPING_SIGNALS:
            loop.remove_signal_handler(signum)
    return 0


def run_demo(args: argparse.Namespace) -> int:
    if args.max_pods is not None and args.max_pods < args.pods:  # each alone is checked by its flag's type
        print(f"modelmesh-autoscaler demo: error: --max-pods ({args.max_pods}) must be at least --pods "
              f"({args.pods}): the HPA's maxReplicas cannot be below the replicas the demo starts with",
              file=sys.stderr)
        return 2
    # From here Ctrl-C is the demo's: KeyboardInterrupt removes the directory, then the loop's handler stops
    # what it started (`autoscaler.cli` ended the start at once until now).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # The adapter's own processes (its worker, multiprocessing's resource tracker) outlive it by a moment, or for
    # good where it is killed: handed to this process, they are stopped with the rest (`fleet.DemoFleet.running`).
    adopt_orphans()
    # The directory goes when the demo ends or is interrupted, but not when it failed: the first line pointed the
    # user to its log, and that log holds the reason.
    directory = Path(tempfile.mkdtemp(prefix="modelmesh-demo-"))
    failed, janitor = True, None
    try:
        # Killed with SIGKILL, the demo removes nothing: the janitor does, once the processes the demo told it of
        # have ended on their parent-death signal (`parent_death`); a little past their own stop time, as the demo
        # gives them.
        janitor = Janitor(directory, PROCESS_STOP_S + 5)
        spare(janitor.pid)
        demo = Demo(args.pods, args.duration, args.interval, directory, args.max_pods, args.start_timeout)
        demo.fleet.on_start = janitor.watch
        code = asyncio.run(_run_until_signalled(demo))
        failed = code == 1
        return code
    except KeyboardInterrupt:
        failed = False
        raise
    finally:
        if not failed:
            shutil.rmtree(directory, ignore_errors=True)
        if janitor is not None:
            janitor.release()
