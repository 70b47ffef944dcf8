"""The lookback hint of `--source prometheus` in front of another engine's flags page, through the real CLI and a
real Prometheus behind a front that answers /api/v1/status/flags as that engine does and passes the rest on.

Thanos Query serves the page too: its `query.lookback-delta` reads "0s" when not given (PromQL's default of 5m),
which was read as 0 s and advised shortening the lookback to 30s, "Start Prometheus with". And the check's own
requests ran outside the round's deadline: a flags page trickled a byte at a time held the refresh for ever.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from autoscaler import cli
from autoscaler.serve_args import settings_from_args
from autoscaler.server import build_source
from tests.fakes.prometheus import PrometheusServer, create_blocks, openmetrics_text
from tests.sources.test_prometheus_lookback_hints import scrapes_every
from tests.sources.test_prometheus_probe_backends import warnings
from tests.sources.test_prometheus_source import discovery

FlagsPage = Callable[[web.Request], Awaitable[web.StreamResponse]]
AiohttpServer = Callable[[web.Application], Awaitable[TestServer]]


def thanos_flags(lookback: str) -> FlagsPage:
    """Thanos Query's page: its own flags, among them the replica label (Prometheus has none)."""
    async def page(request: web.Request) -> web.StreamResponse:
        return web.json_response({"status": "success", "data": {
            "query.lookback-delta": lookback, "query.timeout": "2m", "query.replica-label": "replica"}})
    return page


async def trickled_flags(request: web.Request) -> web.StreamResponse:
    """A page that never ends: a byte now and then, each within any read timeout."""
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    await response.write(b'{"status": "success", "data": {"query.lookback-delta": "')
    while True:
        await response.write(b" ")
        await asyncio.sleep(0.2)


async def engine_front(prom_url: str, flags: FlagsPage, aiohttp_server: AiohttpServer) -> str:
    """A front that answers the flags page with `flags` and passes every other request to Prometheus."""
    async def handler(request: web.Request) -> web.StreamResponse:
        if request.path == "/api/v1/status/flags":
            return await flags(request)
        async with aiohttp.ClientSession() as session, session.request(
                request.method, prom_url + request.path_qs, data=await request.read(),
                headers={"Content-Type": request.headers.get("Content-Type", "")}) as answer:
            return web.Response(status=answer.status, body=await answer.read(), content_type="application/json")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    return str((await aiohttp_server(app)).make_url("")).rstrip("/")


async def said(tmp_path: Path, interval_s: float, newest_age_s: float, flags: FlagsPage,
               aiohttp_server: AiohttpServer, caplog: pytest.LogCaptureFixture, refreshes_at: Sequence[float],
               prometheus_args: Sequence[str] = ()) -> tuple[list[str], list[Mapping[str, bool]]]:
    """The warnings of `serve --source prometheus --prometheus-timeout 1`'s refreshes `refreshes_at` seconds from
    now, in front of `flags`, and whether each refresh read its runtimes (`source_ok`)."""
    tsdb = create_blocks(openmetrics_text(scrapes_every(interval_s, newest_age_s, time.time())), tmp_path / "tsdb")
    read: list[Mapping[str, bool]] = []
    async with PrometheusServer(tsdb_dir=tsdb, workdir=tmp_path, extra_args=prometheus_args) as prom:
        url = await engine_front(prom.url, flags, aiohttp_server)
        args = cli.build_parser().parse_args(["serve", "--source", "prometheus", "--prometheus-url", url,
                                              "--prometheus-timeout", "1"])
        source = build_source(settings_from_args(args, {}), discovery())
        try:
            with caplog.at_level(logging.WARNING):
                for later_s in refreshes_at:
                    snapshots = await source.collect(time.time() + later_s)
                    read.append({str(snapshot.key): snapshot.source_ok for snapshot in snapshots})
        finally:
            await source.close()
    return list(warnings(caplog)), read


async def test_thanos_querys_unset_lookback_delta_is_read_as_the_5m_it_stands_for(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, aiohttp_server: AiohttpServer
) -> None:
    lines, _ = await said(tmp_path, 15, 5, thanos_flags("0s"), aiohttp_server, caplog, refreshes_at=(0, 15, 45))

    assert not any("lookback" in line for line in lines), lines


async def test_a_short_lookback_delta_behind_thanos_query_is_told_as_thanos_querys_flag(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, aiohttp_server: AiohttpServer
) -> None:
    """The front's Prometheus has the short lookback (the pods go missing from its answers); the page says
    Thanos Query's."""
    lines, _ = await said(tmp_path, 60, 40, thanos_flags("30s"), aiohttp_server, caplog, refreshes_at=(0,),
                          prometheus_args=["--query.lookback-delta=30s"])

    [hint] = [line for line in lines if "lookback" in line]
    assert hint.startswith("Thanos Query at ") and "--query.lookback-delta 30 s" in hint, hint
    assert "Start Thanos Query with --query.lookback-delta=2m" in hint and "Start Prometheus" not in hint, hint


async def test_a_flags_page_that_never_ends_is_cut_at_the_rounds_deadline_and_the_refreshes_go_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, aiohttp_server: AiohttpServer
) -> None:
    """The check runs (every pod's sample older than max_staleness_s); its spacing is measured, its flags page
    never ends. The refresh returns, what the spacing shows is still said, and the next refreshes read."""
    lines, read = await said(tmp_path, 60, 50, trickled_flags, aiohttp_server, caplog, refreshes_at=(0, 1, 2))

    assert [hint for hint in lines if "60 s apart" in hint and "max_staleness_s" in hint], lines
    assert not any("lookback" in line for line in lines), lines
    assert len(read) == 3 and all(read[-1].values()), read


async def test_a_short_lookback_delta_behind_an_engine_the_flags_do_not_tell_is_told_generally(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, aiohttp_server: AiohttpServer
) -> None:
    async def page(request: web.Request) -> web.StreamResponse:
        return web.json_response({"status": "success", "data": {"query.lookback-delta": "30s"}})

    lines, _ = await said(tmp_path, 60, 40, page, aiohttp_server, caplog, refreshes_at=(0,),
                          prometheus_args=["--query.lookback-delta=30s"])

    [hint] = [line for line in lines if "lookback" in line]
    assert "Set the query engine's lookback-delta to 2m" in hint and "Start " not in hint, hint
