"""Client errors in the log: one short WARNING per interval, never a traceback or the request's bytes.

aiohttp's HTTP layer logs every request it cannot parse (a bad method, a line too long, a broken header)
through the `aiohttp.server` logger at ERROR, with a traceback whose message quotes the offending bytes:
a 60 KB junk body writes ~50 KB of log per request, so anyone who can open a connection can fill the disk
and bury real errors. Those are the client's mistakes, not the adapter's. `install_client_error_filter`
puts a filter on that logger which rewrites such a record into one WARNING line (the exception's kind and
the start of its message, control characters escaped) and drops the others for an interval, saying how
many it dropped when it next logs (`log_limit.LogLimiter`, which limits the review failures' lines too).
Server errors (5xx, anything not an HTTP parse error) pass unchanged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from aiohttp.http_exceptions import HttpProcessingError

from exporter.log_limit import INTERVAL_S, LogLimiter

AIOHTTP_SERVER_LOGGER = "aiohttp.server"
MAX_DETAIL_CHARS = 160
"""Enough for the parser's reason and the start of the offending line."""


def client_error(record: logging.LogRecord) -> HttpProcessingError | None:
    """The HTTP parse error a record reports, when it is the client's (4xx)."""
    error = record.exc_info[1] if record.exc_info else None
    if isinstance(error, HttpProcessingError) and 400 <= error.code < 500:
        return error
    return None


def summarize(error: HttpProcessingError, limit: int = MAX_DETAIL_CHARS) -> str:
    """`Kind code: message`, on one line, printable, at most `limit` characters of message."""
    message = " ".join(str(error.message).split())
    printable = message.encode("unicode_escape").decode("ascii")
    if len(printable) > limit:
        printable = printable[:limit] + "..."
    return f"{type(error).__name__} {error.code}: {printable}"


class ClientErrorLogFilter(logging.Filter):
    """Rewrites client-error records to one WARNING line and lets at most one through per interval."""

    def __init__(self, interval_s: float = INTERVAL_S, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.interval_s = interval_s
        self._limiter = LogLimiter(interval_s, clock)

    def filter(self, record: logging.LogRecord) -> bool:
        error = client_error(record)
        if error is None:
            return True
        suppressed = self._limiter.admit()
        if suppressed is None:
            return False
        remote = record.args[0] if isinstance(record.args, tuple) and record.args else "unknown"
        note = self._limiter.note(suppressed)
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.msg = "malformed request from %s: %s%s; further ones logged once per %.0f s"
        record.args = (remote, summarize(error), note, self.interval_s)
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


def install_client_error_filter(interval_s: float = INTERVAL_S) -> ClientErrorLogFilter:
    """Put the filter on aiohttp's server logger, once per process (later calls return the same filter)."""
    logger = logging.getLogger(AIOHTTP_SERVER_LOGGER)
    for existing in logger.filters:
        if isinstance(existing, ClientErrorLogFilter):
            return existing
    installed = ClientErrorLogFilter(interval_s)
    logger.addFilter(installed)
    return installed
