"""What the log says while Prometheus fails: Prometheus's own words, and each new kind of failure of one outage.

A failure-injection run found both: a 200 answer saying `"status":"error"` was logged as `failed (parse): ...:
KeyError('data')`, Prometheus's message lost; and an outage that went from a 503 to a 500 to such an answer to a
timeout kept its first line only, naming a cause long gone. The Prometheus here is a small aiohttp server that
answers as the test says, the way a gateway or proxy in front of Prometheus does.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from autoscaler.sources import prometheus as source_module
from autoscaler.sources.prometheus import PrometheusSource
from tests.sources.static_discovery import StaticDiscovery
from tests.support.clock import SteppedClock

TIMED_OUT = {"status": "error", "errorType": "timeout", "error": "query timed out in expression evaluation"}
EXECUTION = {"status": "error", "errorType": "execution", "error": "many-to-many matching not allowed"}


class Answering:
    """The answer the next queries get: (HTTP status, JSON body), or "stall" to answer after the timeout."""

    def __init__(self) -> None:
        self.answer: tuple[int, object] | str = (200, {"status": "success",
                                                        "data": {"resultType": "vector", "result": []}})

    async def query(self, request: web.Request) -> web.Response:
        if self.answer == "stall":
            await asyncio.sleep(2)
            return web.json_response({})
        assert not isinstance(self.answer, str)
        status, body = self.answer
        return web.json_response(body, status=status)


async def source_of(aiohttp_server: AiohttpServer, answering: Answering, clock: SteppedClock) -> PrometheusSource:
    app = web.Application()
    app.router.add_get("/api/v1/query", answering.query)
    server = await aiohttp_server(app)
    discovery = StaticDiscovery.of({("team-a", "modelmesh-serving-triton"): ["a-1"]}, not_ready=["a-1"])
    return PrometheusSource(discovery, str(server.make_url("")), clock=clock, timeout_s=0.5)


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    said = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    caplog.clear()
    return said


@pytest.mark.parametrize(("body", "reason"), [(TIMED_OUT, "timeout"), (EXECUTION, "http")])
async def test_a_200_saying_status_error_is_logged_with_prometheus_own_error(
        aiohttp_server: AiohttpServer, caplog: pytest.LogCaptureFixture, body: dict[str, str], reason: str) -> None:
    answering = Answering()
    answering.answer = (200, body)
    clock = SteppedClock(time.time())
    source = await source_of(aiohttp_server, answering, clock)
    try:
        with caplog.at_level(logging.INFO, logger=source_module.__name__):
            (snapshot,) = await source.collect(clock())
    finally:
        await source.close()

    [line] = warnings_of(caplog)
    assert not snapshot.source_ok
    assert f"failed ({reason}): " in line, line
    assert f"errorType {body['errorType']!r}, error {body['error']!r}" in line, line
    assert "KeyError" not in line
    assert source.errors == {reason: 1}


async def test_an_outage_whose_failure_changes_says_each_new_failure_once(
        aiohttp_server: AiohttpServer, caplog: pytest.LogCaptureFixture) -> None:
    answering = Answering()
    clock = SteppedClock(time.time())
    source = await source_of(aiohttp_server, answering, clock)
    steps: list[tuple[int, object] | str] = [
        (503, {"status": "error", "errorType": "unavailable", "error": "not ready"}),
        (500, {"status": "error", "errorType": "internal", "error": "boom"}),
        (200, TIMED_OUT),
        "stall",
        (503, {"status": "error", "errorType": "unavailable", "error": "not ready"}),  # said already
    ]
    said: list[list[str]] = []
    try:
        with caplog.at_level(logging.INFO, logger=source_module.__name__):
            for answer in steps:
                answering.answer = answer
                for _ in range(2):  # the same failure at the next refresh says nothing more
                    (snapshot,) = await source.collect(clock())
                    assert not snapshot.source_ok
                    clock.advance(5)
                said.append(warnings_of(caplog))
    finally:
        await source.close()

    assert [len(lines) for lines in said] == [1, 1, 1, 1, 0], said
    assert "HTTP 503" in said[0][0] and "not ready" in said[0][0]
    assert "now fails otherwise (http): HTTP 500" in said[1][0] and "boom" in said[1][0]
    assert "now fails otherwise (timeout)" in said[2][0] and "query timed out" in said[2][0]
    assert "now fails otherwise (timeout)" in said[3][0] and "query timed out" not in said[3][0]


async def test_the_outage_line_says_the_values_are_unknown_not_held(
        aiohttp_server: AiohttpServer, caplog: pytest.LogCaptureFixture) -> None:
    """An operator read "holding last good samples until it answers" as values still served, while every
    runtime answered 503 "metric source down" from that refresh on (tests/e2e/test_prometheus_outage_kubectl.py):
    the line says what the HPAs see, and that the samples are kept for when it answers."""
    answering = Answering()
    answering.answer = (503, {"status": "error", "errorType": "unavailable", "error": "not ready"})
    clock = SteppedClock(time.time())
    source = await source_of(aiohttp_server, answering, clock)
    try:
        with caplog.at_level(logging.INFO, logger=source_module.__name__):
            await source.collect(clock())
            first = warnings_of(caplog)
            clock.advance(5)
            answering.answer = (500, {"status": "error", "errorType": "internal", "error": "boom"})
            await source.collect(clock())
            second = warnings_of(caplog)
    finally:
        await source.close()

    for [line] in (first, second):
        assert 'values unknown (503 "metric source down"), the HPAs hold their replicas' in line, line
        assert "holding last good samples" not in line, line


async def test_a_query_timeout_names_the_flag_and_the_docs_section(
        aiohttp_server: AiohttpServer, caplog: pytest.LogCaptureFixture) -> None:
    """A reviewer behind a slow proxy read `failed (timeout): http://...: Pool(...): Read timed out. (read
    timeout=5.0)`, urllib3's words only, where a 401 names --prometheus-token-file and a 404 --prometheus-url: the
    line, and /debug's problem, name --prometheus-timeout and where the docs say what to do."""
    answering = Answering()
    answering.answer = "stall"
    clock = SteppedClock(time.time())
    source = await source_of(aiohttp_server, answering, clock)
    try:
        with caplog.at_level(logging.INFO, logger=source_module.__name__):
            (snapshot,) = await source.collect(clock())
        [problem] = source.problems(snapshot.key)
    finally:
        await source.close()

    [line] = warnings_of(caplog)
    assert "failed (timeout): " in line, line
    for said in (line, problem.detail):
        assert "--prometheus-timeout 0.5 s" in said, said
        assert "docs/operations.md#4-optional-prometheus-and-dashboards" in said, said
