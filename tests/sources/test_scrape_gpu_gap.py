"""With `--source scrape`, a pod whose exporter's GPU collector fails while its ModelMesh one works (docs/design.md,
Missing data): the pod's last good GPU busy is kept at that reading's own time, not dropped (which raised
`modelmesh_gpu_busy` over the pods left), never read as zero or as the GPUs still answering; an exporter restarted
with `--no-gpu` has no GPU to keep (`absent`). The e2e through the real API: tests/e2e/test_gap_no_rise_e2e.py.

The real scrape source against an exporter stand-in on a real socket, answering what the test says.
"""

from __future__ import annotations

import pytest
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from autoscaler.model import RuntimeKey
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.scrape import ScrapeSource
from exporter import names
from tests.sources.static_discovery import StaticDiscovery
from tests.support.exporter_texts import load_lines

KEY = RuntimeKey("ml", "modelmesh-serving-models")
START = 2_000_000_000.0


def gpu_lines(state: str, ok_at: float) -> list[str]:
    """The GPU collector's series: "ok" (two GPUs, 0.2 and 0.4 busy, read at `ok_at`), "failing" (the 0.4 one
    lost: the other's series alone, success 0, the success time left at `ok_at`) or "off" (`--no-gpu`: none)."""
    if state == "off":
        return []
    busy = [0.2, 0.4] if state == "ok" else [0.2]
    return [*(f'{names.GPU_BUSY_RATIO}{{gpu="{i}",uuid="GPU-{i}"}} {value!r}' for i, value in enumerate(busy)),
            f'{names.COLLECTOR_SUCCESS}{{collector="gpu"}} {1.0 if state == "ok" else 0.0}',
            f'{names.LAST_SUCCESS_TIMESTAMP}{{collector="gpu"}} {ok_at!r}']


async def test_a_failing_gpu_collector_keeps_the_last_gpu_busy_at_its_time_and_no_gpu_collector_keeps_none(
        aiohttp_server: AiohttpServer) -> None:
    now, gpu = START, ("ok", START)

    async def exporter(request: web.Request) -> web.Response:
        return web.Response(text="\n".join([*load_lines(now), *gpu_lines(*gpu)]) + "\n")

    app = web.Application()
    app.router.add_get("/metrics", exporter)
    server = await aiohttp_server(app)
    pod = PodTarget("pod-0", True, f"http://127.0.0.1:{server.port}/metrics")
    source = ScrapeSource(StaticDiscovery([RuntimeInventory(KEY, (pod,))]), clock=lambda: now)
    try:
        [first] = await source.collect(now)
        now, gpu = START + 15, ("failing", START + 5)  # failing since its pass after START + 5
        [second] = await source.collect(now)
        now, gpu = START + 30, ("off", START + 5)  # restarted with --no-gpu
        [third] = await source.collect(now)
    finally:
        await source.close()

    assert first.pods[0].gpu_busy == pytest.approx(0.3) and first.pods[0].gpu_sampled_at == START
    held = second.pods[0]
    assert (held.gpu_busy, held.gpu_sampled_at) == (first.pods[0].gpu_busy, START), held  # not 0.2, nor now
    assert (held.sampled_at, held.requests_per_second) == (START + 15, 10.0), held  # its load read as ever
    off = third.pods[0]
    assert (off.gpu_busy, off.gpu_sampled_at, off.no_gpu_collector) == (None, None, True), off
