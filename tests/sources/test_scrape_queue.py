"""Scrapes still queued behind --scrape-concurrency when the refresh's deadline passes were never sent. Before,
/debug and the log said of each such pod "no answer before the refresh deadline", pointing at a healthy exporter;
`source_reads_total` counted them as scrapes tried (inflating the denominator of the source-errors alert in the
very overload where it should fire); and the same pods were last in line at every refresh, so a runtime starved
for good (coverage below its minimum, 503s).

Real exporter stand-ins on a real socket; one scrape at a time. A pod the test names hangs until the refresh's
deadline cuts it off, the others answer at once: the first pod is read, the second is cut off in flight, the third is
never sent. (It was each pod answering in 1 s against a 1.5 s deadline, which a loaded machine could miss.)
"""

from __future__ import annotations

import asyncio
import time

from aiohttp import web
from pytest_aiohttp import AiohttpServer

from autoscaler.model import RuntimeKey
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.scrape import ScrapeSource
from tests.sources.static_discovery import StaticDiscovery

KEY = RuntimeKey("ml", "modelmesh-serving-slow")
DEADLINE_S = 5.0
"""What a hung pod costs a refresh; the pods that answer do so at once, far inside it even on a loaded machine."""


def exporters(hanging: set[str]) -> web.Application:
    """Exporter stand-ins under /{pod}/metrics: those named in `hanging` (read when asked) never answer."""

    async def exporter(request: web.Request) -> web.Response:
        if request.match_info["pod"] in hanging:
            await asyncio.Event().wait()  # until the scrape is cancelled at the deadline
        now = time.time()
        return web.Response(text=(
            f'modelmesh_exporter_last_success_timestamp_seconds{{collector="modelmesh"}} {now - 0.5}\n'
            f"modelmesh_exporter_time_seconds {now}\nmodelmesh_pod_requests_per_second 40\n"))

    app = web.Application()
    app.router.add_get("/{pod}/metrics", exporter)
    return app


async def test_pods_queued_at_the_deadline_are_said_not_scraped_not_counted_and_go_first_next_time(
        aiohttp_server: AiohttpServer) -> None:
    hanging = {"slow-1"}
    server = await aiohttp_server(exporters(hanging))
    pods = tuple(PodTarget(f"slow-{i}", True, f"http://127.0.0.1:{server.port}/slow-{i}/metrics") for i in range(3))
    source = ScrapeSource(StaticDiscovery([RuntimeInventory(KEY, pods)]), timeout_s=DEADLINE_S * 2, concurrency=1,
                          deadline_s=DEADLINE_S)
    try:
        await source.collect(time.time())
        problems = {problem.pod: problem for problem in source.problems(KEY)}
        assert "slow-0" not in problems
        queued = problems["slow-2"]
        assert "not scraped" in queued.detail and "--scrape-concurrency" in queued.detail, queued.detail
        assert "no answer" not in queued.detail, queued.detail
        assert source.reads == 2  # slow-0 and slow-1 were sent; slow-2 never was
        # Now the pod read first last time hangs: a refresh that took the pods in the same order again spends its
        # deadline on it, and slow-2 is starved once more.
        hanging.add("slow-0")
        [snapshot] = await source.collect(time.time())
        fresh = {pod.name for pod in snapshot.pods if pod.sampled_at is not None}
        assert "slow-2" in fresh, fresh  # last in line once, first the next time
    finally:
        await source.close()
