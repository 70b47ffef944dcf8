"""The exporter usually starts before ModelMesh, which takes tens of seconds to serve its metrics: its log must not
claim to be "keeping last good values" it never had. Once a read has worked, a later outage does keep them, and
says so."""

from __future__ import annotations

import logging

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from exporter.collectors.health import CollectorHealth
from exporter.collectors.modelmesh import ModelMeshCollector
from tests.support.ports import free_port

BODY = """\
modelmesh_instance_lru_age_seconds 900.0
modelmesh_instance_capacity_bytes 1.7179869184e+10
modelmesh_instance_used_bytes 8.589934592e+09
modelmesh_instance_models_total 8.0
"""


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def test_modelmesh_not_up_at_start_does_not_claim_values_kept(caplog: pytest.LogCaptureFixture) -> None:
    health = CollectorHealth()
    collector = ModelMeshCollector(health, f"http://127.0.0.1:{free_port()}/metrics")
    async with aiohttp.ClientSession() as session:
        with caplog.at_level(logging.WARNING):
            assert not await collector.scrape_once(session)
    [message] = warnings(caplog)
    assert "(connect)" in message
    assert "last good values" not in message, message
    assert "no ModelMesh series until a read works" in message, message


async def test_an_outage_after_a_good_read_keeps_the_values_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    up = True

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=BODY) if up else web.Response(status=503)

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    async with TestServer(app, host="127.0.0.1", port=free_port()) as server:
        collector = ModelMeshCollector(CollectorHealth(), str(server.make_url("/metrics")))
        async with aiohttp.ClientSession() as session:
            assert await collector.scrape_once(session)
            up = False
            with caplog.at_level(logging.WARNING):
                assert not await collector.scrape_once(session)
    [message] = warnings(caplog)
    assert message.endswith("keeping last good values"), message
