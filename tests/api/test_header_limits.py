"""How many request header fields, and how many header bytes, the adapter reads: as many as the aggregator sends.

kube-apiserver's front proxy sends one `X-Remote-Group` header per group of the user it forwards (client-go's
`SetAuthProxyHeaders`), so a user in a few hundred groups sends a few hundred header fields; Go's server, and
so kube-apiserver, bounds only the header block's bytes. aiohttp's default of 128 fields refused such a user
with a 431 that blamed the URL. These tests send real HTTPS requests through the front proxy's certificate and
read what the client sees, and what the SubjectAccessReview is asked.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import aiohttp
import pytest

from autoscaler.api import header_budget
from autoscaler.api.header_budget import HeaderBlockTooLarge, HeaderBudgetParser, wrap_request_parser
from tests.api.conftest import SecuredApi
from tests.api.raw_http import exchange

USER = "system:serviceaccount:ml:many-groups"


async def test_a_user_in_300_groups_through_the_front_proxy_is_served_as_all_of_them(
        secured: SecuredApi, metric_path: Callable[..., str]) -> None:
    groups = [f"team-{i:03d}" for i in range(300)]
    secured.kube.allow(groups=["team-299"], verb="list", group="external.metrics.k8s.io")
    headers = [("X-Remote-User", USER)] + [("X-Remote-Group", group) for group in groups]
    connector = aiohttp.TCPConnector(ssl=secured.context(secured.pki.proxy))
    async with aiohttp.ClientSession(connector=connector) as session, \
            session.get(secured.url + metric_path(), headers=headers) as response:
        body = await response.json()
    assert response.status == 200, body
    assert body["kind"] == "ExternalMetricValueList"
    [review] = secured.kube.access_reviews
    assert review["user"] == USER
    assert review["groups"] == [*groups, "system:authenticated"]


def header_block(fields: list[tuple[str, str]]) -> bytes:
    lines = "".join(f"{name}: {value}\r\n" for name, value in fields)
    return f"GET /apis HTTP/1.1\r\nHost: adapter\r\nConnection: close\r\n{lines}\r\n".encode()


async def test_too_many_header_fields_is_a_431_that_says_so(secured: SecuredApi) -> None:
    fields = [("X-Remote-User", USER)] + [("X-Remote-Group", f"g{i}") for i in range(5000)]
    status, headers, body = await exchange(secured.port, secured.pki, header_block(fields), cert=secured.pki.proxy)
    assert status == 431
    answer = json.loads(body)
    assert (answer["kind"], answer["code"], answer["reason"]) == ("Status", 431, "BadRequest")
    assert "header fields" in answer["message"], answer
    assert "labelSelector" not in answer["message"], answer
    assert headers.get("cache-control") == ["no-cache, private"], headers


async def test_header_fields_over_the_total_byte_bound_are_a_431_that_says_so(secured: SecuredApi) -> None:
    fields = [("X-Remote-User", USER)] + [(f"X-Padding-{i}", "p" * 8000) for i in range(100)]
    status, _, body = await exchange(secured.port, secured.pki, header_block(fields), cert=secured.pki.proxy)
    assert status == 431
    answer = json.loads(body)
    assert "header fields" in answer["message"] and "bytes" in answer["message"], answer
    assert "labelSelector" not in answer["message"], answer


class _ParserWaitingForHeaders:
    """A request parser that has not yet seen the end of a header block: it returns no message."""

    def feed_data(self, data: bytes) -> tuple[list[object], bool, bytes]:
        return [], False, b""


class _HandlerWithParserElsewhere:
    """A request handler that keeps its parser under another name, with `__slots__` (as aiohttp 3.10 to 3.13's
    `_request_parser`): the bound read `_parser` alone, and every connection failed there ("'StatusRequestHandler'
    object has no attribute '_parser'")."""

    __slots__ = ("_request_parser",)

    def __init__(self) -> None:
        self._request_parser: object = _ParserWaitingForHeaders()


def test_a_handler_whose_parser_is_elsewhere_keeps_it_and_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    header_budget._say_unbounded.cache_clear()  # said once a process: this test's process may have said it
    with caplog.at_level(logging.WARNING, logger="autoscaler.api.header_budget"):
        for _ in range(3):
            handler = _HandlerWithParserElsewhere()
            wrap_request_parser(handler, limit=1000)
            assert isinstance(handler._request_parser, _ParserWaitingForHeaders)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "not in total bytes" in said[0], said


def test_the_bound_refuses_a_header_block_past_it() -> None:
    class Handler:
        _parser: object = _ParserWaitingForHeaders()

    handler = Handler()
    wrap_request_parser(handler, limit=1000)
    parser = handler._parser
    assert isinstance(parser, HeaderBudgetParser)
    parser.feed_data(b"x" * 1000)
    with pytest.raises(HeaderBlockTooLarge):
        parser.feed_data(b"x")
