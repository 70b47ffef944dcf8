"""A listening socket that says once, not once per attempt, that connections cannot be accepted for want of files.

At the open-file limit (`accept()` failing with EMFILE, or ENFILE, ENOBUFS, ENOMEM) asyncio's accept loop logs a
traceback, stops watching the socket and schedules a retry a second later, and then goes on with the next of
its up to `backlog` attempts in the same wake-up, each failing, logging and scheduling one more retry (CPython
gh-151615, fixed upstream in 2026, not in the Python 3.11 the image runs). The retries multiplied: at `ulimit -n
30` with 60 idle connections held, an exporter wrote about 89,000 lines in 10 s, burying the log and the SIGQUIT
stack dump meant for that case; the adapter's workers, at their hard limit, the same.

`ListeningSocket.accept` ends that loop after its first failure (it answers "nothing waiting", which asyncio
takes as the end of the backlog), says the outage once with the limit and what to do, and says when it is over
(every connection that waited accepted), with how many attempts were refused. `quiet_accept_errors` drops
asyncio's own traceback for those failures, which the line replaces. A connection waiting meanwhile stays in
the kernel's backlog and is accepted at the first retry that finds a file free: nothing else changes.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import socket
import time
from typing import Any

log = logging.getLogger(__name__)

OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
"""The errors asyncio answers by pausing the accept for a second (`asyncio.selector_events`), where we take over."""

ASYNCIO_SAYS = "socket.accept() out of system resource"
"""The message of asyncio's own report of such a failure, which `quiet_accept_errors` drops."""

SAME_WAKE_UP_S = 0.5
"""After a refused accept, how long further attempts answer "nothing waiting" without asking the kernel: the rest
of asyncio's loop in that wake-up (microseconds), well short of its one-second retry, which asks again."""


class ListeningSocket(socket.socket):
    """A listening socket whose `accept` reports running out of files once per outage (see the module)."""

    where: str = "its port"
    """Where it listens, as the log writes it (`exporter.listen.bind_listeners` sets it once bound)."""

    _refused_at: float | None = None
    _refused: int = 0
    _outage_began: float = 0.0

    def accept(self) -> tuple[socket.socket, Any]:
        now = time.monotonic()
        if self._refused_at is not None and now - self._refused_at < SAME_WAKE_UP_S:
            raise BlockingIOError(errno.EAGAIN, "refused a moment ago: asyncio retries in a second")
        try:
            accepted = super().accept()
        except BlockingIOError:
            if self._refused:  # every connection that waited is accepted: the outage is over
                log.info("accepting connections again on %s, every waiting one accepted: %d attempt(s) refused "
                         "over %.0f s for want of files", self.where, self._refused, now - self._outage_began)
                self._refused = 0
            raise
        except OSError as error:
            if error.errno not in OUT_OF_RESOURCES:
                raise
            if self._refused == 0:
                self._outage_began = now
                log.warning("%s", outage_said(self.where, error))
            self._refused += 1
            self._refused_at = now
            raise
        return accepted


def outage_said(where: str, error: OSError) -> str:
    """The one line of an outage: what fails, the limit, what happens meanwhile, and what to do."""
    waiting = (f"new connections to {where} wait in the kernel's backlog, not accepted, until a file is free "
               "(tried every second; said once until then)")
    return f"{shortage(error)}: {waiting}: {cause_and_cure(where, error)}"


def shortage(error: OSError) -> str:
    """What ran out, as an outage's line starts (the words operators search the log and the docs for)."""
    return "out of file descriptors" if error.errno in (errno.EMFILE, errno.ENFILE) else "out of memory for sockets"


def cause_and_cure(where: str, error: OSError) -> str:
    """Whose limit `error` reached and what to do, for a process serving on `where`: the advice of every line that
    says a process ran out of files (a connection not accepted, a serving worker's new values not taken)."""
    if error.errno == errno.EMFILE:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        return (f"this process has as many files open as its open-file limit ({soft}; RLIMIT_NOFILE, hard limit "
                f"{'unlimited' if hard == resource.RLIM_INFINITY else hard}) allows; look for clients holding many "
                f"connections to {where} open (`ss -tn` in the pod's network namespace), or raise the container's "
                "open-file limit (`ulimit -n`, set by the container runtime)")
    if error.errno == errno.ENFILE:
        return ("the node's open-file limit (fs.file-max) is reached; look for what holds files open on the node, or "
                "raise fs.file-max")
    return f"{error.strerror or error}; look for what uses the node's memory"


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """Drop asyncio's traceback, one per attempt, for an accept out of files (the loop's listening sockets are
    `ListeningSocket`s, whose line says it once), and the `ValueError: Invalid file descriptor: -1` of its retry
    when that runs after a stop closed the socket. Everything else goes to the handler the loop had."""
    previous = loop.get_exception_handler()
    if getattr(previous, "quiets_accept_errors", False):
        return  # a second site on the loop: already quiet

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") == ASYNCIO_SAYS and isinstance(context.get("exception"), OSError):
            return
        if isinstance(context.get("exception"), ValueError) and retry_after_close(context.get("handle")):
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    handle.quiets_accept_errors = True  # type: ignore[attr-defined]
    loop.set_exception_handler(handle)


def retry_after_close(handle: object) -> bool:
    """Whether a failed callback is asyncio's retry of the accept on a `ListeningSocket` closed since (a stop in
    an outage): it fails on the closed socket's fd, -1, and would have found nothing to serve anyway. asyncio
    keeps a callback's arguments in `Handle._args`, which has no public name; where that changes, the traceback is
    logged as before."""
    arguments = getattr(handle, "_args", None) or ()
    return any(isinstance(argument, ListeningSocket) and argument.fileno() == -1 for argument in arguments)
