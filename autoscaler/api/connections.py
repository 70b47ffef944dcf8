"""The listening socket, guarded: connections cannot exhaust the adapter's memory.

Each open TLS connection costs a few hundred KB (asyncio's TLS buffers, aiohttp's parser), so an adapter that
keeps every connection open runs out of memory under a few thousand slow or idle ones and is OOM-killed.
Here, as Go's `http.Server` does for kube-apiserver and other extension API servers:

- **A bound on open connections** per serving process (`--max-connections`). At the bound, a new connection
  takes the place of the one that has waited longest for its request headers: a slow client, or an idle one
  (kept alive after its last answer), so slow or idle clients cannot lock others out; when every open
  connection is busy with a request, the new one is closed the moment it is accepted, before any TLS
  handshake, so refusing costs next to nothing.
- **A TLS handshake and header read timeout** (`--header-read-timeout`): the handshake, and then the complete
  header block of each request, must arrive within it, counted from the connection's start or from the first
  byte of a request. A slow-header client ("slowloris") is disconnected.
- **An idle keep-alive timeout** (`--keepalive-timeout`): aiohttp closes a connection idle between requests.
- **A stalled-answer timeout**: a client that stops reading (pipelined requests, answers never read) stalls
  its connection in a write that would never end; from the moment the answer backs up it is a slow client,
  first in line to make room, and it is closed when it has taken nothing for `write_stall_timeout_s`.
- **Oversized request lines or headers** are refused with a Kubernetes `Status`, code 431 (as Go answers for
  headers over its limit) with reason `BadRequest` (metav1 has no reason of its own for 431, and a client must
  not retry it unchanged), its message naming the limit; any other unparseable request with a 400 `Status`, logged
  once per interval in one short WARNING line, never with the request or a traceback (`client_errors.py`).

TLS is negotiated here (`loop.start_tls`) rather than by the server socket, which is what makes refusing
before the handshake possible; aiohttp's request handler then runs unchanged on the TLS transport.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import json
import logging
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from autoscaler.api.connection_memo import ConnectionMemo
from autoscaler.api.status import status_body

log = logging.getLogger(__name__)

_HEADER_END = b"\r\n\r\n"
_HEADER_END_TAIL = _HEADER_END[-3:]
"""The last three bytes seen when a read ends with a header block's end (what `data_received` keeps of it)."""
TLS_READ_BUFFER = 32 * 1024
"""asyncio allocates a read buffer of `SSLProtocol.max_size` (256 KiB) for every TLS connection, handshaking or
not: most of what an open connection costs, and under connection churn freed memory is not returned to the
system quickly. Requests to this API are a few hundred bytes, so a serving process reads in 32 KiB chunks."""


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_connections: int = 256
    """Per serving process. About 300 KB each at most (asyncio's TLS buffers): 256 add about 80 MiB, well
    inside the shipped 512 MiB limit. The aggregator keeps a handful of connections open."""
    header_read_timeout_s: float = 10.0
    """For the TLS handshake, and for each request's headers. An HPA's request arrives in milliseconds."""
    keepalive_timeout_s: float = 60.0
    """Idle time before a kept-alive connection is closed; kube-apiserver's aggregator reuses its connections
    well within it."""
    write_stall_timeout_s: float = 10.0
    """How long an answer may stay backed up (the client reads nothing) before the connection is closed.
    Answers are at most a few MB (`/metrics` of a large fleet), which a client that reads at all takes in far
    less."""
    max_line_size: int = 8190
    """Longest request line (URL) or header line accepted, bytes (aiohttp's and nginx's default)."""
    max_field_size: int = 8190


class StatusRequestHandler(RequestHandler, ConnectionMemo):
    """aiohttp's protocol handler, answering requests it cannot parse with a `Status` instead of text, and
    keeping what authentication found out about the connection (`ConnectionMemo`)."""

    line_limit: int = 8190
    """The longest request line or header field accepted (`ConnectionLimits`), named in the 431's message."""
    on_idle: Callable[[], None] | None = None
    """Called when an answer is written and no other request is queued: the connection waits for its next
    request (`_GuardedConnection.idle`)."""

    def log_access(self, request: BaseRequest, response: web.StreamResponse, time: float | None) -> None:
        """aiohttp calls this as the last step of every answer (`finish_response`, written or not), so it is
        where the connection learns that it waits for its next request. Hooked here rather than by wrapping
        `finish_response`: that added a coroutine layer to every request (`bench/bench_request_cost.py`)."""
        if self._logging_enabled:  # never, as the adapter serves (`access_log=None`); aiohttp's own test
            super().log_access(request, response, time)
        if self.on_idle is not None and not self._messages:
            self.on_idle()

    def handle_error(self, request: BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if isinstance(exc, LineTooLong) or (isinstance(exc, BadHttpMessage) and "too many headers"
                                            in str(exc).lower()):
            code, text = 431, (f"the request line (the URL with its query) or a header field is longer than "
                                f"{self.line_limit} bytes, or there are too many header fields; an external "
                                "metric's labelSelector names one runtime (deployment=<Deployment name>), far "
                                "shorter: check the URL and headers the client sends")
        elif isinstance(exc, BadHttpMessage) or status == 400:
            code, text = 400, "malformed HTTP request"
        else:
            code, text = status, "internal error; see the adapter's log"
        if isinstance(exc, HttpProcessingError) and code < 500:
            # aiohttp's own wording and logger: the client-error filter (api/client_errors.py) turns it
            # into one short WARNING per interval, without the request's bytes or a traceback.
            self.log_exception("Error handling request from %s", request.remote, exc_info=exc)
        else:
            log.error("answered %d to a request from %s: %s", code, request.remote,
                      str(exc)[:200] if exc is not None else message)
        if request.writer.output_size > 0:
            raise ConnectionError("response already started; closing the connection")
        response = web.Response(body=json.dumps(status_body(code, text)).encode(), status=code,
                                content_type="application/json", charset="utf-8")
        response.force_close()
        return response


class ConnectionGuard:
    """A protocol factory for `loop.create_server`: counts, upgrades to TLS, times headers, hands over."""

    def __init__(self, server: web.Server, tls: ssl.SSLContext | None, limits: ConnectionLimits) -> None:
        self.server = server
        self.tls = tls
        self.limits = limits
        self.open = 0
        self.refused = 0
        self.evicted = 0
        self.waiting: dict[_GuardedConnection, None] = {}
        """Open connections waiting for request headers, longest-waiting first (dicts keep insertion order)."""
        self._handler_kwargs: dict[str, Any] = {
            "keepalive_timeout": limits.keepalive_timeout_s,
            "max_line_size": limits.max_line_size,
            "max_field_size": limits.max_field_size,
            "access_log": None,
        }

    def __call__(self) -> asyncio.Protocol:
        return _GuardedConnection(self)

    def make_handler(self) -> StatusRequestHandler:
        handler = StatusRequestHandler(self.server, loop=asyncio.get_running_loop(), **self._handler_kwargs)
        handler.line_limit = min(self.limits.max_line_size, self.limits.max_field_size)
        return handler


class _GuardedConnection(asyncio.Protocol):
    def __init__(self, guard: ConnectionGuard) -> None:
        self._guard = guard
        self._loop = asyncio.get_running_loop()
        self._counted = False
        self._handler: StatusRequestHandler | None = None
        self._transport: asyncio.BaseTransport | None = None
        self._awaiting_since: float | None = None  # start of headers not yet complete
        self._timer: asyncio.TimerHandle | None = None
        self._stalled: asyncio.TimerHandle | None = None  # closes a connection whose answer stays backed up
        self._tail = b""
        self._early: list[bytes] = []  # decrypted before `start_tls` returned (TLS 1.3 clients send at once)

    # The raw TCP connection.
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        guard = self._guard
        if guard.open >= guard.limits.max_connections:
            if not guard.waiting:
                guard.refused += 1
                transport.abort()  # type: ignore[attr-defined]
                return
            guard.evicted += 1
            next(iter(guard.waiting)).abort()
        guard.open += 1
        self._counted = True
        self._transport = transport
        self._awaiting(self._loop.time())
        if guard.tls is None:
            self._start(transport)
        else:
            transport.pause_reading()  # type: ignore[attr-defined]  # the ClientHello is for start_tls
            self._loop.create_task(self._upgrade(transport))

    async def _upgrade(self, raw: asyncio.BaseTransport) -> None:
        try:
            secured = await self._loop.start_tls(
                raw, self, self._guard.tls, server_side=True,  # type: ignore[arg-type]
                ssl_handshake_timeout=self._guard.limits.header_read_timeout_s)
        except (OSError, ssl.SSLError, TimeoutError, ConnectionError, RuntimeError) as error:
            log.debug("TLS handshake failed: %s", error)
            raw.abort()  # type: ignore[attr-defined]
            self._release()
            return
        if secured is None or secured.is_closing():
            self._release()
            return
        self._start(secured)

    def _start(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        self._handler = self._guard.make_handler()
        self._handler.on_idle = self.idle
        self._handler.connection_made(transport)
        early, self._early = self._early, []
        for data in early:
            self._handler.data_received(data)

    # Header timing.
    def _awaiting(self, since: float) -> None:
        self._awaiting_since = since
        self._to_back_of_line()  # idle or not before
        if self._timer is None:
            self._timer = self._loop.call_at(since + self._guard.limits.header_read_timeout_s, self._check)

    def idle(self) -> None:
        """The last answer is written: the connection waits for its next request, first in line to make room
        for a new connection once it has waited longest. Idle time is aiohttp's keep-alive timeout's to judge,
        so the header clock starts only with the next request's first byte. (`_to_back_of_line` inline: this
        runs once a request.)"""
        if self._awaiting_since is None and self._transport is not None and not self._transport.is_closing():
            waiting = self._guard.waiting
            waiting.pop(self, None)
            waiting[self] = None

    def _to_back_of_line(self) -> None:
        """Evictable, after every connection that has waited longer (`ConnectionGuard.waiting` keeps order)."""
        self._guard.waiting.pop(self, None)
        self._guard.waiting[self] = None

    def abort(self) -> None:
        """Close at once (evicted, or its headers too slow); `connection_lost` releases its place."""
        self._guard.waiting.pop(self, None)
        self._awaiting_since = None
        if self._transport is not None:
            self._transport.abort()  # type: ignore[attr-defined]
        else:
            self._release()

    def _check(self) -> None:
        self._timer = None
        since = self._awaiting_since
        if since is None:
            return
        deadline = since + self._guard.limits.header_read_timeout_s
        if self._loop.time() >= deadline:
            log.debug("closing a connection whose request headers did not arrive in time")
            self.abort()
            return
        self._timer = self._loop.call_at(deadline, self._check)

    def data_received(self, data: bytes) -> None:
        if data[-4:] == _HEADER_END:  # the usual read: one whole request's headers, nothing after them
            self._awaiting_since = None
            self._guard.waiting.pop(self, None)
            self._tail = _HEADER_END_TAIL
            if self._handler is not None:
                self._handler.data_received(data)
            else:
                self._early.append(data)
            return
        seen = self._tail + data
        end = seen.rfind(_HEADER_END)
        if end >= 0:
            # Headers complete; whatever follows the last header block starts the next request's clock.
            if end + len(_HEADER_END) < len(seen):
                self._awaiting(self._loop.time())  # a new request starts: to the back of the line
            else:
                self._awaiting_since = None
                self._guard.waiting.pop(self, None)
        elif self._awaiting_since is None:
            self._awaiting(self._loop.time())
        self._tail = seen[-3:]
        if self._handler is not None:
            self._handler.data_received(data)
        else:
            self._early.append(data)

    # Delegation to aiohttp's handler.
    def eof_received(self) -> bool | None:
        if self._handler is not None:
            self._handler.eof_received()
        return None

    def pause_writing(self) -> None:
        # The client is not taking its answer: a slow client, evictable, closed if it stays so.
        if self._stalled is None:
            self._stalled = self._loop.call_later(self._guard.limits.write_stall_timeout_s, self._stall_expired)
        self._to_back_of_line()
        if self._handler is not None:
            self._handler.pause_writing()

    def resume_writing(self) -> None:
        if self._stalled is not None:
            self._stalled.cancel()
            self._stalled = None
        if self._awaiting_since is None:
            self._guard.waiting.pop(self, None)  # busy writing again (`idle` puts it back when done)
        if self._handler is not None:
            self._handler.resume_writing()

    def _stall_expired(self) -> None:
        self._stalled = None
        log.debug("closing a connection whose client has not read its answer in time")
        self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self._release()
        if self._handler is not None:
            self._handler.connection_lost(exc)

    def _release(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._stalled is not None:
            self._stalled.cancel()
            self._stalled = None
        self._awaiting_since = None
        self._guard.waiting.pop(self, None)
        if self._counted:
            self._counted = False
            self._guard.open -= 1


class GuardedSite(web.BaseSite):
    """A TCP site whose connections go through a `ConnectionGuard`; `reuse_port` lets several serving
    processes listen on one port (the kernel spreads connections across them)."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, *, tls: ssl.SSLContext | None,
                 limits: ConnectionLimits, reuse_port: bool = False, backlog: int = 1024) -> None:
        super().__init__(runner, backlog=backlog)
        self._host, self._port = host, port
        self._tls = tls
        self._limits = limits
        self._reuse_port = reuse_port
        self.guard: ConnectionGuard | None = None

    @property
    def name(self) -> str:
        return f"https://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        asyncio.sslproto.SSLProtocol.max_size = TLS_READ_BUFFER  # this process serves small requests only
        server = self._runner.server
        assert server is not None
        self.guard = ConnectionGuard(server, self._tls, self._limits)
        self._server = await asyncio.get_running_loop().create_server(
            self.guard, self._host, self._port, backlog=self._backlog, reuse_address=True,
            reuse_port=self._reuse_port, family=socket.AF_INET if ":" not in self._host else socket.AF_INET6)

    @property
    def port(self) -> int:
        server = self._server
        assert isinstance(server, asyncio.Server)
        return int(server.sockets[0].getsockname()[1])
