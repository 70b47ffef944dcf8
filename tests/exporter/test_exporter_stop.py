"""The exporter stops when its pod is deleted even if the ModelMesh read takes the stop for its own timeout.

A cancel that lands as an HTTP request's timeout fires can come out of aiohttp as that timeout: the ModelMesh
loop then counts a timed-out read ("keeping last good values"), sleeps its interval and reads again. A stop that
cancelled it once and waited held the sidecar, and so the pod, until the kubelet's SIGKILL at the end of the
grace period."""

from __future__ import annotations

import asyncio
import functools

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from exporter import names
from exporter.app import metrics_app
from exporter.collectors.health import CollectorHealth
from exporter.collectors.modelmesh import ModelMeshCollector
from exporter.modelmesh_text import ScrapeFailure
from tests.support.stubborn import StubbornRequest


async def test_the_app_stops_a_modelmesh_loop_whose_read_takes_the_stop_for_a_timeout(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    health = CollectorHealth()
    collector = ModelMeshCollector(health, "http://127.0.0.1:1/metrics")
    read = StubbornRequest()

    async def read_that_never_answers(session: aiohttp.ClientSession) -> tuple[str, float, str]:
        try:
            await read()
        except TimeoutError as error:  # what `_fetch` makes of aiohttp's timeout
            raise ScrapeFailure(names.REASON_TIMEOUT, "no answer") from error
        raise AssertionError("the read answered")

    monkeypatch.setattr(collector, "_fetch", read_that_never_answers)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    runner = web.AppRunner(metrics_app(registry, health, [functools.partial(collector.run, 0.05)]))
    await runner.setup()  # starts the loops
    await asyncio.wait_for(read.waiting.wait(), timeout=10)
    stopping = asyncio.create_task(runner.cleanup())
    done, _ = await asyncio.wait({stopping}, timeout=10)  # not `wait_for`: its cancel would stop the loop
    assert done == {stopping}, "the exporter still waits for its ModelMesh loop ten seconds after the stop"
    assert read.took_a_cancel_for_a_timeout
    assert any(message.startswith("stopping: ModelMeshCollector.run went on after its cancel")
               for message in caplog.messages)
