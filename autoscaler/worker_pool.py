"""The serving workers as the refresh process sees them: started, waited for, sent each snapshot, watched for
one that exits or hangs, and stopped (`WorkerPool`). The workers themselves are `serving_worker.py`'s.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path

from autoscaler.api import packed
from autoscaler.api.selfmetrics_split import MULTIPROCESS_DIRECTORY
from autoscaler.kube.review_connection import ReviewConnection
from autoscaler.serving_worker import FAILED, HELD_FROM_THE_WORKER, worker_main
from autoscaler.settings import ServeSettings

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
"""How long the workers together get to stop after SIGTERM before they are killed: one deadline for all of them,
so that with `--workers N` the pod still stops within its terminationGracePeriodSeconds (30 s in the base, which
also covers the leader's writes in flight, the Lease release and --shutdown-delay; tests/manifests/test_manifests.py
checks the sum)."""


class WorkerStartError(Exception):
    """A serving worker could not start; the message is the worker's one line."""



class WorkerPool:
    """The serving workers, their pipes, and what the refresh process sends them."""

    def __init__(self, settings: ServeSettings, cert_file: Path, key_file: Path, metrics_directory: Path | None,
                 between_starts: Callable[[], None] = lambda: None,
                 connection: ReviewConnection | None = None) -> None:
        """Starts the workers; `between_starts` runs after each (it may raise to stop them all). Several workers
        keep their request series in files under `metrics_directory` that every worker's /metrics sums
        (`selfmetrics_split`). Each gets `connection` for its reviews (`worker_main`)."""
        spawn = multiprocessing.get_context("spawn")
        self.processes: list[BaseProcess] = []
        self.pipes: list[Connection] = []
        self.untaken: list[collections.deque[float]] = []
        """Per worker, when each snapshot it has not yet said it took was sent (monotonic seconds)."""
        try:
            # multiprocessing starts its resource tracker with the first worker, and unblocks SIGINT when it
            # has (bpo-33613): started here, it cannot let a Ctrl-C through `_interrupts_held_from_the_worker`
            with _sigquit_ignored():  # which it keeps: SIGQUIT to the whole group (Ctrl-\) killed it
                resource_tracker.ensure_running()
            with _environment(MULTIPROCESS_DIRECTORY, str(metrics_directory) if metrics_directory else None):
                for index in range(settings.workers):
                    ours, theirs = spawn.Pipe(duplex=True)
                    process = spawn.Process(target=worker_main,
                                            args=(settings, cert_file, key_file, theirs, index, connection),
                                            name=f"serving-worker-{index}", daemon=True)
                    with _interrupts_held_from_the_worker():
                        process.start()
                    theirs.close()
                    self.processes.append(process)
                    self.pipes.append(ours)
                    self.untaken.append(collections.deque())
                    between_starts()
        except BaseException:  # SIGTERM while starting (`_SignalsWhileStarting`): stop what did start
            self.stop()
            raise

    def pids(self) -> list[int]:
        """The workers still running: where the refresh process passes a SIGQUIT on (`StackDumps`)."""
        return [process.pid for process in self.processes if process.pid is not None and process.exitcode is None]

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S, between_waits: Callable[[], None] = lambda: None) -> None:
        """Block until every worker listens; `WorkerStartError` with the first failure's line. `between_waits`
        runs every tenth of a second meanwhile (it may raise to stop waiting)."""
        deadline = time.monotonic() + timeout_s
        for process, pipe in zip(self.processes, self.pipes, strict=True):
            while not pipe.poll(min(0.1, max(0.0, deadline - time.monotonic()))):
                between_waits()
                if time.monotonic() >= deadline:
                    raise WorkerStartError(f"serving worker {process.name} did not start within {timeout_s:g} s")
            try:
                message = pipe.recv_bytes()
            except EOFError:
                raise WorkerStartError(f"serving worker {process.name} exited while starting") from None
            if message.startswith(FAILED):
                raise WorkerStartError(message[len(FAILED):].decode(errors="replace"))

    async def send(self, blob: bytes) -> None:
        """Put the packed snapshot in shared memory and pass it to every worker (each maps it)."""
        fd = await asyncio.to_thread(packed.share, blob)
        now = time.monotonic()
        for waiting in self.untaken:
            waiting.append(now)
        try:
            await asyncio.gather(*(asyncio.to_thread(packed.send, pipe, fd) for pipe in self.pipes))
        finally:
            os.close(fd)  # the workers hold their own descriptors, or mappings, from here on

    async def first_exit(self) -> BaseProcess:
        """Waits until some worker process ends, and returns it."""
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[BaseProcess] = loop.create_future()

        def exited(process: BaseProcess) -> None:
            if not ended.done():
                ended.set_result(process)

        for process in self.processes:
            loop.add_reader(process.sentinel, exited, process)
        try:
            return await ended
        finally:
            for process in self.processes:
                loop.remove_reader(process.sentinel)

    async def first_hung(self, after_s: float) -> BaseProcess:
        """Waits until some worker has left a snapshot untaken for more than `after_s`, and returns it.

        A worker whose event loop is stuck (a deadlock, a call that blocks, a stopped process) is not dead: it
        keeps its share of the listening port (`SO_REUSEPORT`), so the kernel goes on handing it new connections,
        which hang, while its siblings answer the probes. It also stops taking snapshots, which each worker
        acknowledges from its event loop (`TAKEN`): that silence is what shows it. One it had no file descriptor
        for (`SKIPPED`: at its open-file limit) is acknowledged too: its loop runs, and its own stall watch fails
        its health once its values are too old (`autoscaler.skipped_snapshots`)."""
        loop = asyncio.get_running_loop()
        for index, pipe in enumerate(self.pipes):
            loop.add_reader(pipe.fileno(), self._taken, index)
        try:
            while True:
                await asyncio.sleep(min(1.0, after_s / 4))
                now = time.monotonic()
                for process, waiting in zip(self.processes, self.untaken, strict=True):
                    if waiting and now - waiting[0] > after_s:
                        return process
        finally:
            for pipe in self.pipes:
                loop.remove_reader(pipe.fileno())

    def _taken(self, index: int) -> None:
        """Read what worker `index` said of the snapshots sent (taken or skipped, one each, in the order sent)."""
        pipe, waiting = self.pipes[index], self.untaken[index]
        try:
            while pipe.poll():
                pipe.recv_bytes()
                if waiting:
                    waiting.popleft()
        except (EOFError, OSError):  # the worker has gone: `first_exit` says so
            asyncio.get_running_loop().remove_reader(pipe.fileno())

    def stop(self) -> None:
        """SIGTERM first (a worker still starting ends at once; a serving one only notes it, `_worker`), then close
        the pipes (a serving worker sees end of file and stops, quietly after that SIGTERM), then wait."""
        for process in self.processes:
            if process.is_alive():
                process.terminate()
        for pipe in self.pipes:
            pipe.close()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for process in self.processes:
            process.join(max(0.0, deadline - time.monotonic()))
        for process in self.processes:
            if process.is_alive():
                process.kill()
                process.join()



@contextlib.contextmanager
def _interrupts_held_from_the_worker() -> Iterator[None]:
    """Start a worker with SIGINT and SIGQUIT blocked (a mask survives fork and exec) until `worker_main` takes
    them over and unblocks them, so that it ignores a terminal's Ctrl-C until its event loop handles it: Ctrl-C
    reaches the whole process group, and a worker still importing would trace back with KeyboardInterrupt; the
    refresh process stops it as on any stop. A SIGQUIT passed on while it starts, at its default, would kill it
    with a core dump (and the pod with it: a worker that dies stops `serve`); held, it writes the stacks later.

    Only blocked here, in this thread, not ignored: the refresh process must still see that Ctrl-C. A signal
    this thread blocks goes to another thread of the process where one runs, and was dropped there while SIGINT
    was ignored for the worker's sake (the adapter then served on, as if never asked to stop); handled, it
    reaches the refresh process's handler from whichever thread, or stays pending here until unblocked."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_FROM_THE_WORKER)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


@contextlib.contextmanager
def _sigquit_ignored() -> Iterator[None]:
    """SIGQUIT ignored in this process while the block starts one that keeps it so (an ignored signal stays
    ignored across exec): multiprocessing's resource tracker, which at Python's default was killed with a core
    dump by a SIGQUIT to the process group (Ctrl-\\ in a terminal) while every other process wrote its stacks
    (`exporter.stack_dumps`). The refresh process's own handler is put back after it."""
    previous = signal.signal(signal.SIGQUIT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGQUIT, previous if previous is not None else signal.SIG_DFL)


@contextlib.contextmanager
def _environment(name: str, value: str | None) -> Iterator[None]:
    """`name=value` in this process's environment while the block starts processes (a spawned child copies it
    at its start); this process's own prometheus_client chose its values when it was imported, so it keeps
    them."""
    if value is None:
        yield
        return
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before

