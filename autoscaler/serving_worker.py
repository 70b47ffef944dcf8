"""A serving worker process of `--workers N`: it answers the API from the snapshots the refresh process sends
(`autoscaler.workers`, `worker_pool.WorkerPool`) and stops when that process goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from multiprocessing.connection import Connection
from pathlib import Path

from autoscaler.api import packed
from autoscaler.api.app import build_served_app
from autoscaler.api.certs import server_context
from autoscaler.api.snapshot import SnapshotHolder
from autoscaler.api.stall import STALL_KEY
from autoscaler.kube.review_connection import ReviewConnection
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.serve_loop import connection_limits, log, serve_until_stopped
from autoscaler.settings import ServeSettings
from autoscaler.skipped_snapshots import SkippedSnapshots
from exporter.listen import show
from exporter.stack_dumps import StackDumps

READY, FAILED, TAKEN, SKIPPED = b"ready", b"error:", b"taken", b"skipped"
"""What a worker says down its pipe: it listens; it could not start (its one line follows); it took a snapshot; it
had no file descriptor for one (`autoscaler.skipped_snapshots`)."""
HELD_FROM_THE_WORKER = frozenset({signal.SIGINT, signal.SIGQUIT})
"""Blocked while a worker starts, until `worker_main` takes them over
(`worker_pool._interrupts_held_from_the_worker`)."""


def worker_main(settings: ServeSettings, cert_file: Path, key_file: Path, pipe: Connection, index: int,
                connection: ReviewConnection | None = None) -> None:
    """Entry point of a serving worker process (spawned: nothing inherited but these arguments, and SIGINT and
    SIGQUIT blocked: `_interrupts_held_from_the_worker`); SIGINT is ignored until its event loop handles it, a
    SIGQUIT that came meanwhile (passed on by the refresh process) writes the stacks once taken over here.
    `connection`: what its reviews need of the Kubernetes API, loaded by the refresh process, so that the worker
    never imports the Kubernetes library (`autoscaler.kube.review_connection`); None with `--insecure-dev`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C pending since the start is dropped
    logging.basicConfig(level=settings.log_level,
                        format=f"%(asctime)s %(levelname)s %(name)s[worker {index}]: %(message)s")
    StackDumps(f"serving worker {index}").install()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD_FROM_THE_WORKER)
    try:
        code = asyncio.run(_worker(settings, cert_file, key_file, pipe, connection))
    except KeyboardInterrupt:
        code = 0
    sys.exit(code)


async def _worker(settings: ServeSettings, cert_file: Path, key_file: Path, pipe: Connection,
                  connection: ReviewConnection | None) -> int:
    """Serve until the refresh process closes the pipe (or a Ctrl-C); the exit code.

    SIGTERM does not stop a worker: the refresh process speaks for the pod. Sent to the whole process group
    (systemd's default KillMode, `kill -TERM -PGID`), it reached the workers too, and they closed the port at
    once while the refresh process said it kept serving for `--shutdown-delay`. Noted here, it only makes the
    end of the pipe that follows a stop asked for, not a refresh process that has gone."""
    asked_to_stop: list[signal.Signals] = []
    for signum in (signal.SIGTERM, signal.SIGHUP):  # SIGHUP: a terminal that closed sends the group one
        asyncio.get_running_loop().add_signal_handler(signum, asked_to_stop.append, signum)
    metrics = AdapterMetrics()
    holder = SnapshotHolder()
    try:
        tls = server_context(cert_file, key_file)
        app = await build_served_app(holder, metrics, settings, tls, connection)
    except (OSError, ValueError) as error:
        pipe.send_bytes(FAILED + str(error).encode())
        return 2
    skips = SkippedSnapshots(show(settings.bound_host, settings.listen_port), app.get(STALL_KEY))
    receiving = asyncio.create_task(_receive_snapshots(pipe, holder, skips), name="receive-snapshots")

    def ready() -> None:
        with contextlib.suppress(BrokenPipeError):  # the refresh process has gone: `receiving` ends at once
            pipe.send_bytes(READY)

    try:
        signalled = await serve_until_stopped(
            app, settings.bound_host, settings.listen_port, tls, connection_limits(settings), reuse_port=True,
            on_ready=ready, until=receiving, stop_signals=(signal.SIGINT,))
    except OSError as error:
        with contextlib.suppress(BrokenPipeError):
            pipe.send_bytes(FAILED + f"cannot listen on {settings.bound_host}:{settings.listen_port}: "
                                     f"{error}".encode())
        return 2
    if not signalled and not asked_to_stop:
        if receiving.done() and not receiving.cancelled() and not receiving.result():
            return 1  # it could not take a snapshot, and said why
        log.error("the refresh process has gone; stopping so that Kubernetes restarts the pod")
        return 1
    return 0


async def _receive_snapshots(pipe: Connection, holder: SnapshotHolder, skips: SkippedSnapshots) -> bool:
    """Swap in each snapshot as it arrives; True when the refresh process has gone (the pipe's end), False when
    a snapshot could not be taken (logged here: the call that failed and what to check). One this process had no
    file descriptor for is skipped, the values it has kept (`skips` says so).

    The refresh process passes each snapshot as a shared-memory file descriptor (`autoscaler.api.packed`);
    a thread receives and maps it, and requests read it in place, so the event loop only makes the
    assignment, and the previous snapshot goes with one unmapping. Any failure but the pipe's end was once
    taken for it: under libfaketime `mmap` fails with EINVAL, and every worker said the live refresh process
    had gone."""
    while True:
        try:
            snapshot = await asyncio.to_thread(packed.receive, pipe)
        except packed.PIPE_ENDED:
            return True
        except packed.SnapshotSkipped as skipped:
            skips.skipped(skipped.error)
            _acknowledge(pipe, SKIPPED)
            continue
        except packed.SnapshotNotTaken as failure:
            log.error("cannot take the snapshots the refresh process sends (it is running): %s. Check what changes "
                      "this process's system calls or memory: a library preloaded with LD_PRELOAD (libfaketime "
                      "breaks mmap), the container's memory limit, ulimit -n and the node's vm.max_map_count; "
                      "stopping so that Kubernetes restarts the pod", failure)
            return False
        holder.current = snapshot
        skips.taken()
        _acknowledge(pipe, TAKEN)


def _acknowledge(pipe: Connection, said: bytes) -> None:
    """Say a snapshot is dealt with, from the event loop: a loop that is stuck says no more (`first_hung`)."""
    with contextlib.suppress(OSError):  # the refresh process has gone: the next receive ends the loop
        pipe.send_bytes(said)
