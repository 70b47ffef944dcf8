"""`OPTIONS *` and `CONNECT host:port`: answered as every other request is, with kube's headers.

Their request targets are not paths (RFC 9112's asterisk and authority forms), so aiohttp's router matched no
route, not even the catch-all, and answered its own `404: Not Found` text with `Server: Python/3.11 aiohttp/...`
and without `Cache-Control: no-cache, private` or `X-Content-Type-Options: nosniff`, which the README promises
for every answer. Go's server answers `OPTIONS *` itself, 200 with an empty body, before any handler; the API
serves no CONNECT, so that is a 405 `Status`. These tests send the bytes over a real TLS socket, as
`openssl s_client` would, without credentials, to the secured API.
"""

from __future__ import annotations

import json

from tests.api.conftest import SecuredApi
from tests.api.raw_http import exchange


def assert_kube_headers(headers: dict[str, list[str]]) -> None:
    assert headers.get("cache-control") == ["no-cache, private"], headers
    assert headers.get("x-content-type-options") == ["nosniff"], headers
    assert "server" not in headers, headers


async def test_options_asterisk_is_200_with_no_body_as_go_answers_it(secured: SecuredApi) -> None:
    status, headers, body = await exchange(
        secured.port, secured.pki, b"OPTIONS * HTTP/1.1\r\nHost: adapter\r\nConnection: close\r\n\r\n")
    assert status == 200
    assert body == b""
    assert headers.get("content-length") == ["0"], headers
    assert_kube_headers(headers)
    assert secured.kube.requests == []  # nothing to authorize: no resource, as Go's server answers it


async def test_connect_is_a_405_status_with_kubes_headers(secured: SecuredApi) -> None:
    status, headers, body = await exchange(
        secured.port, secured.pki,
        b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nConnection: close\r\n\r\n")
    assert status == 405
    assert_kube_headers(headers)
    assert headers.get("content-type") == ["application/json; charset=utf-8"], headers
    answer = json.loads(body)
    assert {k: answer[k] for k in ("kind", "apiVersion", "status", "reason", "code")} == {
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "MethodNotAllowed", "code": 405}
    assert "CONNECT" in answer["message"], answer
