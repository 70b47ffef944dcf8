"""Wall time of one full scrape-source refresh against 500 local exporters.

One aiohttp server answers for all 500 pods (a path per pod) with exporter output of realistic size, so the
figure is the adapter's own cost: concurrency bound, HTTP client, parsing. Goal: well inside one 15 s
refresh interval. Prints figures; asserts nothing.

Each exporter names its pod (`modelmesh_exporter_pod_info`, as the example sidecar patch's do), and each target
carries the pod's uid, as Kubernetes discovery's do, so the adapter reads and checks that line. `--compare-pod-line`
also times, in the same run and alternating round by round, exporters that name no pod (sidecars patched before
the line), and prints the ratio of the refresh CPU with the line to without.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import time
from pathlib import Path


def parse_args() -> argparse.Namespace:
    """The flags, parsed before the modules a run needs are imported (below), so that `--help` and a
    mistyped flag are answered at once."""
    parser = argparse.ArgumentParser(description="Wall time of one full scrape-source refresh against local exporters.")
    parser.add_argument("--exporters", type=int, default=500, help="exporters scraped, in 10 runtimes (default 500)")
    parser.add_argument("--gpus", type=int, default=8, help="GPUs in each exporter's output (default 8)")
    parser.add_argument("--rounds", type=int, default=5, help="full refreshes timed (default 5)")
    parser.add_argument("--concurrency", type=int, default=64, help="the adapter's --scrape-concurrency (default 64)")
    parser.add_argument("--compare-pod-line", action="store_true",
                        help="also time exporters that name no pod, alternating, and print the CPU ratio")
    return parser.parse_args()


if __name__ == "__main__":
    parse_args()


from aiohttp import web  # noqa: E402

from autoscaler.model import RuntimeKey  # noqa: E402
from autoscaler.sources.base import PodTarget, RuntimeInventory  # noqa: E402
from autoscaler.sources.scrape import ScrapeSource  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # the static discovery the source tests use lives in tests/

from bench.fake_exporter import NAMESPACE, bench_pod, exporter_text  # noqa: E402
from tests.sources.static_discovery import StaticDiscovery  # noqa: E402

RUNTIMES = 10


FORMATS = {"named": True, "unnamed": False}
"""The exporters' two formats, by the path they are served at: naming their pod (today's sidecar) or not."""


def scrape_source(port: int, per_runtime: int, concurrency: int, form: str) -> ScrapeSource:
    """A scrape source over the runtimes' pods served in `form`, each target named (and uid'd) as its exporter
    names itself."""
    inventory = []
    for runtime in range(RUNTIMES):
        key = RuntimeKey(NAMESPACE, f"modelmesh-serving-rt{runtime}")
        pods = tuple(
            PodTarget(bench_pod(number).name or "", True, f"http://127.0.0.1:{port}/{form}/{number}/metrics",
                      uid=bench_pod(number).uid)
            for number in (runtime * 1000 + i for i in range(per_runtime))
        )
        inventory.append(RuntimeInventory(key, pods))
    return ScrapeSource(StaticDiscovery(inventory), timeout_s=10, concurrency=concurrency)


async def main(exporters: int, gpus: int, rounds: int, concurrency: int, compare: bool) -> None:
    # Bodies are rendered up front so the figures are the adapter's cost, not the stand-in server's.
    per_runtime = max(1, exporters // RUNTIMES)
    exporters = per_runtime * RUNTIMES
    forms = list(FORMATS) if compare else ["named"]
    bodies = {
        (form, runtime * 1000 + i): exporter_text(runtime * 1000 + i, gpus=gpus, modelmesh_stamp=time.time(),
                                                  names_pod=FORMATS[form])
        for form in forms
        for runtime in range(RUNTIMES)
        for i in range(per_runtime)
    }

    async def handler(request: web.Request) -> web.Response:
        body = bodies[(request.match_info["form"], int(request.match_info["pod"]))]
        return web.Response(body=body, content_type="text/plain", charset="utf-8")

    app = web.Application()
    app.router.add_get("/{form}/{pod}/metrics", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    sources = {form: scrape_source(port, per_runtime, concurrency, form) for form in forms}
    walls: dict[str, list[float]] = {form: [] for form in forms}
    cpus: dict[str, list[float]] = {form: [] for form in forms}
    for _ in range(rounds):
        for form in forms:  # alternating, so that a machine slowing down weighs on both alike
            wall, cpu = time.perf_counter(), time.process_time()
            snapshots = await sources[form].collect(time.time())
            walls[form].append(time.perf_counter() - wall)
            cpus[form].append(time.process_time() - cpu)
            fresh = sum(1 for s in snapshots for p in s.pods if p.sampled_at is not None)
            assert fresh == exporters, f"only {fresh} of {exporters} pods scraped ({form})"
    for source in sources.values():
        await source.close()
    await runner.cleanup()
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"scrape source, {exporters} exporters ({gpus} GPUs each, naming their pods) over loopback, "
          f"concurrency {concurrency}, {rounds} rounds")
    print(
        f"  wall per full refresh: median {statistics.median(walls['named']) * 1000:.0f} ms, "
        f"max {max(walls['named']) * 1000:.0f} ms (goal: well inside 15 s)"
    )
    print(
        f"  CPU per refresh (adapter client plus the in-process stand-in server): "
        f"median {statistics.median(cpus['named']) * 1000:.0f} ms"
    )
    if compare:
        named, unnamed = statistics.median(cpus["named"]), statistics.median(cpus["unnamed"])
        print(f"  exporters naming no pod, same run: CPU per refresh median {unnamed * 1000:.0f} ms; "
              f"with the pod line / without: {named / unnamed:.3f}")
    print(f"  peak RSS of the benchmark process: {peak_mib:.0f} MiB")


if __name__ == "__main__":
    args = parse_args()
    asyncio.run(main(args.exporters, args.gpus, args.rounds, args.concurrency, args.compare_pod_line))
