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

Here is the refresh process (`serve_with_workers`); a serving worker is `serving_worker.py`, the refresh
process's hold on its workers `worker_pool.py`, and the serve loop of a worker (and of `--workers 0`)
`serve_loop.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING

from autoscaler.api.certs import generate_self_signed
from autoscaler.api.render import SnapshotPublisher
from autoscaler.kube.review_connection import ReviewConnection
from autoscaler.scratch import owned_directory, sweep_abandoned
from autoscaler.serve_loop import StopRequests, serve_shutdown_delay
from autoscaler.serving_names import self_signed_hosts
from autoscaler.settings import ServeSettings
from autoscaler.stop_budget import say_stop_budget
from autoscaler.worker_pool import STOP_TIMEOUT_S, WorkerPool
from exporter.stack_dumps import StackDumps
from exporter.stop_signals import StopSignals
from exporter.stopping import stop_tasks

if TYPE_CHECKING:
    from autoscaler.model import RuntimeKey, RuntimeView
    from autoscaler.server import RefreshStack

log = logging.getLogger(__name__)

CERT_DIRECTORY_PREFIX, METRICS_DIRECTORY_PREFIX = "mm-autoscaler-cert-", "mm-autoscaler-metrics-"
HUNG_WORKER_FLOOR_S = 30.0
"""The shortest time a serving worker may leave a snapshot untaken before it counts as hung (`WorkerPool.first_hung`):
it takes one in milliseconds, so this is only there to spare a worker busy for a moment (a long pause of its
collector, a node short of CPU) from a restart; the stall limit (`ServeSettings.stalled_after_s`) when longer."""


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
            files = generate_self_signed(directory, "modelmesh-autoscaler", self_signed_hosts(settings))
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
        log.info("serving external.metrics.k8s.io on %s with %d worker process%s (source %s, refresh every %g s)",
                 settings.serving_url, settings.workers, "" if settings.workers == 1 else "es", settings.source,
                 settings.refresh_interval_s)
        say_stop_budget(settings)
        stack = RefreshStack(settings)
        refresher, metrics = stack.refresher, stack.metrics
        publisher = SnapshotPublisher(metrics, refresher.policies, refresher.source)

        async def publish(views: dict[RuntimeKey, RuntimeView]) -> None:
            started = time.perf_counter()
            blob = publisher.snapshot_blob(views, refresher.ready)
            await pool.send(blob)
            log.debug("snapshot of %d runtimes (%d bytes) rendered and sent in %.3f s", len(views),
                      len(blob), time.perf_counter() - started)

        stack.listen(publish)  # before the collection that may end the refresh
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
            process.join(STOP_TIMEOUT_S)  # ended (its sentinel says so), but its code is only known once reaped
            log.error("serving worker %s exited %s; stopping so that Kubernetes restarts the pod", process.name,
                      _exit_said(process.exitcode))
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
            await serve_shutdown_delay(stop, settings.shutdown_delay_s)  # a second SIGTERM or SIGINT ends it
        await stack.close()


def _exit_said(code: int | None) -> str:
    """A worker's exit as the log says it: read before the process was reaped, it was `with code None`."""
    if code is None:
        return "(its exit code unknown)"
    if code < 0:
        try:
            return f"with code {code} (killed by {signal.Signals(-code).name})"
        except ValueError:
            return f"with code {code} (killed by signal {-code})"
    return f"with code {code}"
