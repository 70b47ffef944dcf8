"""One process serving the API until it is asked to stop: a serving worker of `--workers N`, or the one
process of `--workers 0` (`autoscaler.server.serve_in_process`).

It listens (`connections.GuardedSite`), says it is ready once the stop signals are taken, and on SIGTERM with
a `--shutdown-delay` keeps answering for the delay (`serve_shutdown_delay`, shared with the refresh process of
`--workers N`, `autoscaler.workers`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from autoscaler.api.app import install_dispatch
from autoscaler.api.connections import ConnectionLimits, GuardedSite
from autoscaler.settings import ServeSettings
from exporter.stop_signals import StopSignals

log = logging.getLogger("autoscaler.workers")
"""The name every line of `serve`'s processes had before the modules were split (`autoscaler.workers`): it is in
each line, and a log filter on it must keep matching."""


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
        await serve_shutdown_delay(stop, shutdown_delay_s)
    return bool(received)


async def serve_shutdown_delay(stop: asyncio.Event, delay_s: float) -> None:
    """Keep serving for `--shutdown-delay` after the kubelet's SIGTERM, so that the Service's endpoints drop the
    pod before its port closes; `stop` (cleared by the caller) set by a second signal ends the wait at once. One
    wait and one line for both `--workers 0` and the refresh process of `--workers N`."""
    log.info("serving %g s more (--shutdown-delay) so that the endpoints drop this pod first", delay_s)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), delay_s)

