"""Where the refresh process's time goes at fleet size: one refresh, phase by phase, against a fake fleet.

Builds the refresh side exactly as `modelmesh-autoscaler serve` does (`RefreshStack` over a targets file,
the scrape source, the default policies) and the same publishing step the serving workers are fed by
(`autoscaler.api.render.SnapshotPublisher`: render, pack; then shared memory), and runs refreshes one after another.
The fake fleet (`bench_fleet.serve_fleet`: 2 pods a runtime, the exporter's own series with a fresh
collection timestamp on every scrape) answers from its own process, as in the fleet benchmark. No serving
workers and no clients: the figure is the refresh process's own work. Prints wall and CPU time per phase
(median over `--runs` refreshes after one warm-up); `--profile N` prints cProfile's top N functions of
those refreshes (cumulative), to see inside a phase. Plain script, no asserts:

    python bench/bench_refresh_process.py --runtimes 5000 [--runs 3] [--profile 30]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def parse_args() -> argparse.Namespace:
    """The flags, parsed before the modules a run needs are imported (below), so that `--help` and a
    mistyped flag are answered at once."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runtimes", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="print cProfile's top N functions (cumulative) of the measured refreshes")
    return parser.parse_args()


if __name__ == "__main__":
    parse_args()


from autoscaler.api.snapshot import ServingSnapshot  # noqa: E402
from autoscaler.model import RuntimeKey, RuntimeView  # noqa: E402
from bench.bench_fleet import PODS_PER_RUNTIME, serve_fleet, start, write_targets  # noqa: E402

T = TypeVar("T")


class Phases:
    """Wall and CPU seconds per named phase, per refresh."""

    def __init__(self) -> None:
        self.wall: dict[str, list[float]] = defaultdict(list)
        self.cpu: dict[str, list[float]] = defaultdict(list)

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.wall[name].append(time.perf_counter() - wall)
            self.cpu[name].append(time.process_time() - cpu)

    def wrap(self, name: str, function: Callable[..., T]) -> Callable[..., T]:
        def timed(*args: object, **kwargs: object) -> T:
            with self.timed(name):
                return function(*args, **kwargs)
        return timed

    def wrap_async(self, name: str, function: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
        async def timed(*args: object, **kwargs: object) -> T:
            with self.timed(name):
                return await function(*args, **kwargs)
        return timed

    def clear(self) -> None:
        self.wall.clear()
        self.cpu.clear()


async def run(args: argparse.Namespace, workdir: Path) -> None:
    from autoscaler.api import packed
    from autoscaler.api.render import SnapshotPublisher
    from autoscaler.gcsettings import tune_for_refresh
    from autoscaler.server import RefreshStack
    from autoscaler.settings import ServeSettings

    pods = args.runtimes * PODS_PER_RUNTIME
    fleet, fleet_port = start(serve_fleet, pods)
    try:
        targets = write_targets(workdir / "targets.yaml", args.runtimes, fleet_port)
        settings = ServeSettings(targets=targets, refresh_interval_s=15.0, deletion_cost=False)
        stack = RefreshStack(settings)
        refresher, metrics, source = stack.refresher, stack.metrics, stack.source
        phases = Phases()
        publisher = SnapshotPublisher(metrics)
        source.collect = phases.wrap_async("scrape (source.collect)", source.collect)  # type: ignore[method-assign,assignment]
        metrics.publish_runtimes = phases.wrap("publish_runtimes", metrics.publish_runtimes)  # type: ignore[method-assign]
        publisher.render = phases.wrap("render answers", publisher.render)  # type: ignore[method-assign]
        publisher.refresh_metrics = phases.wrap("refresh self-metrics", publisher.refresh_metrics)  # type: ignore[method-assign]
        publisher.pack = phases.wrap("pack", publisher.pack)  # type: ignore[method-assign]
        sizes: list[int] = []
        unchanged: list[tuple[int, int]] = []  # runtimes whose metric and KEDA bytes repeat the previous refresh's
        rendered: dict[tuple[str, str], object] = {}
        render = publisher.render

        def render_counting(views: Mapping[RuntimeKey, RuntimeView], ready: bool) -> ServingSnapshot:
            snapshot = render(views, ready)
            now = {key: ([body for _, body, _ in answers.metrics], answers.keda[1])
                   for key, answers in snapshot.runtimes.items()}
            unchanged.append((sum(rendered.get(key) == bodies for key, bodies in now.items()), len(now)))
            rendered.clear()
            rendered.update(now)
            return snapshot

        publisher.render = render_counting  # type: ignore[method-assign]

        async def publish(views: object) -> None:
            blob = publisher.snapshot_blob(refresher.views, refresher.ready)
            sizes.append(len(blob))
            with phases.timed("share (memfd)"):
                os.close(packed.share(blob))

        refresher.listeners.append(publish)
        await stack.start()
        tune_for_refresh()
        refresh_once = phases.wrap_async("whole refresh", refresher.refresh_once)
        await refresh_once()  # warm-up: connections, imports, first memory
        phases.clear()
        unchanged.clear()
        profile = cProfile.Profile() if args.profile else None
        for _ in range(args.runs):
            if profile is not None:
                profile.enable()
            await refresh_once()
            if profile is not None:
                profile.disable()
        views = refresher.views
        known = sum(view.known for view in views.values())
        await stack.close()
    finally:
        fleet.terminate()
        fleet.join(5)

    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{args.runtimes} runtimes ({pods} pods; {known} runtimes known), {args.runs} refreshes after a "
          f"warm-up, snapshot {statistics.median(sizes) / 2**20:.1f} MiB; load average {load}")
    print("runtimes whose metric and KEDA answers were byte for byte the previous refresh's: "
          + ", ".join(f"{same} of {total}" for same, total in unchanged))
    print("| phase | wall median (min) | CPU median (min) |")
    print("|---|---|---|")
    for name in phases.wall:
        wall, cpu = phases.wall[name], phases.cpu[name]
        print(f"| {name} | {statistics.median(wall) * 1e3:.0f} ({min(wall) * 1e3:.0f}) ms "
              f"| {statistics.median(cpu) * 1e3:.0f} ({min(cpu) * 1e3:.0f}) ms |")
    if profile is not None:
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(args.profile)
        print(out.getvalue())


def main() -> None:
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-refresh-process-") as directory:
        asyncio.run(run(args, Path(directory)))


if __name__ == "__main__":
    main()
