"""Backoff of failing pods and the byte cap, in-process: a local aiohttp server plays the exporters and the
refresh clock is stepped, not slept."""

from __future__ import annotations

import asyncio
import socket
from collections import Counter
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from autoscaler.model import RuntimeKey
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.scrape import ScrapeSource
from autoscaler.sources.scrape_retry import ScrapeRetries
from tests.sources.static_discovery import StaticDiscovery

KEY = RuntimeKey("default", "modelmesh-serving-demo")
ANSWERED_WITHIN_S = 10.0
"""The scrape timeout of the tests whose exporters answer: no answer on a loaded machine comes that late (an answer
stalled 2 s by hand timed out at the 2 s these tests had), and the refresh's 15 s deadline stays above it."""


def test_a_failing_pod_waits_5_10_20_40_then_60_s() -> None:
    retries = ScrapeRetries()
    now = 1000.0
    waits = []
    for _ in range(6):
        retries.failed("pod", now, "timeout", cost_s=5.0)
        wait = 0.0
        while not retries.due("pod", now + wait):
            wait += 0.5
        waits.append(wait)
        now += wait
    assert waits == [5, 10, 20, 40, 60, 60]
    assert retries.succeeded("pod") and retries.due("pod", now)
    assert not retries.succeeded("pod")


@pytest.fixture
async def exporters(aiohttp_server: AiohttpServer) -> AsyncIterator[tuple[str, Counter[str]]]:
    hits: Counter[str] = Counter()

    async def broken(request: web.Request) -> web.Response:
        hits[request.match_info["pod"]] += 1
        await asyncio.sleep(SLOW_S)
        return web.Response(status=500)

    async def declared_huge(request: web.Request) -> web.Response:
        hits["huge"] += 1
        return web.Response(body=b"# x\n" * 300_000)

    app = web.Application()
    app.router.add_get("/huge/metrics", declared_huge)
    app.router.add_get("/{pod}/metrics", broken)
    server = await aiohttp_server(app)
    yield str(server.make_url("")), hits


def inventory(base: str, *pods: str) -> StaticDiscovery:
    return StaticDiscovery([RuntimeInventory(KEY, tuple(
        PodTarget(name=pod, ready=True, url=f"{base}/{pod}/metrics") for pod in pods))])


async def refreshed_each_second_for_30_s(source: ScrapeSource) -> None:
    """One refresh a second for 30 s, then closed: a pod that keeps failing slowly is due at 1000, 1005, 1015."""
    try:
        for now in range(1000, 1031):
            await source.collect(float(now))
    finally:
        await source.close()


async def test_a_timeout_is_backed_off_however_short(aiohttp_server: AiohttpServer) -> None:
    """A reviewer: a hung exporter cut off by a scrape timeout under a second (or by the refresh's deadline just
    after its scrape began) was read as a cheap failure and tried at every refresh, holding a slot each time."""
    hits: Counter[str] = Counter()

    async def hung(request: web.Request) -> web.Response:
        hits["hung"] += 1
        await asyncio.sleep(30)
        return web.Response(status=500)

    app = web.Application()
    app.router.add_get("/{pod}/metrics", hung)
    server = await aiohttp_server(app)
    source = ScrapeSource(inventory(str(server.make_url("")), "hung"), timeout_s=0.2)
    await refreshed_each_second_for_30_s(source)
    # Counted as the source sent them: a request cut off at 0.2 s may never reach the exporter's handler on a
    # loaded machine (0 hits with the handler stalled by hand), so the exporter's count says nothing of the tries.
    assert source.reads == 3
    assert source.errors == {"timeout": 3}
    assert hits["hung"] <= 3


REFUSED_COSTS_UNDER_S = 30.0
"""What a refused connection costs, however loaded the machine: far under the 60 s backoff it would otherwise wait."""
SLOW_S = 0.2
"""How long the broken exporters take to fail: more than the tests' `cheap_failure_s`, so they are backed off."""


async def test_a_failing_pod_is_skipped_until_its_backoff_passes(exporters: tuple[str, Counter[str]]) -> None:
    base, hits = exporters
    source = ScrapeSource(inventory(base, "dead"), timeout_s=ANSWERED_WITHIN_S,
                          retries=ScrapeRetries(cheap_failure_s=SLOW_S / 2))
    await refreshed_each_second_for_30_s(source)
    assert hits["dead"] == 3
    assert source.errors["http"] == 3


async def test_a_body_over_the_cap_is_refused_unread(exporters: tuple[str, Counter[str]]) -> None:
    base, hits = exporters
    source = ScrapeSource(inventory(base, "huge"), timeout_s=ANSWERED_WITHIN_S)
    try:
        (snapshot,) = await source.collect(1000.0)
    finally:
        await source.close()
    assert hits["huge"] == 1
    assert source.errors == {"too_large": 1}
    assert snapshot.pods[0].sampled_at is None


async def test_an_exporter_back_after_a_minute_of_refused_connections_is_read_at_the_next_refresh(
        caplog: pytest.LogCaptureFixture) -> None:
    """An operator stopped 11 of a runtime's 20 exporters for 75 s: its values answered 503 (under
    min_coverage) for up to a minute more after they were back, each pod's next try 60 s after its last refusal.
    A refused connection costs nothing, so it is tried again at every refresh; only failures that take time
    (a black-holed pod's timeout) are backed off."""
    hits: Counter[str] = Counter()

    async def exporter(request: web.Request) -> web.Response:
        hits[request.match_info["pod"]] += 1
        return web.Response(status=500)

    with socket.socket() as probe:  # a port nothing listens on, until the exporter comes back on it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # A refused connection is cheap by any bar (a round trip): measured against the default 1 s, a loaded machine
    # that stalls the adapter a second mid-connect backs it off for a minute; the rule, not the machine, is tested.
    source = ScrapeSource(inventory(f"http://127.0.0.1:{port}", "back"), timeout_s=2,
                          retries=ScrapeRetries(cheap_failure_s=REFUSED_COSTS_UNDER_S))
    app = web.Application()
    app.router.add_get("/{pod}/metrics", exporter)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        for now in range(1000, 1080, 5):  # refused for 75 s, one refresh each 5 s
            await source.collect(float(now))
        assert source.errors["connect"] == 16
        await web.TCPSite(runner, "127.0.0.1", port).start()
        await source.collect(1080.0)
    finally:
        await source.close()
        await runner.cleanup()
    assert hits["back"] == 1
    [line] = [record.getMessage() for record in caplog.records if "failed (connect)" in record.getMessage()]
    assert line.endswith("retrying at the next refresh (with backoff where it fails slowly)"), line
