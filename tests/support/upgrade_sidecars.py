"""The two sidecars an upgrade test reads side by side: a release's, replayed from its /metrics captured in
tests/upgrade/, and today's exporter as a real process naming its pod as the sidecar patch makes it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

from aiohttp import web
from pytest_aiohttp import AiohttpServer

from autoscaler.demo.fake_modelmesh import serve
from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from autoscaler.model import RuntimeKey, RuntimeSnapshot
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.scrape import ScrapeSource
from tests.sources.static_discovery import StaticDiscovery
from tests.support.ports import free_port
from tests.support.processes import running

RELEASES = Path(__file__).resolve().parent.parent / "upgrade"


def captured_metrics(release: str) -> str:
    """A release's sidecar /metrics answer (`tests/upgrade/<release>-exporter-metrics.txt`), without the file's
    own header."""
    text = (RELEASES / f"{release}-exporter-metrics.txt").read_text()
    return text[text.index("# HELP"):]


async def replayed_sidecar(aiohttp_server: AiohttpServer, text: str) -> str:
    """The URL of a server answering `text` at every scrape, as that release's sidecar would."""
    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=text, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    server = await aiohttp_server(app)
    return f"http://127.0.0.1:{server.port}/metrics"


@asynccontextmanager
async def todays_sidecar(tmp_path: Path, pod_env: Mapping[str, str]) -> AsyncIterator[str]:
    """Today's exporter's URL, reading a fake ModelMesh at 40 requests a second, its pod named by `pod_env`."""
    fake = FakeModelMesh(ModelMeshLoad(requests_per_second=40))
    mm_port, port = free_port(), free_port()
    runner = await serve(fake, "127.0.0.1", mm_port)
    try:
        with running(["exporter.cli", "--listen", f"127.0.0.1:{port}", "--no-gpu", "--modelmesh-url",
                      f"http://127.0.0.1:{mm_port}/metrics", "--modelmesh-interval", "0.3", "--load-window", "1"],
                     f"http://127.0.0.1:{port}/healthz", tmp_path / "exporter.log", env=dict(pod_env)):
            yield f"http://127.0.0.1:{port}/metrics"
    finally:
        await runner.cleanup()


async def read_mixed_runtime(key: RuntimeKey, old: PodTarget,
                             new: PodTarget) -> tuple[ScrapeSource, RuntimeSnapshot, float]:
    """Today's scrape source reading a runtime of an old release's sidecar and today's until both pods have a rate
    (today's first rate needs two ModelMesh reads): (the source, to close; the snapshot; the time it was read)."""
    source = ScrapeSource(StaticDiscovery([RuntimeInventory(key, (old, new))]), timeout_s=5.0)
    try:
        for _ in range(50):
            now = time.time()
            [snapshot] = await source.collect(now)
            if all(pod.requests_per_second is not None for pod in snapshot.pods):
                break
            await asyncio.sleep(0.2)
    except BaseException:
        await source.close()
        raise
    return source, snapshot, now

