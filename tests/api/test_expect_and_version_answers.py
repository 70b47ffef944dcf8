"""An `Expect` the API cannot meet, and an HTTP version it does not speak, are answered as `Status`es too.

`Expect: foo` got aiohttp's own `417 Expectation Failed` in text ("Unknown Expect: foo"), without kube's
`Cache-Control` and `X-Content-Type-Options` that the README promises for every answer; `GET /apis HTTP/2.0`
on an HTTP/1 connection was served, its answer headed `HTTP/2.0 200` in HTTP/1 framing, where Go's server,
kube-apiserver's, refuses it: 505 "unsupported protocol version". Raw bytes over TLS to the guarded listener,
through aiohttp's routing and the serving worker's fast dispatch.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.api.builders import DEPLOYMENT, NAMESPACE, Pki
from tests.api.conftest import SecuredApi
from tests.api.raw_http import exchange

METRIC = (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{NAMESPACE}/modelmesh_desired_replicas"
          f"?labelSelector=deployment%3D{DEPLOYMENT}")



def status_of(headers: dict[str, list[str]], body: bytes) -> dict[str, object]:
    assert headers.get("cache-control") == ["no-cache, private"], headers
    assert headers.get("x-content-type-options") == ["nosniff"], headers
    assert "server" not in headers, headers
    assert headers.get("content-type") == ["application/json; charset=utf-8"], headers
    assert headers.get("connection") == ["close"], headers  # as Go's server: nothing more is read
    answer: dict[str, object] = json.loads(body)
    assert (answer["kind"], answer["apiVersion"], answer["status"]) == ("Status", "v1", "Failure"), answer
    return answer


@pytest.mark.parametrize("path", ["/apis", METRIC, "/no/such/path"])
async def test_an_expectation_not_met_is_a_417_status(raw_api_port: int, pki: Pki, path: str) -> None:
    status, headers, body = await exchange(
        raw_api_port, pki, f"GET {path} HTTP/1.1\r\nHost: adapter\r\nExpect: foo\r\n\r\n".encode())
    assert status == 417
    answer = status_of(headers, body)
    assert answer["code"] == 417
    assert "reason" not in answer  # metav1 has none for 417: StatusReasonUnknown, omitted
    assert "Expect: 'foo'" in str(answer["message"]) and "100-continue" in str(answer["message"]), answer


async def test_expect_100_continue_is_still_met(raw_api_port: int, pki: Pki) -> None:
    status, _headers, body = await exchange(
        raw_api_port, pki, b"GET /apis HTTP/1.1\r\nHost: adapter\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n")
    assert status == 100  # then the answer itself
    assert b'"kind": "APIGroupList"' in body, body


@pytest.mark.parametrize("version", ["2.0"])  # llhttp refuses others as malformed: a 400 `Status`
async def test_an_http_version_after_1_is_a_505_status(raw_api_port: int, pki: Pki, version: str) -> None:
    status, headers, body = await exchange(
        raw_api_port, pki, f"GET /apis HTTP/{version}\r\nHost: adapter\r\n\r\n".encode())
    assert status == 505
    answer = status_of(headers, body)
    assert answer["code"] == 505
    assert f"HTTP/{version}" in str(answer["message"]) and "HTTP/1.1" in str(answer["message"]), answer


async def test_neither_waits_for_credentials(secured: SecuredApi) -> None:
    """Refused for how the request is written, before authentication, as a request aiohttp cannot parse."""
    for raw, code in [(b"GET /apis HTTP/1.1\r\nHost: adapter\r\nExpect: foo\r\n\r\n", 417),
                      (b"GET /apis HTTP/2.0\r\nHost: adapter\r\n\r\n", 505)]:
        status, headers, body = await exchange(secured.port, secured.pki, raw)
        assert status == code
        status_of(headers, body)
    assert secured.kube.requests == []


async def test_the_505_is_written_on_an_http_1_1_status_line(raw_api_port: int, pki: Pki) -> None:
    """The 505 was written on an `HTTP/2.0 505` status line in HTTP/1 framing (aiohttp writes the request's
    version), which an HTTP/1 client cannot read (Python's http.client raises UnknownProtocol); Go's server
    writes `HTTP/1.1 505`."""
    reader, writer = await asyncio.open_connection("127.0.0.1", raw_api_port, ssl=pki.client_context())
    writer.write(b"GET /apis HTTP/2.0\r\nHost: adapter\r\n\r\n")
    await writer.drain()
    status_line = await asyncio.wait_for(reader.readline(), 5)
    writer.close()
    assert status_line.startswith(b"HTTP/1.1 505 "), status_line
