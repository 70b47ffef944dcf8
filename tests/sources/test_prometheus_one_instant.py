"""One refresh reads Prometheus at one instant (`prometheus_instant`), against a real Prometheus scraping.

Asked "now", each query of a refresh was evaluated when it arrived: a query that waited (a busy Prometheus, a
slow proxy) read a later scrape than the freshness query, and the pod's values mixed two scrapes.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from autoscaler.sources.prometheus import PrometheusSource
from autoscaler.sources.prometheus_promql import build_queries
from exporter import names
from tests.fakes.prometheus import PrometheusServer
from tests.sources.static_discovery import StaticDiscovery
from tests.sources.test_prometheus_probe_backends import forward, front
from tests.sources.test_prometheus_source import TRITON

pytestmark = pytest.mark.slow

HELD_S = 2.5
"""How long the front holds the request-rate query: more than two of Prometheus's 1 s scrapes land meanwhile."""


async def test_every_signal_of_a_refresh_is_read_from_the_scrape_its_freshness_is(
    aiohttp_server: AiohttpServer, tmp_path: Path
) -> None:
    """The exporter reports the time it was scraped as its last success, and as its request rate the number of the
    scrape (1, 2, 3 ...): read from one scrape, the pod's request rate is the value Prometheus stored at the scrape
    time its `sampled_at` is. A front holds the request-rate query for HELD_S before passing it on; unpinned, that
    query read a scrape seconds newer than the freshness query. (Asked of the scrape Prometheus stored, not of the
    exporter's clock within a window of the scrape's: a loaded machine reached the exporter late.)"""

    scrapes = 0

    async def exporter(request: web.Request) -> web.Response:
        nonlocal scrapes
        scrapes += 1
        labels = f'namespace="{TRITON.namespace}",pod="a-1"'
        return web.Response(text=(
            f"{names.REQUESTS_PER_SECOND}{{{labels}}} {scrapes}\n"
            f'{names.LAST_SUCCESS_TIMESTAMP}{{{labels},collector="{names.COLLECTOR_MODELMESH}"}} {time.time():.3f}\n'))

    app = web.Application()
    app.router.add_get("/metrics", exporter)
    target = await aiohttp_server(app)
    rps_query = build_queries()[2].promql
    assert names.REQUESTS_PER_SECOND in rps_query and "timestamp" not in rps_query.split("unless")[0]
    asked: list[dict[str, str]] = []

    async with PrometheusServer([str(target.make_url("/metrics"))], workdir=tmp_path) as prom:

        async def slow_proxy(request: web.Request) -> web.Response:
            params = dict(request.query)
            asked.append(params)
            if params.get("query") == rps_query:
                await asyncio.sleep(HELD_S)
            return await forward(request, prom, params)

        await prom.wait_for(names.REQUESTS_PER_SECOND, timeout=20)
        source = PrometheusSource(StaticDiscovery.of({(TRITON.namespace, TRITON.deployment): ["a-1"]}),
                                  await front(aiohttp_server, slow_proxy))
        try:
            (snapshot,) = await source.collect(time.time())
        finally:
            await source.close()
        [stored] = await prom.query(f"{names.REQUESTS_PER_SECOND}[5m]")
    scraped_at = {float(value): float(at) for at, value in stored["values"]}  # scrape number: Prometheus's time

    (pod,) = snapshot.pods
    assert snapshot.source_ok and pod.sampled_at is not None and pod.requests_per_second is not None
    # `sampled_at` is the scrape's time as Prometheus stored it (milliseconds); another scrape is 1 s off
    assert scraped_at[pod.requests_per_second] == pytest.approx(pod.sampled_at, abs=0.001), (
        f"the request rate was scraped {scraped_at[pod.requests_per_second] - pod.sampled_at:.1f} s after the "
        f"freshness")
    assert len({params.get("time") for params in asked if params["query"] != "time()"}) == 1, asked
