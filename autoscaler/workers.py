"""`serve` as processes: one refresh process, N serving workers on one port.

The refresh (discovery, scrape or Prometheus, decisions, deletion costs and leader election) runs in the
process started by the CLI. After each refresh it renders every answer (`autoscaler.api.render`; `/debug` only
as compact data that the worker writes as JSON when asked) and sends the packed `ServingSnapshot`
(`autoscaler.api.packed`) to each serving worker: written once to shared memory (a memfd) whose descriptor goes
down each worker's pipe; a worker maps it in a thread and swaps it in with one assignment, decoding nothing, so
swapping a 5,000-runtime snapshot does not hold up its requests.
So an HPA request never waits on a scrape, a parse or a decision, and the serving processes only look up bytes.

Workers listen on the same port with `SO_REUSEPORT` (the kernel spreads connections across them), each with
its own authentication, review caches and connection limits. Either side ending is seen by the other: the
refresh process watches every worker's process sentinel and stops everything (exit 1) when one dies; a
worker reading end-of-file on its pipe (the refresh process died) exits 1. Kubernetes then restarts the pod,
rather than letting it serve values that no longer change. A worker that hangs is treated as one that died
(`WorkerPool.first_hung`); a refresh that hangs is noticed by the workers (`autoscaler.api.stall`).

Start-up mistakes found in a worker (authentication settings, a port in use) reach the refresh process as one
line and end `serve` with the usual "cannot start: ..." and exit code 2. `--workers 0` keeps everything in one
process (`autoscaler.server.serve_in_process`): for tests, the demo and debugging.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import multiprocessing
import os
import signal
import socket
import ssl
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from autoscaler.api import packed
from autoscaler.api.app import build_served_app, install_dispatch
from autoscaler.api.certs import generate_self_signed, server_context
from autoscaler.api.connections import ConnectionLimits, GuardedSite
from autoscaler.api.render import SnapshotPublisher
from autoscaler.api.selfmetrics_split import MULTIPROCESS_DIRECTORY
from autoscaler.api.snapshot import SnapshotHolder
from autoscaler.kube.review_connection import ReviewConnection
from autoscaler.scratch import owned_directory, sweep_abandoned
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.settings import ServeSettings
from exporter.stack_dumps import StackDumps
from exporter.stop_signals import StopSignals
from exporter.stopping import stop_tasks

if TYPE_CHECKING:
    from autoscaler.server import RefreshStack

log = logging.getLogger(__name__)

READY, FAILED, TAKEN = b"ready", b"error:", b"taken"
CERT_DIRECTORY_PREFIX, METRICS_DIRECTORY_PREFIX = "mm-autoscaler-cert-", "mm-autoscaler-metrics-"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
"""How long the workers together get to stop after SIGTERM before they are killed: one deadline for all of them,
so that with `--workers N` the pod still stops within its terminationGracePeriodSeconds (30 s in the base, which
also covers the leader's writes in flight, the Lease release and --shutdown-delay; tests/manifests/test_manifests.py
checks the sum)."""


HUNG_WORKER_FLOOR_S = 30.0
"""The shortest time a serving worker may leave a snapshot untaken before it counts as hung (`WorkerPool.first_hung`):
it takes one in milliseconds, so this is only there to spare a worker busy for a moment (a long pause of its
collector, a node short of CPU) from a restart; the stall limit (`ServeSettings.stalled_after_s`) when longer."""


class StopRequests:
    """What stop signals ask for, as `StopSignals.delivered` hands them in: the first stops, a second stops at
    once (it ends a wait: the drain, `--shutdown-delay`); both are said (`say`), more only repeat them."""

    def __init__(self, say: bool = True) -> None:
        self.event = asyncio.Event()
        self.received: list[signal.Signals] = []
        self._say = say

    def __call__(self, signum: signal.Signals) -> None:
        if self._say and len(self.received) < 2:
            log.info("%s: %s", signum.name, "stopping" if not self.received else "stopping at once")
        self.received.append(signum)
        self.event.set()


class WorkerStartError(Exception):
    """A serving worker could not start; the message is the worker's one line."""


def connection_limits(settings: ServeSettings) -> ConnectionLimits:
    return ConnectionLimits(max_connections=settings.max_connections,
                            header_read_timeout_s=settings.header_read_timeout_s,
                            keepalive_timeout_s=settings.keepalive_timeout_s)


async def serve_until_stopped(app: web.Application, host: str, port: int, tls: ssl.SSLContext | None,
                              limits: ConnectionLimits, *, reuse_port: bool = False,
                              on_ready: Callable[[], None] | None = None,
                              until: asyncio.Future[Any] | None = None,
                              drain: Callable[[], Awaitable[None]] | None = None,
                              shutdown_delay_s: float = 0.0, signals: StopSignals | None = None,
                              stop_signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)) -> bool:
    """Serve `app` until a stopping signal (or `until` completes), then clean it up (its cleanup contexts
    run: the refresh loop stops, the Lease is released). True when a signal stopped it.

    With a `shutdown_delay_s`, SIGTERM (the kubelet's; a terminal's Ctrl-C or hang-up stops at once) runs
    `drain()` and keeps the port answering for the delay before it closes, as the refresh process of `--workers N`
    keeps its workers: the Service's endpoints drop a terminating pod only a moment after it is signalled. A second
    signal ends the wait. `signals` (`--workers 0`): the process's own handlers, taken over once serving, which
    stay after the loop (`exporter.stop_signals`) and say which signal stops it (`SIGTERM: stopping`), as the
    refresh process of `--workers N` says it; else `stop_signals` through the loop (a serving worker, which stops
    quietly: its refresh process speaks for it)."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    if runner.server is not None:
        install_dispatch(app, runner.server)  # the HPA's request served without routing (`Serving.dispatch`)
    try:
        await GuardedSite(runner, host, port, tls=tls, limits=limits, reuse_port=reuse_port).start()
        stop_on = StopRequests(say=signals is not None)
        stop, received = stop_on.event, stop_on.received

        with contextlib.ExitStack() as taken:
            if signals is not None:
                taken.enter_context(signals.delivered(stop_on))
                signals.install()
            else:
                loop = asyncio.get_running_loop()
                for signum in stop_signals:
                    loop.add_signal_handler(signum, stop_on, signum)
            # Ready once the signals are taken: said before, a SIGTERM right after the "serving" line (or the
            # worker's word to the refresh process) found no handler yet and killed the process (exit 143).
            if on_ready is not None:
                on_ready()
            return await _until_stopped(stop, received, until, drain, shutdown_delay_s)
    finally:
        await runner.cleanup()


async def _until_stopped(stop: asyncio.Event, received: list[signal.Signals], until: asyncio.Future[Any] | None,
                         drain: Callable[[], Awaitable[None]] | None, shutdown_delay_s: float) -> bool:
    """`serve_until_stopped`'s wait: for a signal or `until`, then for the SIGTERM's `--shutdown-delay`."""
    waiters: list[asyncio.Future[Any]] = [asyncio.ensure_future(stop.wait())]
    if until is not None:
        waiters.append(until)
    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    for waiter in waiters:
        waiter.cancel()
    if shutdown_delay_s > 0 and received[:1] == [signal.SIGTERM]:
        stop.clear()
        if drain is not None:
            await drain()  # /readyz fails, values served, the Lease released
        log.info("serving %g s more (--shutdown-delay) so that the endpoints drop this pod first",
                 shutdown_delay_s)
        with contextlib.suppress(TimeoutError):  # a second signal stops at once
            await asyncio.wait_for(stop.wait(), shutdown_delay_s)
    return bool(received)


# The serving worker.

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
    receiving = asyncio.create_task(_receive_snapshots(pipe, holder), name="receive-snapshots")

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


async def _receive_snapshots(pipe: Connection, holder: SnapshotHolder) -> bool:
    """Swap in each snapshot as it arrives; True when the refresh process has gone (the pipe's end), False when
    a snapshot could not be taken (logged here: the call that failed and what to check).

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
        except packed.SnapshotNotTaken as failure:
            log.error("cannot take the snapshots the refresh process sends (it is running): %s. Check what changes "
                      "this process's system calls or memory: a library preloaded with LD_PRELOAD (libfaketime "
                      "breaks mmap), the container's memory limit, ulimit -n and the node's vm.max_map_count; "
                      "stopping so that Kubernetes restarts the pod", failure)
            return False
        holder.current = snapshot
        with contextlib.suppress(OSError):  # the refresh process has gone: the next receive ends this loop
            pipe.send_bytes(TAKEN)  # from the event loop: a loop that is stuck takes no more (`first_hung`)


# The refresh process.

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
        acknowledges from its event loop (`TAKEN`): that silence is what shows it."""
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
        """Read what worker `index` said it took (one snapshot each, in the order sent)."""
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


HELD_FROM_THE_WORKER = frozenset({signal.SIGINT, signal.SIGQUIT})


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


class _StoppedWhileStarting(Exception):
    """A stopping signal came before the refresh process's event loop took the signals over."""


class _SignalsWhileStarting(StopSignals):
    """The refresh process's SIGTERM, SIGINT and SIGHUP, taken over once for its whole run (`StopSignals`).

    Before its event loop takes them (a pod deleted while it starts) they are noted, and acted on at the next
    safe point (after each worker's start, while waiting for the workers, as the loop takes the signals over),
    so that the workers started so far are stopped and the scratch directories removed, as on any stop.
    Raising from the handler itself could interrupt multiprocessing as it hands a new worker its start-up data;
    dying at once would leave the directories and the workers behind. After the loop, while the workers are
    stopped and the directories removed, they are only noted: that clean-up is bounded (`STOP_TIMEOUT_S`)."""

    def check(self) -> None:
        if self.received:
            raise _StoppedWhileStarting(self.received[0].name)


def serve_with_workers(settings: ServeSettings, tls_files: tuple[Path, Path] | None) -> int:
    """Run the refresh here and `settings.workers` serving processes; the process exit code."""
    starting = _SignalsWhileStarting()
    starting.install()
    dumps = StackDumps("refresh process")  # passed on to the workers once they run (`_serve_with_workers`)
    dumps.install()
    try:
        code = _serve_with_workers(settings, tls_files, starting, dumps)
    except _StoppedWhileStarting as stopped:
        log.info("%s while starting: stopped", stopped)
        code = 0
    else:
        log.info("stopped (exit code %d)", code)
    starting.hold()
    return code


def _serve_with_workers(settings: ServeSettings, tls_files: tuple[Path, Path] | None,
                        starting: _SignalsWhileStarting, dumps: StackDumps) -> int:
    for prefix in (CERT_DIRECTORY_PREFIX, METRICS_DIRECTORY_PREFIX):
        sweep_abandoned(prefix)
    # a fresh metrics directory per start, as counters start from zero; only several workers share one
    with owned_directory(CERT_DIRECTORY_PREFIX) as directory, \
            (owned_directory(METRICS_DIRECTORY_PREFIX) if settings.workers > 1
             else contextlib.nullcontext()) as metrics_directory:
        if tls_files is None:
            files = generate_self_signed(directory, "modelmesh-autoscaler",
                                         [h for h in (settings.bound_host, "localhost", socket.gethostname()) if h])
            tls_files = (files.cert_file, files.key_file)
        pool = WorkerPool(settings, *tls_files, metrics_directory, between_starts=starting.check,
                          connection=_review_connection(settings))
        dumps.children = pool.pids
        try:
            pool.wait_ready(between_waits=starting.check)
            return asyncio.run(_refresh_process(settings, pool, starting))
        finally:
            pool.stop()


def _review_connection(settings: ServeSettings) -> ReviewConnection | None:
    """The Kubernetes connection the workers' reviews need, loaded here once with the library this process has
    loaded anyway (discovery, leader election); None with `--insecure-dev`, which reviews nothing."""
    if settings.insecure_dev:
        return None
    from autoscaler.kube.reviews import load_review_connection

    return asyncio.run(load_review_connection(settings.kubeconfig))


def _lower_priority(increment: int) -> None:
    """Make the refresh process yield the CPU to the serving workers (already started, so not affected).

    An HPA's request must never wait on a refresh; apart in processes, the two still share the pod's cores,
    and a refresh of thousands of pods keeps a core busy for seconds. With a lower priority the scheduler runs
    a worker first whenever both are runnable: the requests keep their latency and the refresh takes longer,
    which only matters if it nears the refresh interval (`modelmesh_autoscaler_refresh_duration_seconds` shows it).
    Raising a niceness needs no privilege.
    """
    if increment:
        now = os.nice(increment)
        log.info("refresh process niceness %d (the serving workers keep theirs)", now)


async def _refresh_process(settings: ServeSettings, pool: WorkerPool, starting: _SignalsWhileStarting) -> int:
    from autoscaler.server import RefreshStack

    _lower_priority(settings.refresh_nice)
    stop_on = StopRequests()  # the first stops, a second ends --shutdown-delay
    stop, stopped_by = stop_on.event, stop_on.received

    with starting.delivered(stop_on):  # until the end of the clean-up in the loop: a second signal ends the wait
        starting.check()  # a signal that came before the loop took them over
        # Said as soon as the loop takes the signals, before the refresh is built: the workers answer already
        # (a probe, a test, a person waits for this line), and a SIGTERM after it is `SIGTERM: stopping`. Said as
        # the workers answered, a signal in the milliseconds before the loop took them was `SIGTERM while
        # starting`; said after the refresh was built, a second later, /healthz answered with no line.
        log.info("serving external.metrics.k8s.io on %s with %d worker process%s (source %s, refresh every %.0f s)",
                 settings.serving_url, settings.workers, "" if settings.workers == 1 else "es", settings.source,
                 settings.refresh_interval_s)
        stack = RefreshStack(settings)
        refresher, metrics = stack.refresher, stack.metrics
        publisher = SnapshotPublisher(metrics, refresher.policies, refresher.source)

        async def publish(views: object) -> None:
            started = time.perf_counter()
            blob = publisher.snapshot_blob(refresher.views, refresher.ready)
            await pool.send(blob)
            log.debug("snapshot of %d runtimes (%d bytes) rendered and sent in %.3f s", len(refresher.views),
                      len(blob), time.perf_counter() - started)

        refresher.listeners.append(publish)
        return await _refresh_until_stopped(settings, pool, stack, publisher, stop, stopped_by)


async def _refresh_until_stopped(settings: ServeSettings, pool: WorkerPool, stack: RefreshStack,
                                 publisher: SnapshotPublisher, stop: asyncio.Event,
                                 stopped_by: list[signal.Signals]) -> int:
    from autoscaler.actuation.writes_off import start_writing
    from autoscaler.gcsettings import tune_for_refresh

    refresher, metrics = stack.refresher, stack.metrics
    await stack.start()
    actuator = await start_writing(settings, refresher, metrics, cluster=stack.cluster_pods)
    tune_for_refresh()  # start-up is over; the refresh's many short-lived objects (autoscaler/gcsettings.py)
    refreshing = asyncio.create_task(refresher.run(), name="refresh")
    exited = asyncio.create_task(pool.first_exit(), name="serving-workers")
    hung_after_s = max(settings.stalled_after_s, HUNG_WORKER_FLOOR_S)
    hung = asyncio.create_task(pool.first_hung(hung_after_s), name="hung-workers")
    stopping = asyncio.create_task(stop.wait(), name="signals")
    draining = False
    try:
        await asyncio.wait([refreshing, exited, hung, stopping], return_when=asyncio.FIRST_COMPLETED)
        # the kubelet's SIGTERM, not a terminal's Ctrl-C (which reaches the workers too: they stop at once)
        draining = (settings.shutdown_delay_s > 0 and stopping.done() and not exited.done() and not hung.done()
                    and stopped_by[:1] == [signal.SIGTERM])
        code = 0
        if exited.done():
            process = exited.result()
            log.error("serving worker %s exited with code %s; stopping so that Kubernetes restarts the pod",
                      process.name, process.exitcode)
            code = 1
        elif hung.done():
            process = hung.result()
            log.error("serving worker %s has taken no new values for %g s: it is hung; stopping so that "
                      "Kubernetes restarts the pod", process.name, hung_after_s)
            process.kill()  # a stuck process takes no SIGTERM
            code = 1
        elif refreshing.done():
            log.error("the refresh loop ended: %r; stopping", refreshing.exception())
            code = 1
        return code
    finally:
        # even a refresh that takes its first cancel for a timeout
        await stop_tasks([refreshing, exited, hung, stopping])
        if draining:
            stop.clear()
            with contextlib.suppress(OSError):  # a worker that has gone is stopped below in any case
                await pool.send(publisher.snapshot_blob(refresher.views, False))  # /readyz fails, values served
        if actuator is not None:
            await actuator.stop()  # the Lease is released, so another replica leads at once
        if draining:
            log.info("serving %g s more (--shutdown-delay) so that the endpoints drop this pod first",
                     settings.shutdown_delay_s)
            with contextlib.suppress(TimeoutError):  # a second SIGTERM or SIGINT stops at once
                await asyncio.wait_for(stop.wait(), settings.shutdown_delay_s)
        await stack.close()
