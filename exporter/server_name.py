"""No `Server` header in the exporter's answers.

aiohttp adds `Server: Python/3.11 aiohttp/3.x` to every response: it tells whoever reaches port 9187 which Python
and aiohttp releases to look up advisories for, and no scraper reads it (the adapter sends none either,
`autoscaler.api.status.ApiResponse`). Two ways answers are made, two ways it is taken out:
- the app's own (`/metrics`, `/healthz`, a 404): an `on_response_prepare` hook (`drop_server_name`), which aiohttp
  3.14 runs once it has prepared the headers and before it writes them;
- aiohttp's answer to a request its parser refuses (a 400), made by the protocol handler's `handle_error` without
  the app, so no hook runs: `NamelessRequestHandler` answers it as a `NamelessResponse`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiohttp import hdrs, web
from aiohttp.web_protocol import RequestHandler


async def drop_server_name(request: web.BaseRequest, response: web.StreamResponse) -> None:
    """An `on_response_prepare` hook: the app's answers without `Server`."""
    response.headers.popall(hdrs.SERVER, None)


class NamelessResponse(web.Response):
    """A response that takes aiohttp's `Server` out once aiohttp has put it in (`_prepare_headers`)."""

    async def _prepare_headers(self) -> None:
        await super()._prepare_headers()
        self._headers.popall(hdrs.SERVER, None)


class NamelessRequestHandler(RequestHandler):
    """aiohttp's protocol handler, whose answers to requests it cannot parse name no implementation."""

    __slots__ = ()

    def handle_error(self, request: web.BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        answer = super().handle_error(request, status, exc, message)
        if not isinstance(answer, web.Response):
            return answer
        nameless = NamelessResponse(body=answer.body, status=answer.status, reason=answer.reason,
                                    headers=answer.headers)
        nameless.force_close()  # as aiohttp's: nothing more is read after a request it could not read
        return nameless


def nameless_handlers(server: web.Server) -> Callable[[], RequestHandler]:
    """What `server()` makes for each connection, as a `NamelessRequestHandler` with `server`'s settings."""
    return lambda: NamelessRequestHandler(server, loop=asyncio.get_running_loop(), **server._kwargs)
