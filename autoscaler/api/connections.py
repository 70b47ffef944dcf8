"""The listening socket, guarded: connections cannot exhaust the adapter's memory.

Each open TLS connection costs a few hundred KB (asyncio's TLS buffers, aiohttp's parser), so an adapter that
keeps every connection open runs out of memory under a few thousand slow or idle ones and is OOM-killed.
Here, as Go's `http.Server` does for kube-apiserver and other extension API servers:

- **A bound on open connections** per serving process (`--max-connections`). At the bound, a new connection
  waits in line, before any TLS handshake (an accepted socket costs next to nothing), for the next place to
  free, first come first served, and a place is freed for it (`ConnectionGuard.make_room`; which connection
  goes, in what order, is `choose_room`'s): a connection whose last answer was a 4xx (a bad token's 401, a
  denied user's 403, a 429) first, so a client refused for who it is or how fast it asks cannot keep the
  places from clients that are served (the security review's case: one looping on instant 401s in every
  place, reconnecting at once, got KEDA's new connection reset); then a slow or idle one (kept alive after its
  last answer; Go's server closes idle connections on its own clock, and HTTP clients reconnect). A connection
  with a request in flight is never closed to make room, nor one whose answer is not yet handed to the kernel
  unless its client has stopped reading its answers. The line is as long as the bound and a connection waits in
  it for the header timeout at most; when it is full, or no place is to come, the new connection is closed as it
  is accepted.
  Each client address has a share of the places (a quarter of the bound, as of the TokenReviews under way:
  `peer_share.py`): a new connection from an address under its share goes first in line, takes the line place of
  an address over its share when the line is full, and an idle place of an address over its share makes room
  first; so one client opening many times the bound cannot keep another address out.
- **A TLS handshake and header read timeout** (`--header-read-timeout`): the handshake, and then the complete
  header block of each request, must arrive within it, counted from the connection's start or from the first
  byte of a request. A slow-header client ("slowloris") is disconnected.
- **An idle keep-alive timeout** (`--keepalive-timeout`): aiohttp closes a connection idle between requests.
- **A stalled-answer timeout**: a client that stops reading (pipelined requests, answers never read) stalls
  its connection in a write that would never end; from the moment the answer backs up it is a slow client,
  first in line to make room, and it is closed when it has taken nothing for `write_stall_timeout_s`.
- **Oversized request lines or headers** (a line or field over `max_line_size`, more than `max_header_fields`
  fields, a header block over `max_header_bytes`: `header_budget.py`) are refused with a Kubernetes `Status`,
  code 431 (as Go answers for headers over its limit) with reason `BadRequest` (metav1 has no reason of its
  own for 431, and a client must not retry it unchanged), its message naming the limit that was hit; a method
  the parser does not know (`curl -X FOO`) with a 405 `MethodNotAllowed` (`unknown_method.py`); any other
  unparseable request with a 400 `Status`, logged once per interval in one short WARNING line, never with the
  request or a traceback (`client_errors.py`). Either carries kube-apiserver's headers and `Connection: close`,
  as every answer of the API does.

TLS is negotiated here (`loop.start_tls`) rather than by the server socket, which is what makes refusing
before the handshake possible; aiohttp's request handler then runs unchanged on the TLS transport.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import contextlib
import logging
import socket
import ssl
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

from aiohttp import HttpVersion11, hdrs, web
from aiohttp.http_exceptions import BadHttpMessage, HttpProcessingError, LineTooLong
from aiohttp.web_protocol import ERROR as UNREAD_REQUEST
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from autoscaler.api.client_errors import AIOHTTP_SERVER_LOGGER
from autoscaler.api.connection_memo import ConnectionMemo
from autoscaler.api.handshake_refusals import HandshakeRefusals
from autoscaler.api.header_budget import HeaderBlockTooLarge, wrap_request_parser
from autoscaler.api.peer_share import PeerCounts
from autoscaler.api.status import ApiResponse, status_response
from autoscaler.api.unknown_method import UnknownMethod
from exporter.accept_limit import quiet_accept_errors
from exporter.listen import ListenError, bind_listeners

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
    tls_shutdown_timeout_s: float = 5.0
    """How long a closing connection waits for its client's TLS close_notify before it is dropped (asyncio's
    default, 30 s, let a client that never answers hold a place that long after it was told to go)."""
    max_line_size: int = 8190
    """Longest request line (URL) or header line accepted, bytes (aiohttp's and nginx's default)."""
    max_field_size: int = 8190
    max_header_fields: int = 2048
    """Header fields a request may have. The front proxy sends one `X-Remote-Group` per group of the user it
    forwards; aiohttp's default, 128, refused a user in about 115 groups. Go's server counts no fields, only
    bytes (`max_header_bytes`); the count still bounds what the parser keeps per field (about 250 bytes of
    Python objects each, so 2048 tiny fields cost about 500 KB)."""
    max_header_bytes: int = 256 * 1024
    """Bytes of a request's header block (`header_budget.py`): 2048 fields of 128 bytes. Go's server allows
    1 MiB, but aiohttp keeps each field twice (bytes and text) besides its objects: a request's headers held
    while they arrive cost about 1.2 MB at most (tracemalloc, 2048 fields of 120 bytes), where aiohttp's
    default 128 fields of 8 KiB each allowed about 2 MB."""


class StatusRequestHandler(RequestHandler, ConnectionMemo):
    """aiohttp's protocol handler, answering requests it cannot parse with a `Status` instead of text (with
    kube-apiserver's headers, as every answer: `status.ApiResponse`), and keeping what authentication found out
    about the connection (`ConnectionMemo`). aiohttp answers these from here (`handle_error`, called by its
    `_make_error_handler`) without the server's request handler, so neither the app's routes nor the serving
    worker's dispatch (`app.Serving`) see them."""

    line_limit: int = 8190
    """The longest request line or header field accepted (`ConnectionLimits`), named in the 431's message."""
    fields_limit: int = 2048
    """The most header fields a request may have (`ConnectionLimits.max_header_fields`), named in the 431's
    message."""
    on_answered: Callable[[int, bool], None] | None = None
    """Called when an answer is handed to the transport, with its status and whether no other request is
    queued (the connection then waits for its next request): `_GuardedConnection.answered`."""

    def bound_header_bytes(self, limit: int) -> None:
        """Refuse a request whose header block is over `limit` bytes (`header_budget.py`): aiohttp bounds each
        field and their count, not their total."""
        wrap_request_parser(self, limit)

    def log_access(self, request: BaseRequest, response: web.StreamResponse, time: float | None) -> None:
        """aiohttp calls this as the last step of every answer (`finish_response`, written or not), so it is
        where the connection learns that it waits for its next request. Hooked here rather than by wrapping
        `finish_response`: that added a coroutine layer to every request (`bench/bench_request_cost.py`)."""
        if self._logging_enabled:  # never, as the adapter serves (`access_log=None`); aiohttp's own test
            super().log_access(request, response, time)
        if self.on_answered is not None:
            self.on_answered(response.status, not self._messages)

    def handle_error(self, request: BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        # Which limit it was, said apart: a user in many groups (one X-Remote-Group each, from the front proxy)
        # must not be told that the URL is too long
        if isinstance(exc, LineTooLong):
            code, text = 431, (f"the request line (the URL with its query) or a header field is longer than "
                                f"{self.line_limit} bytes; an external metric's labelSelector names one runtime "
                                "(deployment=<Deployment name>), far shorter: check the URL and headers the "
                                "client sends")
        elif isinstance(exc, HeaderBlockTooLarge):
            code, text = 431, (f"the request's header fields total more than {exc.limit} bytes; check the "
                                "headers the client sends")
        elif isinstance(exc, BadHttpMessage) and "too many headers" in str(exc).lower():
            code, text = 431, (f"the request has more than {self.fields_limit} header fields; check the headers "
                                "the client sends (the front proxy sends one X-Remote-Group per group of the "
                                "user)")
        elif isinstance(exc, UnknownMethod):
            code, text = 405, ""  # `method_not_served`'s, below
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
        if getattr(request, "_message", None) is UNREAD_REQUEST:
            # aiohttp's stand-in for a request it could not read is HTTP/1.0, the version its answer's status line
            # took (`curl -X FOO` read `HTTP/1.0 405`, every other answer being HTTP/1.1); Go's server writes its
            # parse errors on HTTP/1.1's. A request that was read (a handler's error) keeps its own version.
            _made_http_1_1(request)
        # kube's headers and no `Server`, as every other answer (`ApiResponse`); `Connection: close` said, as Go's
        # server says it after a request it could not read
        if isinstance(exc, UnknownMethod):
            return method_not_served(exc.method)
        return closing_status(code, text)


RequestHandlerFunction = Callable[[BaseRequest], Awaitable[web.StreamResponse]]


def before_routing(handler: RequestHandlerFunction) -> RequestHandlerFunction:
    """`handler`, for requests of HTTP/1.0 and later whose target is a path; the others answered here, with
    kube's headers and no `Server`, as every answer (`status.ApiResponse`):

    - a request line without a version (`GET /healthz`): aiohttp's parser takes it as HTTP/0.9 and the request
      was served, its answer headed `HTTP/0.9 200`; Go's server, and so kube-apiserver, refuses it as malformed;
    - a request line of HTTP/2.0 (not HTTP/2's preface, which aiohttp does not serve): served, its answer
      headed `HTTP/2.0 200` in HTTP/1's framing; Go's server answers 505 "unsupported protocol version";
    - `OPTIONS *` (RFC 9112's asterisk form: the server itself, not a resource): Go's server answers it before
      any handler, 200 with `Content-Length: 0`; aiohttp's router matched no route and answered `404: Not Found`
      as text, with its `Server` header and without kube's;
    - `CONNECT host:port` (the authority form: a tunnel, which the API does not serve): a 405 `Status`, the
      connection closed; aiohttp answered it as `OPTIONS *`. (Other methods with a target that is not a path,
      `GET *`, are refused by aiohttp's parser: a 400 `Status`, `StatusRequestHandler.handle_error`.)

    A plain function, not a coroutine around the handler: it returns the handler's awaitable, so a request pays
    one call and two comparisons, not a coroutine layer."""

    def versioned(request: BaseRequest) -> Awaitable[web.StreamResponse]:
        if request.version.major != 1:  # 0.9 (no version), or 2.0 and later: as Go's server, any 1.x is served
            return _malformed_version(request)
        if request.method in _NOT_ROUTED and request.raw_path[:1] != "/" and request.path[:1] != "/":
            return _not_routed(request)  # not `OPTIONS http://host/apis` (absolute form: a path, routed)
        return handler(request)

    return versioned


_NOT_ROUTED: Final = frozenset({hdrs.METH_OPTIONS, hdrs.METH_CONNECT})
"""The methods whose request target may be something other than a path (asterisk, authority form)."""


async def _not_routed(request: BaseRequest) -> web.StreamResponse:
    """`before_routing`'s answer to a request whose target is not a path."""
    if request.method == hdrs.METH_CONNECT:
        return method_not_served(hdrs.METH_CONNECT)
    if request.raw_path == "*":
        return ApiResponse(status=200)  # Go's `globalOptionsHandler`: no body
    return closing_status(400, "malformed HTTP request: the request target must be a path, as /apis")


async def _malformed_version(request: BaseRequest) -> web.StreamResponse:
    # Logged as aiohttp logs a request it cannot parse, so the client-error filter (api/client_errors.py) makes
    # it one WARNING a minute: a client looping on it cannot fill the log
    version = f"HTTP/{request.version.major}.{request.version.minor}"
    error = BadHttpMessage(f"malformed HTTP version: {version}")
    logging.getLogger(AIOHTTP_SERVER_LOGGER).error("Error handling request from %s", request.remote, exc_info=error)
    if request.version.major > 1:
        response = closing_status(505, f"unsupported protocol version {version}: this API serves HTTP/1.1 (and 1.0)")
        await response.prepare(_on_http_1_1(request))  # prepared once: aiohttp's own prepare then keeps it
        return response
    return closing_status(400, "malformed HTTP version: HTTP/1.0 or later is served")


def _on_http_1_1(request: BaseRequest) -> BaseRequest:
    """`request` as HTTP/1.1, for the status line of its answer: aiohttp writes the request's version there, and
    `HTTP/2.0 505` in HTTP/1 framing is a line no HTTP/1 client reads (Python's http.client raises
    UnknownProtocol); Go's server writes `HTTP/1.1 505`. `clone` takes no version: the copy's is set
    (`_made_http_1_1`)."""
    copy = request.clone()
    return copy if _made_http_1_1(copy) else request


def _made_http_1_1(request: BaseRequest) -> bool:
    """Make `request` HTTP/1.1, the version its answer's status line takes, where aiohttp keeps it (`_version`,
    read from the message at construction); False for an aiohttp that keeps it elsewhere, whose request stays as
    it came (the status line as before, the `Status` the same)."""
    if not hasattr(request, "_version"):
        return False
    request._version = HttpVersion11
    return True


def method_not_served(method: str) -> web.StreamResponse:
    """The 405 to a method no path of the API serves (`CONNECT`, a method the parser does not know:
    `unknown_method`), answered before routing and credentials, as for `OPTIONS *`: no resource is asked for."""
    response = closing_status(405, f"method {method} is not served: this API answers GET (and HEAD) on paths "
                                   "such as /apis")
    response.headers[hdrs.ALLOW] = "GET,HEAD"  # RFC 9110 15.5.6: a 405 says which methods are served
    return response


def closing_status(code: int, text: str) -> web.StreamResponse:
    """A `Status` that closes the connection, and says so (`Connection: close`), as Go's server says it after a
    request it could not take: nothing more is read from it."""
    response = status_response(code, text, {hdrs.CONNECTION: "close"})
    response.force_close()
    return response


class ConnectionGuard:
    """A protocol factory for `loop.create_server`: counts, upgrades to TLS, times headers, hands over, and at
    the bound decides which connection makes room for a new one (`make_room`)."""

    def __init__(self, server: web.Server, tls: ssl.SSLContext | None, limits: ConnectionLimits) -> None:
        self.server = server
        self.tls = tls
        self.limits = limits
        self.refused = 0
        self.evicted = 0
        self.closed_after_answer = 0
        self.closing = 0
        """Connections told to go (at once, or after their current answer) that have not yet gone: places coming."""
        self.waiting: dict[_GuardedConnection, None] = {}
        """Open connections waiting for request headers (a handshake, a slow client, one idle after its last
        answer) or stalled in a write, longest-waiting first (dicts keep insertion order)."""
        self.counted: dict[_GuardedConnection, None] = {}
        """Every connection holding a place, oldest first."""
        self.promised: deque[_GuardedConnection] = deque()
        """New connections accepted at the bound, held before their TLS handshake in line for the next place to
        free; first come, first admitted, those of an address under its share first (`make_room`,
        `place_freed`)."""
        self.held = PeerCounts(limits.max_connections)
        """Places held, by the client's address, and each address's share of them (`make_room`)."""
        self.lined = PeerCounts(limits.max_connections)
        """New connections in line (`promised`), by the client's address."""
        self.handshake_refusals = HandshakeRefusals(log)
        """The handshakes refused, in the log: one line per cause a minute (`handshake_refusals`)."""
        self._handler_kwargs: dict[str, Any] = {
            "keepalive_timeout": limits.keepalive_timeout_s,
            "max_line_size": limits.max_line_size,
            "max_field_size": limits.max_field_size,
            "max_headers": limits.max_header_fields,
            "access_log": None,
        }

    def __call__(self) -> asyncio.Protocol:
        return _GuardedConnection(self)

    def make_handler(self) -> StatusRequestHandler:
        handler = StatusRequestHandler(self.server, loop=asyncio.get_running_loop(), **self._handler_kwargs)
        handler.line_limit = min(self.limits.max_line_size, self.limits.max_field_size)
        handler.fields_limit = self.limits.max_header_fields
        handler.bound_header_bytes(self.limits.max_header_bytes)
        return handler

    @property
    def open(self) -> int:
        """Connections holding a place."""
        return len(self.counted)

    def make_room(self, peer: str) -> bool:
        """At the bound, for a new connection from `peer`: whether it may wait in line (`promised`), before its
        TLS handshake, for the next place to free (False: refused, closed at once). Places go to the line first
        come, first served, so that a client that reconnects at once cannot take the place freed for a client
        that came before it. The line is as long as the bound at most, and a connection waits in it for
        `header_read_timeout_s` at most; an accepted socket not yet in TLS costs next to nothing.

        Each client address has a share of the places, a quarter of the bound (`peer_share.peer_share`, as the
        TokenReviews under way: several clients may share an address, and one address holding its share leaves
        three quarters to the others). A new connection from an address that holds, with its connections in
        line, less than its share is ahead of the others: it goes before them in line (`place_freed`), and when
        the line is full it takes the place in line of the newest connection of an address over its share,
        closed instead. Without it, one client opening many times the bound (reconnecting at once) kept the line
        full and every other address's new connection was refused as it was accepted. A place freed for the
        line is one of an address over its share where one is idle (`choose_room`), so its other clients keep
        theirs. The share is a fixed quarter, not the bound divided among the addresses present: behind the
        aggregation layer nearly every connection is kube-apiserver's, from one address per replica, and an
        address is never held to less than its share, so kube-apiserver keeps at least a quarter of the places
        however many other addresses connect (each replica its own quarter); with no other address at the
        bound the share changes nothing, since an address over its share is put after, never refused for it,
        and the order of places and victims among its own connections is as before.

        A place is freed for the line by `choose_room` (which connection, in what order: said there alone) and
        `tell_to_go`."""
        if len(self.promised) >= self.limits.max_connections:
            # A place is already coming for each connection in line: an address under its share can only take
            # one of theirs, that of an address over its share.
            if not self.claims_under_share(peer) or (displaced := self._displaceable()) is None:
                return False
            self.refused += 1
            displaced.leave_line()
            displaced.abort()
            return True
        decision, victim = choose_room(self.waiting, self.counted, asyncio.get_running_loop().time(),
                                       self.holds_over_share)
        if decision == "refuse":
            return False
        if victim is not None:
            self.tell_to_go(victim, decision)
        return True

    # Two measures of an address against its share, on purpose. Who may join or keep a place in the line counts
    # its claims (places held and connections in line: each in line is a place to come), or an address filling
    # the line while it holds little would count as under its share. Which place goes, and who in line is
    # admitted first, counts the places held alone (`holds_over_share`, `place_freed`): a place is what is
    # taken away or given, and an address holding nothing is never put after for the line it fills.
    def claims(self, peer: str) -> int:
        """The places `peer` holds and the connections it has in line for one."""
        return self.held.held(peer) + self.lined.held(peer)

    def claims_under_share(self, peer: str) -> bool:
        """`peer` holds, with its connections in line, fewer places than its share: a new one goes first."""
        return self.claims(peer) < self.held.share

    def holds_over_share(self, connection: _GuardedConnection) -> bool:
        """`connection`'s address holds more places than its share (its line not counted): its idle ones make
        room first."""
        return self.held.held(connection.peer) > self.held.share

    def _displaceable(self) -> _GuardedConnection | None:
        """The newest connection in line of an address that claims (holds, with its connections in line) more
        places than its share."""
        share = self.held.share
        return next((newcomer for newcomer in reversed(self.promised) if self.claims(newcomer.peer) > share), None)

    def tell_to_go(self, victim: _GuardedConnection, decision: Room) -> None:
        self.closing += 1
        victim.closing = True
        if decision == "close":
            self.evicted += 1
            victim.abort()
        else:
            self.closed_after_answer += 1
            victim.close_after_answer()

    def serve_line(self) -> None:
        """An answer was handed over while connections wait in line for more places than are coming: free
        one now if `choose_room` finds one to close (a 4xx answered, an idle connection)."""
        while len(self.promised) > self.closing:
            decision, victim = choose_room(self.waiting, self.counted, asyncio.get_running_loop().time(),
                                           self.holds_over_share)
            if victim is None:
                return
            self.tell_to_go(victim, decision)

    def place_freed(self) -> None:
        """A counted connection has gone: its place to the first connection in line of an address holding fewer
        places than its share (its line not counted: an address holding nothing is first however many it has in
        line), else to the first in line."""
        promised, held, share = self.promised, self.held, self.held.share
        while promised:
            newcomer = next((one for one in promised if held.held(one.peer) < share), promised[0])
            newcomer.leave_line()
            if newcomer.admit():
                return


Room = Literal["close", "after-answer", "wait", "refuse"]
NEW_CONNECTION_S = 1.0
"""A client's TLS handshake and first request take milliseconds on a cluster network; until then, and for at
most this long, a new connection is not closed to make room while a place is coming anyway."""


def choose_room(waiting: dict[_GuardedConnection, None], counted: dict[_GuardedConnection, None],
                now: float, over_share: Callable[[_GuardedConnection], bool] = lambda _: False,
                ) -> tuple[Room, _GuardedConnection | None]:
    """What frees a place at the bound for a connection in line (`ConnectionGuard.make_room`, `serve_line`), so
    that a client refused for who it is or how fast it asks cannot keep the places from clients that are served.
    The first that applies, in this order:

    1. close at once a waiting connection whose last answer was a 4xx (401, 403, 429: a bad token, a denied
       user, a client over its share), longest-waiting first;
    2. close after its answer a connection whose last answer was a 4xx and that has another request in flight,
       oldest first: as soon as that request is answered and the answer handed over in full (HTTP/1.1 lets a
       server close a connection between answers; a client resends what it had pipelined behind);
    3. close at once a waiting connection that is not new (answered once, or open `NEW_CONNECTION_S` or more),
       even while a place is coming: a slow client (TLS handshake or request headers not complete), one idle
       since its last answer (Go's server closes idle connections on its own clock too; an HTTP client
       reconnects for its next request), or one whose client stopped reading its answer; one whose address is
       `over_share` first, else the longest-waiting;
    4. nothing, and wait, while a place is coming: a connection told to go has not yet gone, an answer is still
       being handed over, or a request is in flight (if its answer is a 4xx, that connection goes then:
       `_GuardedConnection.answered`). A client refused at once reconnects at once: it must not take the place
       of a new client still in its TLS handshake;
    5. close at once a new waiting connection (not yet answered, open less than `NEW_CONNECTION_S`), chosen as
       in 3;
    6. refuse: no place is coming and none may go.

    A connection with a request in flight, or whose answer is still being handed over, is never closed before
    its answer is, unless its client has stopped reading its answers (`_GuardedConnection.closable`)."""
    first: _GuardedConnection | None = None
    first_new: _GuardedConnection | None = None
    first_over = first_new_over = False
    coming = False
    for connection in waiting:
        if connection.closing:
            coming = True
        elif connection.closable():
            if connection.refused:
                return "close", connection
            if connection.answered_once or now - connection.opened >= NEW_CONNECTION_S:
                if not first_over and (first is None or over_share(connection)):
                    first, first_over = connection, over_share(connection)
            elif not first_new_over and (first_new is None or over_share(connection)):
                first_new, first_new_over = connection, over_share(connection)
        else:
            coming = True  # an answer still being handed over
    for connection in counted:
        if connection.closing:
            coming = True
        elif connection.in_flight:
            if connection.refused:
                return "after-answer", connection
            coming = True
    if first is not None:
        return "close", first
    if coming:
        return "wait", None
    if first_new is not None:
        return "close", first_new
    return "refuse", None


class _GuardedConnection(asyncio.Protocol):
    def __init__(self, guard: ConnectionGuard) -> None:
        self._guard = guard
        self._loop = asyncio.get_running_loop()
        self._counted = False
        self._handler: StatusRequestHandler | None = None
        self._raw: asyncio.BaseTransport | None = None
        self._transport: asyncio.BaseTransport | None = None
        self._awaiting_since: float | None = None  # start of headers not yet complete
        self._timer: asyncio.TimerHandle | None = None
        self._stalled: asyncio.TimerHandle | None = None  # closes a connection whose answer stays backed up
        self._tail = b""
        self._early: list[bytes] = []  # decrypted before `start_tls` returned (TLS 1.3 clients send at once)
        self.refused = False
        """The last answer was a 4xx: the client was refused (a bad token, a denied user, too many requests)."""
        self.answered_once = False
        self.in_flight = False
        """A request's headers are complete and it is not yet answered (or others are queued behind it)."""
        self.opened = 0.0
        """When it took its place (loop time)."""
        self.closing = False
        """Told to go (at once, or after its current answer) to make room: its place is promised to the line."""
        self.peer = ""
        """The client's address (its share of places: `ConnectionGuard.make_room`)."""
        self._in_line = False

    # The raw TCP connection.
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        guard = self._guard
        self._raw = transport
        peername = transport.get_extra_info("peername")
        self.peer = str(peername[0]) if peername else ""
        if guard.open >= guard.limits.max_connections:
            if not guard.make_room(self.peer):
                guard.refused += 1
                transport.abort()  # type: ignore[attr-defined]
                return
            # In line, before any TLS handshake, for the next place to free (`ConnectionGuard.place_freed`).
            transport.pause_reading()  # type: ignore[attr-defined]
            guard.promised.append(self)
            guard.lined.take(self.peer)
            self._in_line = True
            self._timer = self._loop.call_later(guard.limits.header_read_timeout_s, self._promise_expired)
            return
        self._take_place(transport)

    def leave_line(self) -> None:
        """Out of the line (`ConnectionGuard.promised`): admitted, gone, or closed for another."""
        if self._in_line:
            self._in_line = False
            guard = self._guard
            guard.promised.remove(self)
            guard.lined.give_back(self.peer)

    def _take_place(self, transport: asyncio.BaseTransport) -> None:
        guard = self._guard
        guard.counted[self] = None
        guard.held.take(self.peer)
        self._counted = True
        self.opened = self._loop.time()
        self._transport = transport
        self._awaiting(self._loop.time())
        if guard.tls is None:
            self._start(transport)
        else:
            transport.pause_reading()  # type: ignore[attr-defined]  # the ClientHello is for start_tls
            self._loop.create_task(self._upgrade(transport))

    def admit(self) -> bool:
        """Given a place it was promised (`ConnectionGuard.place_freed`); False when it is gone meanwhile."""
        raw = self._raw
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if raw is None or raw.is_closing():
            return False
        self._take_place(raw)
        if self._guard.tls is None:
            raw.resume_reading()  # type: ignore[attr-defined]
        return True

    def _promise_expired(self) -> None:
        self._timer = None
        log.debug("closing a new connection whose promised place was not given up in time")
        if self._raw is not None:
            self._raw.abort()  # type: ignore[attr-defined]

    async def _upgrade(self, raw: asyncio.BaseTransport) -> None:
        try:
            secured = await self._loop.start_tls(
                raw, self, self._guard.tls, server_side=True,  # type: ignore[arg-type]
                ssl_handshake_timeout=self._guard.limits.header_read_timeout_s,
                ssl_shutdown_timeout=self._guard.limits.tls_shutdown_timeout_s)
        except (OSError, ssl.SSLError, TimeoutError, ConnectionError, RuntimeError) as error:
            self._guard.handshake_refusals.failed(self.peer, error)
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
        self._handler.on_answered = self.answered
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

    def answered(self, status: int, idle: bool) -> None:
        """An answer is handed to the transport. Once no other request is queued (`idle`) the connection waits
        for its next request, first in line to make room for a new connection once it has waited longest;
        before any other if this answer refused the client (a 4xx). Idle time is aiohttp's keep-alive
        timeout's to judge, so the header clock starts only with the next request's first byte.
        (`_to_back_of_line` inline: this runs once a request.)"""
        self.refused = 400 <= status < 500
        self.answered_once = True
        guard = self._guard
        if idle:
            self.in_flight = False
        if (idle and not self.closing and self._awaiting_since is None and self._transport is not None
                and not self._transport.is_closing()):
            waiting = guard.waiting
            waiting.pop(self, None)
            waiting[self] = None
        if guard.promised and len(guard.promised) > guard.closing:
            guard.serve_line()  # may tell this very connection to go
        if self.closing:  # nothing queued behind this answer is read or answered (aiohttp's `close`)
            self.in_flight = False
            self._loop.call_soon(self._drop_once_handed_over)

    def closable(self) -> bool:
        """May be closed at once: no request in flight (it is waiting), and its last answer handed over to the
        kernel, or its client has stopped reading it (stalled: a slow client, closed anyway in time)."""
        if self._stalled is not None:
            return True
        return not self.in_flight and self._unsent() == 0

    def _unsent(self) -> int:
        """Bytes of answers still in the process's buffers (TLS and TCP transports)."""
        unsent = 0
        for transport in (self._transport, self._raw):
            if transport is None:
                continue
            # asyncio's TLS transport, closed twice, has let go of its protocol (AttributeError)
            with contextlib.suppress(AttributeError):
                unsent += transport.get_write_buffer_size()  # type: ignore[attr-defined]
        return unsent

    def close_after_answer(self) -> None:
        """Close as soon as the request in flight is answered (aiohttp's `close`: no request pipelined behind
        it is read or answered) and the answer handed over to the kernel (`_drop_once_handed_over`)."""
        if self._handler is not None:
            self._handler.close()
        self._loop.call_soon(self._drop_once_handed_over)  # aiohttp may be between answers: it closes then

    def _drop_once_handed_over(self) -> None:
        """Close a connection told to go once its answer is out of the process's buffers. Its place does not
        wait for the client's TLS close_notify, which a client may never send (it would hold the place for
        `tls_shutdown_timeout_s`): the answer is complete by its length, and the close is a TCP FIN after it."""
        if not self._counted:
            return
        transport = self._transport
        finished = transport is not None and transport.is_closing()  # aiohttp closed it: it writes no more
        if self._stalled is not None or ((finished or not self.in_flight) and self._unsent() == 0):
            self.abort()
        else:  # an answer under way, or a client slow to take it: again shortly
            self._loop.call_later(0.05, self._drop_once_handed_over)

    def _to_back_of_line(self) -> None:
        """Evictable, after every connection that has waited longer (`ConnectionGuard.waiting` keeps order)."""
        self._guard.waiting.pop(self, None)
        self._guard.waiting[self] = None

    def abort(self) -> None:
        """Close at once (evicted, or its headers too slow); `connection_lost` releases its place."""
        self._guard.waiting.pop(self, None)
        self._awaiting_since = None
        transport = self._transport or self._raw  # the raw one: held for a promised place, before TLS
        if transport is not None:
            transport.abort()  # type: ignore[attr-defined]
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
            self.in_flight = True
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
            self.in_flight = True
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
        if self._awaiting_since is None and self.in_flight:
            self._guard.waiting.pop(self, None)  # busy writing again (`answered` puts it back when done)
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
        guard = self._guard
        guard.waiting.pop(self, None)
        self.leave_line()
        if self._counted:
            self._counted = False
            guard.counted.pop(self, None)
            guard.held.give_back(self.peer)
            if self.closing:
                guard.closing -= 1
            if guard.promised:
                guard.place_freed()


def listen_family(host: str) -> socket.AddressFamily:
    """The family to bind for `--listen HOST:PORT`: no host is every address of both families (a socket each,
    as Go's servers answer on both for a wildcard), so the kubelet and the aggregator reach the pod at an IPv6
    address too; an address is its own family's (`0.0.0.0` IPv4's, `[::]` IPv6's alone: IPV6_V6ONLY)."""
    if not host:
        return socket.AF_UNSPEC
    return socket.AF_INET6 if ":" in host else socket.AF_INET


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
        self._more_servers: list[asyncio.Server] = []

    @property
    def name(self) -> str:
        return f"https://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        asyncio.sslproto.SSLProtocol.max_size = TLS_READ_BUFFER  # this process serves small requests only
        server = self._runner.server
        assert server is not None
        server.request_handler = before_routing(server.request_handler)  # each connection's handler reads it
        self.guard = ConnectionGuard(server, self._tls, self._limits)
        loop = asyncio.get_running_loop()
        # Bound as the exporter binds (IPv4's addresses alone where IPv6 is turned off), so that at the open-file
        # limit the sockets say so once (`exporter.accept_limit`), where asyncio logged a traceback per attempt.
        try:
            sockets = bind_listeners(self._host, self._port, family=listen_family(self._host),
                                     reuse_port=self._reuse_port, backlog=self._backlog)
        except ListenError as error:
            raise (error.__cause__ or error) from None  # the caller says "cannot listen on ..." itself
        quiet_accept_errors(loop)
        servers = [await loop.create_server(self.guard, sock=sock, backlog=self._backlog) for sock in sockets]
        self._server, self._more_servers = servers[0], servers[1:]

    async def stop(self) -> None:
        if self.guard is not None:  # connections held for a promised place have no handler to close them
            for newcomer in list(self.guard.promised):
                newcomer.leave_line()
                newcomer.abort()
        for server in self._more_servers:  # the other family's; `super().stop` closes the first
            server.close()
        await super().stop()

    @property
    def port(self) -> int:
        server = self._server
        assert isinstance(server, asyncio.Server)
        return int(server.sockets[0].getsockname()[1])
