"""The lookback hint of `--source prometheus` when the adapter starts with Prometheus: its first check finds no
samples to measure, and the next one ran 5 minutes later, while every answer was empty and the log asked only
whether Prometheus scrapes the exporters. It now measures again after a few scrapes' worth, while the symptom lasts.

A real Prometheus scrapes a real HTTP target, which publishes the pod's series only once the first refresh is done.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from autoscaler import cli
from autoscaler.serve_args import settings_from_args
from autoscaler.server import build_source
from exporter import names
from tests.fakes.prometheus import PrometheusServer
from tests.sources.test_prometheus_probe_backends import warnings
from tests.sources.test_prometheus_source import discovery

AiohttpServer = Callable[[web.Application], Awaitable[TestServer]]


async def exporter_target(aiohttp_server: AiohttpServer, publishing: list[bool]) -> str:
    """An exporter of team-a/a-1 as Prometheus scrapes it ("host:port"), with its signals once `publishing`."""
    async def metrics(request: web.Request) -> web.Response:
        text = f'{names.MODELS_LOADED}{{namespace="team-a",pod="a-1"}} 3\n' if publishing else ""
        return web.Response(text=text, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    server = await aiohttp_server(app)
    return f"{server.host}:{server.port}"


async def until_two_samples(prometheus_url: str) -> None:
    """Wait until Prometheus holds two scrapes of the pod's signals."""
    query = f"count_over_time({names.MODELS_LOADED}[10m])"
    async with aiohttp.ClientSession() as session:
        while True:
            async with session.get(f"{prometheus_url}/api/v1/query", params={"query": query}) as answer:
                result = (await answer.json())["data"]["result"]
            if result and float(result[0]["value"][1]) >= 2:
                return
            await asyncio.sleep(0.5)


async def test_an_adapter_started_with_prometheus_says_the_short_lookback_within_the_first_minute(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, aiohttp_server: AiohttpServer
) -> None:
    publishing: list[bool] = []
    target = await exporter_target(aiohttp_server, publishing)
    async with PrometheusServer([target], scrape_interval="2s", workdir=tmp_path,
                                extra_args=["--query.lookback-delta=1ms"]) as prom:
        args = cli.build_parser().parse_args(["serve", "--source", "prometheus", "--prometheus-url", prom.url])
        source = build_source(settings_from_args(args, {}), discovery())
        started = time.time()
        try:
            with caplog.at_level(logging.WARNING):
                await source.collect(started)  # nothing scraped yet: nothing to measure
                publishing.append(True)
                await until_two_samples(prom.url)
                await source.collect(started + 40)  # a refresh 40 s into the run, every answer still empty
        finally:
            await source.close()

    [hint] = [line for line in warnings(caplog) if "lookback" in line]
    assert "--query.lookback-delta 0.001 s" in hint and "team-a/a-1 are 2 s apart" in hint, hint
