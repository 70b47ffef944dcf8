"""The exporter's HTTP surface and the background loops that feed it.

Collection happens in background tasks; a Prometheus scrape only renders the last values, so a slow
ModelMesh or GPU driver never makes `/metrics` slow.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import AsyncIterator

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

from exporter import names
from exporter.collectors.health import CollectorHealth
from exporter.collectors.modelmesh import ModelMeshCollector
from exporter.settings import ExporterSettings

log = logging.getLogger(__name__)

HEALTH_KEY: web.AppKey[CollectorHealth] = web.AppKey("health", CollectorHealth)


def modelmesh_ssl(settings: ExporterSettings) -> ssl.SSLContext | bool:
    """TLS for the ModelMesh scrape: verify by default, against a given CA, or not at all when asked."""
    if settings.modelmesh_insecure:
        return False
    if settings.modelmesh_ca_file is not None:
        return ssl.create_default_context(cafile=str(settings.modelmesh_ca_file))
    return True


def build_app(settings: ExporterSettings) -> web.Application:
    registry = CollectorRegistry(auto_describe=False)
    health = CollectorHealth()
    modelmesh = ModelMeshCollector(
        health,
        settings.modelmesh_url,
        ssl_context=modelmesh_ssl(settings),
        timeout_s=settings.modelmesh_timeout_s,
        load_window_s=settings.load_window_s,
    )
    registry.register(modelmesh)
    loops = [modelmesh.run(settings.modelmesh_interval_s)]
    health.register(names.COLLECTOR_GPU)
    if settings.gpu_enabled:
        from exporter.collectors.gpu import GpuCollector

        gpu = GpuCollector(health, window_s=settings.gpu_window_s, uuids=settings.gpu_uuids or None)
        registry.register(gpu)
        loops.append(gpu.run(settings.gpu_interval_s))
    registry.register(health)

    async def background(app: web.Application) -> AsyncIterator[None]:
        tasks = [asyncio.create_task(loop) for loop in loops]
        yield
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def healthz(request: web.Request) -> web.Response:
        # Alive as long as it serves; a failing collector is reported in /metrics, not by restarting the pod.
        return web.Response(text="ok\n")

    app = web.Application()
    app[HEALTH_KEY] = health
    app.router.add_get("/metrics", make_aiohttp_handler(registry))
    app.router.add_get("/healthz", healthz)
    app.cleanup_ctx.append(background)
    return app
