"""Wall time of one full scrape-source refresh against 500 local exporters.

One aiohttp server answers for all 500 pods (a path per pod) with exporter output of realistic size, so the
figure is the adapter's own cost: concurrency bound, HTTP client, parsing. Goal: well inside one 15 s
refresh interval. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import time
from pathlib import Path

from aiohttp import web

from autoscaler.model import RuntimeKey
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.scrape import ScrapeSource

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # the static discovery the source tests use lives in tests/

from bench.fake_exporter import exporter_text  # noqa: E402
from tests.sources.static_discovery import StaticDiscovery  # noqa: E402

RUNTIMES = 10


async def main(exporters: int, gpus: int, rounds: int, concurrency: int) -> None:
    # Bodies are rendered up front so the figures are the adapter's cost, not the stand-in server's.
    per_runtime = max(1, exporters // RUNTIMES)
    exporters = per_runtime * RUNTIMES
    bodies = {
        runtime * 1000 + i: exporter_text(runtime * 1000 + i, gpus=gpus, modelmesh_stamp=time.time())
        for runtime in range(RUNTIMES)
        for i in range(per_runtime)
    }

    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=bodies[int(request.match_info["pod"])], content_type="text/plain", charset="utf-8")

    app = web.Application()
    app.router.add_get("/pod/{pod}/metrics", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    inventory = {}
    for runtime in range(RUNTIMES):
        key = RuntimeKey("bench", f"modelmesh-serving-rt{runtime}")
        pods = tuple(
            PodTarget(f"rt{runtime}-pod{i}", True, f"http://127.0.0.1:{port}/pod/{runtime * 1000 + i}/metrics")
            for i in range(per_runtime)
        )
        inventory[key] = RuntimeInventory(key, pods)
    source = ScrapeSource(StaticDiscovery(inventory.values()), timeout_s=10, concurrency=concurrency)
    walls, cpus = [], []
    for _ in range(rounds):
        wall, cpu = time.perf_counter(), time.process_time()
        snapshots = await source.collect(time.time())
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        fresh = sum(1 for s in snapshots for p in s.pods if p.sampled_at is not None)
        assert fresh == exporters, f"only {fresh} of {exporters} pods scraped"
    await source.close()
    await runner.cleanup()
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"scrape source, {exporters} exporters ({gpus} GPUs each) over loopback, concurrency {concurrency}, "
          f"{rounds} rounds")
    print(
        f"  wall per full refresh: median {statistics.median(walls) * 1000:.0f} ms, "
        f"max {max(walls) * 1000:.0f} ms (goal: well inside 15 s)"
    )
    print(
        f"  CPU per refresh (adapter client plus the in-process stand-in server): "
        f"median {statistics.median(cpus) * 1000:.0f} ms"
    )
    print(f"  peak RSS of the benchmark process: {peak_mib:.0f} MiB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Wall time of one full scrape-source refresh against local exporters.")
    parser.add_argument("--exporters", type=int, default=500, help="exporters scraped, in 10 runtimes (default 500)")
    parser.add_argument("--gpus", type=int, default=8, help="GPUs in each exporter's output (default 8)")
    parser.add_argument("--rounds", type=int, default=5, help="full refreshes timed (default 5)")
    parser.add_argument("--concurrency", type=int, default=64, help="the adapter's --scrape-concurrency (default 64)")
    args = parser.parse_args()
    asyncio.run(main(args.exporters, args.gpus, args.rounds, args.concurrency))
