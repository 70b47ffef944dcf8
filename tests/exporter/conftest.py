"""One runtime pod for exporter tests: a ModelMesh container's metrics port and the real exporter reading it.

The ModelMesh side is `modelmesh_wire` (the real container's text and timing, from its source); the exporter
side is its real collector and HTTP app. One stepped clock drives ModelMesh's wall clock and the exporter's
clocks, so every value a test reads is exact. Each test module subclasses `ExporterPod` with the reads it
needs and names the class in a `pod_class` fixture; `pod_factory` builds pods of that class.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from prometheus_client import CollectorRegistry

from exporter.app import metrics_app
from exporter.collectors.health import CollectorHealth
from exporter.collectors.modelmesh import ModelMeshCollector
from tests.exporter.modelmesh_wire import MetricsPort, ModelMeshContainer

AiohttpClient = Callable[[web.Application], Awaitable[TestClient[web.Request, web.Application]]]
START = 1_800_000_000.0


class Clock:
    """Unix seconds that move only when a test says so: ModelMesh's wall clock and both of the exporter's."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


@dataclass
class ExporterPod:
    """One runtime pod: the `mm` container's metrics port, and an exporter reading it (replaceable)."""

    clock: Clock
    container: ModelMeshContainer
    port: MetricsPort
    session: aiohttp.ClientSession
    aiohttp_client: AiohttpClient
    collector_options: dict[str, Any] = field(default_factory=dict)
    collector: ModelMeshCollector | None = None
    client: TestClient[web.Request, web.Application] | None = None
    default_collector_options: ClassVar[dict[str, Any]] = {}
    """The collector options of every pod of this class; a pod's own `collector_options` override them."""

    async def start_exporter(self) -> None:
        """A new exporter process on this pod: fresh state, its own /metrics, the pod's collector options."""
        health = CollectorHealth(clock=self.clock)
        self.collector = ModelMeshCollector(health, self.port.url, ssl_context=False, clock=self.clock,
                                            wall_clock=self.clock,
                                            **{**self.default_collector_options, **self.collector_options})
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self.collector)
        registry.register(health)
        self.client = await self.aiohttp_client(metrics_app(registry, health))

    async def read_modelmesh(self, seconds: float) -> None:
        """`seconds` pass, then the exporter reads ModelMesh once."""
        assert self.collector is not None
        self.clock.now += seconds
        await self.collector.scrape_once(self.session)

    async def metrics_text(self) -> str:
        """The exporter's /metrics body, as a scraper gets it."""
        assert self.client is not None
        return await (await self.client.get("/metrics")).text()


@pytest.fixture
def pod_class() -> type[ExporterPod]:
    """The pod class `pod_factory` builds; a test module names its subclass in a fixture of this name."""
    return ExporterPod


@pytest.fixture
async def pod_factory(aiohttp_client: AiohttpClient,
                      pod_class: type[ExporterPod]) -> AsyncIterator[Callable[..., Awaitable[Any]]]:
    """Builds pods whose ModelMesh has published 8 models (`per_model`, `queue_timed`: its `ModelMeshContainer`);
    other keyword options go to the exporter's collector."""
    ports: list[MetricsPort] = []
    async with aiohttp.ClientSession() as session:

        async def build(*, per_model: bool = False, queue_timed: bool = True,
                        **collector_options: Any) -> ExporterPod:
            clock = Clock()
            container = ModelMeshContainer(clock, per_model=per_model, queue_timed=queue_timed)
            container.publish(models=8, lru_time_s=clock.now - 100.0)
            port = MetricsPort(container)
            ports.append(port)
            await port.up()
            pod = pod_class(clock, container, port, session, aiohttp_client, collector_options)
            await pod.start_exporter()
            return pod

        yield build
        for port in ports:
            await port.down()


async def failed_read_line(collector: ModelMeshCollector, caplog: pytest.LogCaptureFixture) -> str:
    """One read of ModelMesh that fails, and the one log line saying so: all an operator has to go on."""
    with caplog.at_level(logging.WARNING, logger="exporter"):
        async with aiohttp.ClientSession() as session:
            assert not await collector.scrape_once(session)
    [line] = [r.getMessage() for r in caplog.records if "modelmesh collector failed" in r.getMessage()]
    return line
