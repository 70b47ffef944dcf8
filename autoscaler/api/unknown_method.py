"""A method the HTTP parser does not know, told apart from a request line that is not HTTP.

aiohttp's C parser (llhttp) knows a fixed list of methods (GET, PUT, the WebDAV ones...) and refuses any other
token as `BadHttpMethod`, the error it also raises for bytes that are not HTTP at all (a TLS ClientHello on a
plain port, a method with a character no token may have). Both were answered 400 "malformed HTTP request". Go's
server takes any token (RFC 9110 section 9: a method is a `token`) and kube-apiserver answers a method it does
not serve with 405 `MethodNotAllowed`; so a refused method that is a token, in a request line that is
otherwise HTTP (`METHOD SP target SP HTTP/d.d`), becomes `UnknownMethod`, which the protocol handler answers so
(`malformed_requests.StatusRequestHandler.handle_error`).

The request line is read from the bytes the parser failed on (`refine`), which hold it whole when the client
wrote its request in one write, as HTTP clients do; a request line split across reads, or pipelined after
another request in the same read, stays a 400.
"""

from __future__ import annotations

import re
from typing import Final

from aiohttp.http_exceptions import BadHttpMethod, HttpProcessingError

_REQUEST_LINE: Final = re.compile(rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+) [^ \r\n]+ HTTP/[0-9]\.[0-9]\r?\n")
"""RFC 9112's request-line, its method a `token` (RFC 9110 5.6.2), matched at the start of the bytes."""


class UnknownMethod(HttpProcessingError):
    """A request whose method is a token the parser does not know: 405, as kube-apiserver answers it."""

    code = 405

    def __init__(self, method: str) -> None:
        super().__init__(message=f"method {method} is not served")
        self.method = method


def refine(error: BadHttpMethod, data: bytes) -> HttpProcessingError:
    """`error`, the parser's refusal of the request starting `data`, as `UnknownMethod` where `data` starts
    with a request line whose method is a token; else `error` itself."""
    line = _REQUEST_LINE.match(data)
    if line is None:
        return error
    return UnknownMethod(line[1].decode("ascii"))
