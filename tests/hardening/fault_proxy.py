"""An HTTP proxy in front of the fake Kubernetes API for one client: the network between one replica and the
API server, which a test can make slow or broken for that replica alone.

Rules match the method and a regular expression searched in the path, first match wins:
- `hold_answer(seconds)`: the request reaches the server at once (the write takes effect) but the answer is
  held, as on a congested return path: the client sees a slow success, or its own timeout;
- `refuse(status)`: answered by the proxy, never forwarded, as a partition that still fails fast.
A client that gives up closes its connection; the proxy's handler is then cancelled, like any server's.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

import aiohttp
from aiohttp import web

_HOP_BY_HOP = {"host", "connection", "keep-alive", "transfer-encoding", "content-length", "upgrade"}


@dataclass(frozen=True, slots=True)
class _Rule:
    method: str | None
    pattern: re.Pattern[str]
    hold_s: float = 0.0
    refuse: int | None = None

    def applies(self, request: web.Request) -> bool:
        return (self.method is None or self.method == request.method) and bool(self.pattern.search(request.path))


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.rules: list[_Rule] = []
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.url = ""

    async def __aenter__(self) -> FaultProxy:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        self._session = aiohttp.ClientSession()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def hold_answer(self, path_regex: str, seconds: float, method: str | None = None) -> None:
        self.rules.insert(0, _Rule(method, re.compile(path_regex), hold_s=seconds))

    def refuse(self, path_regex: str, status: int = 503, method: str | None = None) -> None:
        self.rules.insert(0, _Rule(method, re.compile(path_regex), refuse=status))

    def clear(self) -> None:
        self.rules.clear()

    async def _forward(self, request: web.Request) -> web.Response:
        rule = next((rule for rule in self.rules if rule.applies(request)), None)
        if rule is not None and rule.refuse is not None:
            return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                      "message": "refused by the test's fault proxy", "code": rule.refuse},
                                     status=rule.refuse)
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        async with self._session.request(request.method, self.upstream + request.path_qs, headers=headers,
                                         data=await request.read()) as upstream:
            body = await upstream.read()
            status, content_type = upstream.status, upstream.content_type
        if rule is not None and rule.hold_s:
            await asyncio.sleep(rule.hold_s)
        return web.Response(body=body, status=status, content_type=content_type)
