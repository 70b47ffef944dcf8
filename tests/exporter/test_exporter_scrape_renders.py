"""Scrapes between two ModelMesh reads render ModelMesh's families once, on the real exporter app (`build_app`).

An outside review: a pod with 2,000 models served within the horizon (/metrics 218 KB) and two scrapers every
100 ms kept the sidecar's 200m CPU limit throttled, because every scrape formatted and gzipped every model's
series again though nothing had changed since the last read. Counted here as the renders of ModelMesh's families
(its collector's `collect`) per scrape, in every format a scraper asks for, with what each scraper reads.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from prometheus_client.core import Metric

from exporter import names
from exporter.app import build_app
from exporter.collectors.modelmesh import ModelMeshCollector
from exporter.pod_identity import PodIdentity
from exporter.settings import ExporterSettings
from tests.exporter.modelmesh_wire import MetricsPort, ModelMeshContainer
from tests.support.exporter_texts import served_models_count

AiohttpClient = Callable[[web.Application], Awaitable[TestClient[web.Request, web.Application]]]
MODELS = 2_000
OPENMETRICS = "application/openmetrics-text; version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
"""What Prometheus asks for."""


class Renders:
    """Counts the renders of ModelMesh's families, and keeps the collector to read ModelMesh again on cue."""

    def __init__(self) -> None:
        self.count = 0
        self.collector: ModelMeshCollector | None = None


@pytest.fixture
def renders(monkeypatch: pytest.MonkeyPatch) -> Renders:
    counted = Renders()
    collect = ModelMeshCollector.collect

    def counting(collector: ModelMeshCollector) -> Iterable[Metric]:
        counted.count += 1
        counted.collector = collector
        return collect(collector)

    monkeypatch.setattr(ModelMeshCollector, "collect", counting)
    return counted


@pytest.fixture
async def container() -> AsyncIterator[tuple[ModelMeshContainer, MetricsPort]]:
    mm = ModelMeshContainer(lambda: 1_800_000_000.0, per_model=True)
    mm.publish(models=MODELS, lru_time_s=1_800_000_000.0 - 100.0)  # its models served after the exporter's first read
    port = MetricsPort(mm)
    await port.up()
    yield mm, port
    await port.down()


async def scrape(client: TestClient[web.Request, web.Application], accept: str | None, gzipped: bool) -> str:
    headers = {"Accept-Encoding": "gzip" if gzipped else "identity"}
    if accept is not None:
        headers["Accept"] = accept
    response = await client.get("/metrics", headers=headers, auto_decompress=False)
    assert response.status == 200
    body = await response.read()
    assert (response.headers.get("Content-Encoding") == "gzip") == gzipped
    return (gzip.decompress(body) if gzipped else body).decode()


async def test_scrapes_between_two_reads_render_the_models_once_per_format(
        aiohttp_client: AiohttpClient, container: tuple[ModelMeshContainer, MetricsPort], renders: Renders) -> None:
    mm, port = container
    settings = ExporterSettings(listen_host="127.0.0.1", listen_port=0, modelmesh_url=port.url,
                                modelmesh_interval_s=3600.0, gpu_enabled=False,
                                identity=PodIdentity("ns", "runtime-a-0", "u-1"))
    client = await aiohttp_client(build_app(settings))
    for _ in range(200):  # the exporter's first read, at its start, before ModelMesh's first request
        if names.MODEL_LAST_SERVED_TIMESTAMP in await scrape(client, None, gzipped=False):
            break
        await asyncio.sleep(0.05)
    mm.add_models(MODELS)
    assert renders.collector is not None
    async with aiohttp.ClientSession() as session:
        assert await renders.collector.scrape_once(session)  # every model served since: each published
    renders.count = 0

    texts = [await scrape(client, accept, gzipped) for _ in range(10) for accept, gzipped in (
        (OPENMETRICS, True), (OPENMETRICS, False), (None, True), (None, False))]

    # 40 scrapes in 2 formats (gzip or not): ModelMesh's families rendered at most once a format, not once a scrape
    assert renders.count <= 2
    for text in texts:
        assert served_models_count(text) == MODELS
        # the adapter's fast reader finds the pod's family last, and the clock is this scrape's
        assert [line for line in text.splitlines() if line and not line.startswith("#")][-1].startswith(
            names.POD_INFO + "{")
        assert names.EXPORTER_TIME + " " in text
    assert all(text.endswith("# EOF\n") for text in texts[0::4] + texts[1::4])
    assert not any("# EOF" in text for text in texts[2::4] + texts[3::4])

    # ModelMesh read again, a new model served since: the next scrape of each format shows it, rendered once more
    mm.serve(5, model="model-new__isvc-1")
    assert renders.collector is not None
    async with aiohttp.ClientSession() as session:
        assert await renders.collector.scrape_once(session)
    renders.count = 0
    after = [await scrape(client, OPENMETRICS, gzipped=True) for _ in range(5)]
    after += [await scrape(client, None, gzipped=True) for _ in range(5)]
    assert renders.count <= 2
    assert all('model_id="model-new__isvc-1"' in text for text in after)
