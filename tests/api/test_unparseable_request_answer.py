"""A request aiohttp cannot parse is answered as kube-apiserver answers: a `Status` with kube's headers.

aiohttp answers a request it cannot parse (a bad request line, a bad header, a line over the limit) from its
protocol handler, before any route or the adapter's dispatch sees it, so the answer does not pass through
`Serving`, which gives every other answer kube-apiserver's `Cache-Control: no-cache, private` and
`X-Content-Type-Options: nosniff` and takes out aiohttp's `Server` header. These tests send the raw bytes
over a real TLS socket to the guarded listener, as the adapter serves, and read what the client sees.
"""

from __future__ import annotations

import json

import pytest

from tests.api.builders import DEPLOYMENT, NAMESPACE, Pki
from tests.api.raw_http import exchange

METRIC = (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{NAMESPACE}/modelmesh_desired_replicas"
          f"?labelSelector=deployment%3D{DEPLOYMENT}")



UNPARSEABLE = [
    pytest.param(b"GET /healthz HTTP/1.1\r\nHost: adapter\r\nBroken header line\r\n\r\n", 400, id="bad-header"),
    pytest.param(b"GET /healthz HTTP/1.1 x\r\nHost: adapter\r\n\r\n", 400, id="bad-request-line"),
    pytest.param(b"\x16\x03\x01 not HTTP at all\r\n\r\n", 400, id="not-http"),
    # HTTP/0.9's request line, no version: answered "HTTP/0.9 200" with a 1.x head; Go's server refuses it
    pytest.param(b"GET /healthz\r\n\r\n", 400, id="http-0.9"),
    pytest.param(b"GET /healthz HTTP/0.9\r\nHost: adapter\r\n\r\n", 400, id="version-0.9"),
    pytest.param(b"GET /healthz HTTP/1.1\r\nHost: adapter\r\nContent-Length: x\r\n\r\n", 400,
                 id="bad-content-length"),
    pytest.param(f"GET {METRIC}&pad={'a' * 9000} HTTP/1.1\r\nHost: adapter\r\n\r\n".encode(), 431,
                 id="url-too-long"),
    pytest.param(f"GET {METRIC} HTTP/1.1\r\nHost: adapter\r\nX-Padding: {'b' * 9000}\r\n\r\n".encode(), 431,
                 id="header-too-long"),
]


@pytest.mark.parametrize(("raw", "code"), UNPARSEABLE)
async def test_an_unparseable_request_gets_a_status_with_kubes_headers(
        raw_api_port: int, pki: Pki, raw: bytes, code: int) -> None:
    status, headers, body = await exchange(raw_api_port, pki, raw)
    assert status == code
    assert headers.get("cache-control") == ["no-cache, private"], headers
    assert headers.get("x-content-type-options") == ["nosniff"], headers
    assert "server" not in headers, headers
    assert headers.get("content-type") == ["application/json; charset=utf-8"], headers
    assert headers.get("connection") == ["close"], headers  # said, as Go's server says it: nothing follows
    answer = json.loads(body)
    assert {k: answer[k] for k in ("kind", "apiVersion", "status", "reason", "code")} == {
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "BadRequest", "code": code}
    assert answer["message"]
