"""SIGTERM, SIGINT and SIGHUP for a process that must finish its clean-up however many of them come.

`loop.add_signal_handler` puts a signal back to its default action when the loop closes (`asyncio.run` closes
it on the way out). A process that still has work after its loop (the adapter's refresh process stops its
serving workers and removes the directory holding its private key) then died of a second SIGTERM that came a
few milliseconds after the first: exit 143, an ERROR from every worker, the key left on disk. The demo sent
exactly that, a group SIGTERM and then its own. So these handlers are Python's (`signal.signal`), installed once
for the whole run and never put back to the default: while a loop takes them (`StopSignals.delivered`) each
signal calls back into it, and before and after they are only noted.

SIGHUP (a terminal closed, an SSH session dropped) stops as SIGTERM does: left at its default it killed the
process with no line and left the same directories.

Here, in the exporter, because both programs use it (the adapter builds on the exporter's lower parts).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Callable, Iterator
from typing import Final

STOPPING_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class StopSignals:
    """The stopping signals received, noted in order (`received`), and passed to a loop while one takes them."""

    def __init__(self) -> None:
        self.received: list[signal.Signals] = []
        self._deliver: Callable[[signal.Signals], None] | None = None

    def install(self) -> None:
        """Take the stopping signals over (main thread only) for the rest of the process's life."""
        for signum in STOPPING_SIGNALS:
            signal.signal(signum, self._note)

    def _note(self, signum: int, frame: object) -> None:
        received = signal.Signals(signum)
        self.received.append(received)
        if self._deliver is not None:
            self._deliver(received)

    @contextlib.contextmanager
    def delivered(self, callback: Callable[[signal.Signals], None]) -> Iterator[None]:
        """Within the block, each stopping signal calls `callback(signal)` in the running loop (the caller's);
        outside it they are only noted again, so that a signal during the clean-up after the loop ends nothing.

        Python runs a handler in the main thread at its next instruction: one that the kernel gave to another
        thread while the loop waited in `select` would wait for the loop's next timer, so the C handler also
        writes to a wake-up socket the loop watches (as `add_signal_handler` does)."""
        loop = asyncio.get_running_loop()
        reading, writing = socket.socketpair()
        reading.setblocking(False)
        writing.setblocking(False)
        loop.add_reader(reading.fileno(), _drain, reading)
        previous = signal.set_wakeup_fd(writing.fileno(), warn_on_full_buffer=False)

        def deliver(received: signal.Signals) -> None:
            loop.call_soon_threadsafe(callback, received)

        self._deliver = deliver
        try:
            yield
        finally:
            self._deliver = None
            signal.set_wakeup_fd(previous)
            loop.remove_reader(reading.fileno())
            reading.close()
            writing.close()

    def hold(self) -> None:
        """Ignore the stopping signals for the rest of the process: called once the clean-up is over and the
        exit code logged, so that a signal still coming (one every few milliseconds, as a supervisor may send)
        cannot turn that exit code into a kill while Python shuts down, which puts every handler of its own back
        to the default first (an ignored signal it leaves ignored). Ignored, not blocked: a blocked one went to
        a thread of a C library, which had not blocked it, and killed the process all the same."""
        for signum in STOPPING_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)


def _drain(reading: socket.socket) -> None:
    """Empty the wake-up socket: the handler itself has run, or runs now that the loop is awake."""
    with contextlib.suppress(OSError):
        while reading.recv(64):
            pass
