"""A bound on a request's header block in bytes, which aiohttp's parser does not have.

Go's server, and so kube-apiserver, bounds only the bytes of a request's header block (`MaxHeaderBytes`,
1 MiB), never the count of its fields: the aggregator's front proxy sends one `X-Remote-Group` header per
group of the user it forwards, and a user may be in hundreds of groups. aiohttp bounds each field
(`max_field_size`) and their count (`max_headers`, 128 by default: a user in about 115 groups was refused)
but not their total. A large count alone would let a client hold count x field size (thousands x 8 KiB) in
every connection while it sends its headers slowly; so the count is raised to what a total-bytes bound allows,
and the total is bounded here.

The parser held by aiohttp's protocol handler is wrapped: the bytes fed to it since it last finished a
request's headers are counted, and past the bound it raises `HeaderBlockTooLarge`, an HTTP parse error that
aiohttp answers through the handler's `handle_error` (a 431 `Status`, `malformed_requests.StatusRequestHandler`).
Counted per read, so a header block may run past the bound by up to a read (a TLS record, 16 KiB) before it
is refused. A request's body is not counted: its bytes are fed to the same parser.

The wrapper is also where a refused method is told apart from bytes that are not HTTP (`unknown_method`): only
here are the bytes the parser failed on at hand.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Final

from aiohttp.http_exceptions import BadHttpMessage, BadHttpMethod
from aiohttp.streams import EMPTY_PAYLOAD, StreamReader

from autoscaler.api.unknown_method import refine

log = logging.getLogger(__name__)

PARSER_ATTRIBUTE: Final = "_parser"
"""Where aiohttp's request handler holds its request parser (on its base protocol, since aiohttp 3.14; 3.10 to
3.13 named it `_request_parser`, and the wrapper read `_parser` there: every connection failed)."""


def wrap_request_parser(handler: Any, limit: int) -> None:
    """Bound the header blocks `handler`'s parser reads to `limit` bytes. Where the handler holds no parser there
    (an aiohttp that moved it), it keeps its own: the field count and size still bounded, their total not, said
    once, and every connection served."""
    parser = getattr(handler, PARSER_ATTRIBUTE, None)
    if parser is None:
        _say_unbounded()
        return
    setattr(handler, PARSER_ATTRIBUTE, HeaderBudgetParser(parser, limit))


@functools.cache
def _say_unbounded() -> None:
    """Once a process: each connection would say it again."""
    log.warning("this aiohttp holds no request parser in %s: header blocks are bounded by field count and size "
                "only, not in total bytes", PARSER_ATTRIBUTE)


class HeaderBlockTooLarge(BadHttpMessage):
    """A request's header block past the bound: 431, as Go's server answers it."""

    code = 431

    def __init__(self, limit: int) -> None:
        super().__init__(f"request header fields total more than {limit} bytes")
        self.limit = limit


class HeaderBudgetParser:
    """aiohttp's request parser, counting the bytes of the header block it is reading (`feed_data`); every
    other attribute is the parser's own.

    Runs on every read of every connection: the parser's `feed_data` is held bound (`_feed`), and
    `message_consumed`, which aiohttp calls once a request, is the parser's own bound method in a slot rather
    than found through `__getattr__` (a Python call more a request: about 1% of a request's instructions,
    bench/bench_request_cost.py)."""

    __slots__ = ("_body", "_feed", "_limit", "_parser", "_unfinished", "message_consumed")

    def __init__(self, parser: Any, limit: int) -> None:
        self._parser = parser
        self._feed = parser.feed_data
        if hasattr(parser, "message_consumed"):
            self.message_consumed = parser.message_consumed
        self._limit = limit
        self._unfinished = 0
        """Bytes fed since the last read that finished a request's headers (or its body)."""
        self._body: StreamReader | None = None
        """The body the last request's headers announced, while it is being read: not header bytes."""

    def feed_data(self, data: bytes) -> Any:
        try:
            fed = self._feed(data)
        except BadHttpMethod as error:
            if self._unfinished or self._body is not None:  # `data` does not start the request
                raise
            raise refine(error, data) from error  # a method the parser does not know: 405 (`unknown_method`)
        messages = fed[0]
        if messages:
            self._unfinished = 0
            payload = messages[-1][1]
            self._body = None if payload is EMPTY_PAYLOAD or payload.is_eof() else payload
            return fed
        if self._body is not None:
            if not self._body.is_eof():
                return fed
            self._body = None  # what follows the body in this read starts the next request: counted below
        self._unfinished += len(data)
        if self._unfinished > self._limit:
            raise HeaderBlockTooLarge(self._limit)
        return fed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._parser, name)
