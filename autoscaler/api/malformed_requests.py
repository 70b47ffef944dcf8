"""Answers to requests the guarded listener's connections cannot serve as they came, given before any route or
credential, as kube-apiserver's Go server gives them, with kube's headers and no `Server` (`status.ApiResponse`):

- oversized request lines or headers (a line or field over `max_line_size`, more than `max_header_fields` fields,
  a header block over `max_header_bytes`: `header_budget.py`): a 431 `Status` with reason `BadRequest`, its
  message naming the limit that was hit;
- a method the parser does not know (`curl -X FOO`), or `CONNECT`: a 405 `MethodNotAllowed` (`unknown_method.py`);
- a request line without a version, or of HTTP/2.0; a target that is not a path (`OPTIONS *`, `CONNECT host:port`):
  `before_routing`;
- any other unparseable request: a 400 `Status`, logged once per interval in one short WARNING line, never with
  the request or a traceback (`client_errors.py`).

Each answer says `Connection: close`, as Go's server does after a request it could not take.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Final

from aiohttp import HttpVersion11, hdrs, web
from aiohttp.http_exceptions import BadHttpMessage, HttpProcessingError, LineTooLong
from aiohttp.web_protocol import ERROR as UNREAD_REQUEST
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from autoscaler.api.client_errors import AIOHTTP_SERVER_LOGGER
from autoscaler.api.connection_memo import ConnectionMemo
from autoscaler.api.header_budget import HeaderBlockTooLarge, wrap_request_parser
from autoscaler.api.listener_log import log
from autoscaler.api.status import ApiResponse, status_response
from autoscaler.api.unknown_method import UnknownMethod


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
    queued (the connection then waits for its next request): `GuardedConnection.answered`."""

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
