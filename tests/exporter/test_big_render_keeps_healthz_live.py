"""Rendering ModelMesh's families for a scrape does not stall the exporter's own HTTP server.

An outside review: the first scrape after a ModelMesh read renders the pod's per-model series (one a model served
within the horizon), some 360 ms of CPU at 30,000 models, more under the sidecar's 200m CPU limit; rendered on the
event loop, /healthz (the kubelet's liveness probe) and every other scrape waited for it. Here the real exporter
(`build_app`) renders ModelMesh's families with the render held on an event: /healthz must be answered while it is
held, and the held scrape, as one of another format asked meanwhile, gets the whole body once it is let go. No timing
is asserted: the order of what happened is.
"""

from __future__ import annotations

import asyncio
import threading
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
START = 1_800_000_000.0
MODELS = 50
HELD_AT_MOST_S = 20.0
"""How long a held render waits before it goes on by itself: only where the render holds the event loop, so that
the test fails (the order of events says how) rather than hangs."""


class HeldRender:
    """ModelMesh's families, rendered only once the test lets go (while `holding`); what happened, in order."""

    def __init__(self) -> None:
        self.holding = False
        self.started = threading.Event()
        self.go = threading.Event()
        self.events: list[str] = []
        self.collector: ModelMeshCollector | None = None


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterable[HeldRender]:
    render = HeldRender()
    collect = ModelMeshCollector.collect

    def held_collect(collector: ModelMeshCollector) -> Iterable[Metric]:
        render.collector = collector
        if render.holding:
            render.holding = False
            render.events.append("render started")
            render.started.set()
            let_go = render.go.wait(HELD_AT_MOST_S)
            render.events.append("render let go" if let_go else "render went on by itself")
        return collect(collector)

    monkeypatch.setattr(ModelMeshCollector, "collect", held_collect)
    yield render
    render.go.set()  # a test that failed midway leaves no render waiting


@pytest.fixture
async def modelmesh() -> AsyncIterator[tuple[ModelMeshContainer, MetricsPort]]:
    mm = ModelMeshContainer(lambda: START, per_model=True)
    mm.publish(models=MODELS, lru_time_s=START - 100.0)
    port = MetricsPort(mm)
    await port.up()
    yield mm, port
    await port.down()


async def test_healthz_and_other_scrapes_answer_while_the_models_are_rendered(
        aiohttp_client: AiohttpClient, modelmesh: tuple[ModelMeshContainer, MetricsPort], held: HeldRender) -> None:
    mm, port = modelmesh
    settings = ExporterSettings(listen_host="127.0.0.1", listen_port=0, modelmesh_url=port.url,
                                modelmesh_interval_s=3600.0, gpu_enabled=False,
                                identity=PodIdentity("ns", "runtime-a-0", "u-1"))
    client = await aiohttp_client(build_app(settings))
    for _ in range(200):  # the exporter's first read, at its start, before ModelMesh's first request
        if names.MODEL_LAST_SERVED_TIMESTAMP in await (await client.get("/metrics")).text():
            break
        await asyncio.sleep(0.05)
    mm.add_models(MODELS)
    assert held.collector is not None
    async with aiohttp.ClientSession() as session:
        assert await held.collector.scrape_once(session)  # a new read: the next scrape renders its families

    held.holding = True
    scrape = asyncio.create_task(client.get("/metrics", headers={"Accept-Encoding": "gzip"}))
    assert await asyncio.to_thread(held.started.wait, HELD_AT_MOST_S)
    other = asyncio.create_task(
        client.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}))
    healthz = await client.get("/healthz")
    held.events.append(f"healthz answered {healthz.status}")
    held.go.set()
    responses = await asyncio.gather(scrape, other)
    held.events.append(f"scrapes answered {[response.status for response in responses]}")

    assert held.events == ["render started", "healthz answered 200", "render let go", "scrapes answered [200, 200]"]
    for response in responses:
        assert served_models_count(await response.text()) == MODELS
