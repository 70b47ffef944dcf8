"""A method the API does not know (`curl -X FOO`) is a 405 `MethodNotAllowed` `Status`, as kube-apiserver says it.

aiohttp's C parser (llhttp) knows a fixed list of methods and refuses any other token before a route sees the
request, so `curl -k -X FOO https://adapter/apis` got a 400 `BadRequest` "malformed HTTP request": the client
was told its request was broken, where Go's server takes any token as a method and kube-apiserver answers
405, saying which methods are served. A request line that is not HTTP (a method with a character no token
has, no version) stays a 400 `BadRequest`. Sent as raw bytes over TLS to the guarded listener, and as curl
sends it to `serve --insecure-dev`; the parser's side is checked with hypothesis on the real parser.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage
from hypothesis import example, given, settings
from hypothesis import strategies as st

from autoscaler.api.connection_room import ConnectionGuard
from autoscaler.api.connections import ConnectionLimits
from autoscaler.api.unknown_method import UnknownMethod
from tests.api.builders import Pki
from tests.api.conftest import SecuredApi
from tests.api.raw_http import exchange, exchange_raw
from tests.support.ports import free_port
from tests.support.processes import running

TCHARS = "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
"""RFC 9110's `tchar`: what a method may be made of."""



def assert_status(headers: dict[str, list[str]], body: bytes, code: int, reason: str) -> dict[str, object]:
    assert headers.get("cache-control") == ["no-cache, private"], headers
    assert headers.get("x-content-type-options") == ["nosniff"], headers
    assert "server" not in headers, headers
    assert headers.get("content-type") == ["application/json; charset=utf-8"], headers
    answer: dict[str, object] = json.loads(body)
    assert {k: answer[k] for k in ("kind", "apiVersion", "status", "reason", "code")} == {
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code}
    return answer


@pytest.mark.parametrize("method", ["FOO", "BREW", "get", "X-CUSTOM_1"])
async def test_an_unknown_method_is_a_405_status_naming_it(raw_api_port: int, pki: Pki, method: str) -> None:
    status, headers, body = await exchange(
        raw_api_port, pki, f"{method} /apis HTTP/1.1\r\nHost: adapter\r\nConnection: close\r\n\r\n".encode())
    assert status == 405
    answer = assert_status(headers, body, 405, "MethodNotAllowed")
    assert f"method {method} " in str(answer["message"]), answer
    assert headers.get("allow") == ["GET,HEAD"], headers  # RFC 9110 15.5.6: a 405 says what is served
    assert headers.get("connection") == ["close"], headers


@pytest.mark.parametrize("raw", [
    pytest.param(b"G@T /apis HTTP/1.1\r\nHost: adapter\r\n\r\n", id="not-a-token"),
    pytest.param(b"FOO\r\nHost: adapter\r\n\r\n", id="no-target"),
    pytest.param(b"FOO /apis\r\nHost: adapter\r\n\r\n", id="no-version"),
    pytest.param(b"FOO /apis HTTP/1.1 x\r\nHost: adapter\r\n\r\n", id="bad-version"),
])
async def test_a_request_line_that_is_not_http_stays_a_400_status(raw_api_port: int, pki: Pki, raw: bytes) -> None:
    status, headers, body = await exchange(raw_api_port, pki, raw)
    assert status == 400
    assert_status(headers, body, 400, "BadRequest")


@pytest.mark.parametrize(("raw", "status_line"), [
    pytest.param(b"FOO /apis HTTP/1.1\r\nHost: adapter\r\n\r\n", b"HTTP/1.1 405 Method Not Allowed\r\n",
                 id="unknown-method"),
    pytest.param(b"G@T /apis HTTP/1.1\r\nHost: adapter\r\n\r\n", b"HTTP/1.1 400 Bad Request\r\n", id="not-a-token"),
    pytest.param(b"GET /apis HTTP/1.1\r\nHost: adapter\r\nX: " + b"x" * 9000 + b"\r\n\r\n",
                 b"HTTP/1.1 431 Request Header Fields Too Large\r\n", id="field-too-long"),
])
async def test_a_request_the_parser_refuses_is_answered_on_an_http_1_1_status_line(
        raw_api_port: int, pki: Pki, raw: bytes, status_line: bytes) -> None:
    """As every other answer, and as Go's server writes its parse errors: aiohttp's error path answered on
    `HTTP/1.0`, the version it gives a request it could not read."""
    answer = await exchange_raw(raw_api_port, pki, raw)
    assert answer.startswith(status_line), answer[:200]


async def test_an_unknown_method_is_refused_before_credentials_as_connect_is(secured: SecuredApi) -> None:
    status, headers, body = await exchange(
        secured.port, secured.pki, b"FOO /apis HTTP/1.1\r\nHost: adapter\r\nConnection: close\r\n\r\n")
    assert status == 405
    assert_status(headers, body, 405, "MethodNotAllowed")
    assert secured.kube.requests == []  # no resource is served with it: nothing to authorize


def test_curl_with_an_unknown_method_reads_a_405_status(tmp_path: Path) -> None:
    """What a platform engineer sees: `curl -k -X FOO` against `serve --insecure-dev`."""
    targets, log, listen = tmp_path / "targets.yaml", tmp_path / "serve.log", free_port()
    targets.write_text("runtimes:\n  - namespace: default\n    deployment: demo\n"
                       "    pods: [{name: demo-0, url: \"http://127.0.0.1:9/metrics\"}]\n")
    args = ["autoscaler.cli", "serve", "--insecure-dev", "--workers", "0", "--listen", f"127.0.0.1:{listen}",
            "--targets", str(targets)]
    with running(args, f"https://127.0.0.1:{listen}/healthz", log):
        done = subprocess.run(["curl", "-sk", "-i", "-X", "FOO", f"https://127.0.0.1:{listen}/apis"],
                              capture_output=True, text=True, timeout=30, check=True)
    head, _, body = done.stdout.replace("\r\n", "\n").partition("\n\n")
    assert head.split()[:2] == ["HTTP/1.1", "405"], done.stdout
    assert "x-content-type-options: nosniff" in head.lower(), head
    assert json.loads(body)["reason"] == "MethodNotAllowed", body


@given(method=st.text(TCHARS, min_size=1, max_size=20))
@example(method="FOO")
@example(method="GET")
@settings(max_examples=200, deadline=None)
def test_the_parser_takes_every_token_as_a_method_or_refuses_it_as_unknown(method: str) -> None:
    """Any token: the real parser (aiohttp's, as the adapter wraps it) reads the request, or refuses it as a
    method not served, naming it; never as a malformed request."""
    raw = f"{method} /apis HTTP/1.1\r\nHost: adapter\r\n\r\n".encode()
    try:
        messages = asyncio.run(_parsed(raw))
    except UnknownMethod as refused:
        assert refused.method == method
    else:
        assert [message.method for message in messages] == [method]  # type: ignore[attr-defined]


@given(method=st.text(TCHARS, min_size=1, max_size=10), bad=st.sampled_from("@()<>,;:\\\"/[]?={}\x7f"))
@settings(max_examples=100, deadline=None)
def test_a_method_with_a_character_no_token_has_is_malformed(method: str, bad: str) -> None:
    raw = f"{method}{bad} /apis HTTP/1.1\r\nHost: adapter\r\n\r\n".encode()
    with pytest.raises(BadHttpMessage):
        asyncio.run(_parsed(raw))


async def _parsed(raw: bytes) -> list[object]:
    """`raw` read by a serving connection's parser."""
    guard = ConnectionGuard(web.Server(_never), None, ConnectionLimits())
    handler = guard.make_handler()
    parser = handler._parser  # the wrapped parser (`header_budget`), as the connection feeds it
    assert parser is not None
    fed = parser.feed_data(raw)
    return [message for message, _payload in fed[0]]


async def _never(request: web.BaseRequest) -> web.StreamResponse:
    raise AssertionError("not served")
