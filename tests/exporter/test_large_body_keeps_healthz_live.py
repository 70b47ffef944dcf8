"""Parsing a large ModelMesh answer does not stall the exporter's own HTTP server.

The largest answer the exporter reads (`MAX_BODY_BYTES`, from a ModelMesh or proxy that ignores `name[]`) takes
over a second of CPU to parse here, and five times that under the sidecar's 200m CPU limit: done on the event
loop, every /healthz and /metrics waits for it, the liveness probe (timeout 5 s) fails read after read, and the
kubelet restarts a sidecar that was working. /healthz must answer while such a body is parsed.
"""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.request

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from prometheus_client import CollectorRegistry

from exporter.app import metrics_app
from exporter.collectors.health import CollectorHealth
from exporter.collectors.modelmesh import ModelMeshCollector
from tests.exporter.test_exporter_memory_limit import unfiltered_modelmesh as unfiltered_modelmesh

__all__ = ["unfiltered_modelmesh"]  # the fixture, used by name


def probe_until(url: str, stop: threading.Event, latencies: list[float]) -> None:
    """The kubelet's side: GET `url` again and again from outside the event loop, recording each answer's wait."""
    while not stop.is_set():
        asked = time.perf_counter()
        with urllib.request.urlopen(url, timeout=30) as response:
            assert response.status == 200
        latencies.append(time.perf_counter() - asked)
        time.sleep(0.01)


@pytest.mark.slow
async def test_healthz_answers_while_the_largest_body_is_parsed(unfiltered_modelmesh: str) -> None:
    health = CollectorHealth()
    collector = ModelMeshCollector(health, unfiltered_modelmesh, timeout_s=30)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    registry.register(health)
    async with TestServer(metrics_app(registry, health), host="127.0.0.1") as server, \
            aiohttp.ClientSession() as session:
        latencies: list[float] = []
        stop = threading.Event()
        prober = threading.Thread(target=probe_until, args=(str(server.make_url("/healthz")), stop, latencies))
        prober.start()
        try:
            started = time.perf_counter()
            assert await collector.scrape_once(session)
            took = time.perf_counter() - started
        finally:
            stop.set()
            await asyncio.to_thread(prober.join)
    assert latencies
    # Not near 0: the reader's one pass over the whole body (a regular expression, in C) keeps Python's lock
    # for about a quarter of the parse, which no thread can take from it; on the loop, the whole read stalled it.
    assert max(latencies) < took / 2, f"/healthz took {max(latencies):.2f} s while one ModelMesh read took {took:.2f} s"
