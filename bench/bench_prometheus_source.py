"""One Prometheus-source refresh at fleet scale: a real Prometheus holding N runtimes of 2 pods each.

The data is backfilled with promtool (seconds, no scraping), then the source runs a few refreshes against it.
Prints, per refresh, the wall time, the adapter's CPU, the bytes of the ten answers (nine signals, the recent
models), and per query the evaluation time and peak samples Prometheus reports (`stats=all`), to compare with its
defaults (`--query.timeout`, `--query.max-samples`) and with `--prometheus-timeout`. Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # the Prometheus fixture and static discovery live in tests/


def parse_args() -> argparse.Namespace:
    """The flags, parsed before the modules a run needs are imported (below), so that `--help` and a
    mistyped flag are answered at once."""
    parser = argparse.ArgumentParser(description="One Prometheus-source refresh against a real Prometheus "
                                                 "holding a large fleet.")
    parser.add_argument("--runtimes", type=int, default=1000, help="runtimes of 2 pods each (default 1000)")
    parser.add_argument("--refreshes", type=int, default=3, help="refreshes timed (default 3)")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="the adapter's --prometheus-timeout, seconds (default 30: measure, do not give up)")
    return parser.parse_args()


if __name__ == "__main__":
    parse_args()


from autoscaler.sources.prometheus import PrometheusSource  # noqa: E402
from exporter import names  # noqa: E402
from tests.fakes.prometheus import PrometheusServer, Sample, create_blocks, openmetrics_text  # noqa: E402
from tests.sources.static_discovery import StaticDiscovery  # noqa: E402

PODS_PER_RUNTIME = 2
NAMESPACES = 50


def fleet(runtimes: int, at: float) -> tuple[dict[tuple[str, str], list[str]], list[Sample]]:
    """The inventory, and one scrape of every pod's exporter as Prometheus stores it."""
    pods: dict[tuple[str, str], list[str]] = {}
    samples: list[Sample] = []
    for index in range(runtimes):
        namespace = f"ns-{index % NAMESPACES}"
        names_ = [f"rt-{index}-5d8f7c9b4-{k}x7kq" for k in range(PODS_PER_RUNTIME)]
        pods[(namespace, f"modelmesh-serving-rt-{index}")] = names_
        for pod in names_:
            labels = {"namespace": namespace, "pod": pod, "job": "modelmesh-exporter", "instance": f"{pod}:9187"}
            samples += [Sample(name, labels, value, at) for name, value in (
                (names.REQUESTS_PER_SECOND, 10.0), (names.QUEUE_DELAY_SECONDS, 0.01),
                (names.CACHE_MISSES_PER_SECOND, 0.1), (names.CACHE_USED_RATIO, 0.5),
                (names.MODELS_LOADED, 3.0), (names.LRU_AGE_SECONDS, 100.0), (names.EXPORTER_TIME, at))]
            samples.append(Sample(names.GPU_BUSY_RATIO, labels | {"gpu": "0", "uuid": "GPU-0"}, 0.5, at))
            for collector in (names.COLLECTOR_MODELMESH, names.COLLECTOR_GPU):
                samples.append(Sample(names.LAST_SUCCESS_TIMESTAMP, labels | {"collector": collector}, at, at))
                samples.append(Sample(names.COLLECTOR_SUCCESS, labels | {"collector": collector}, 1.0, at))
                # A failed read long ago, as most pods of a fleet have: the failing-collector query reads the counter.
                samples.append(Sample(names.SCRAPE_ERRORS_TOTAL, labels | {"collector": collector, "reason": "http"},
                                      1.0, at))
    return pods, samples


def query_stats(url: str, promql: str) -> tuple[float, int]:
    """Prometheus's own evaluation time (s) and peak samples for one query, run alone."""
    query = urllib.parse.urlencode({"query": promql, "stats": "all"})
    with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=120) as answer:
        stats = json.load(answer)["data"].get("stats", {})
    timings, counts = stats.get("timings", {}), stats.get("samples", {})
    return float(timings.get("evalTotalTime", 0.0)), int(counts.get("peakSamples", 0))


async def main(runtimes: int, refreshes: int, timeout_s: float) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-prometheus-") as scratch:
        now = time.time()
        pods, samples = fleet(runtimes, now - 30)
        started = time.monotonic()
        text = openmetrics_text(samples)
        create_blocks(text, Path(scratch) / "tsdb")
        print(f"{runtimes} runtimes, {runtimes * PODS_PER_RUNTIME} pods, {len(samples)} series "
              f"({len(text) / 1e6:.1f} MB OpenMetrics) backfilled in {time.monotonic() - started:.1f} s")
        async with PrometheusServer(tsdb_dir=Path(scratch) / "tsdb", workdir=scratch) as prom:
            source = PrometheusSource(StaticDiscovery.of(pods), prom.url, timeout_s=timeout_s)
            sizes: list[int] = []

            def measure(response: requests.Response, *args: object, **kwargs: object) -> requests.Response:
                sizes.append(len(response.content))
                return response

            # (a benchmark's probe into the session)
            source._reader._connection.session.hooks["response"].append(measure)
            try:
                for refresh in range(refreshes):
                    sizes.clear()
                    wall, cpu = time.monotonic(), time.process_time()
                    snapshots = await source.collect(time.time())
                    wall, cpu = time.monotonic() - wall, time.process_time() - cpu
                    fresh = sum(1 for s in snapshots for pod in s.pods if pod.sampled_at is not None)
                    print(f"refresh {refresh}: {wall:.2f} s wall, {cpu:.2f} s adapter CPU, {len(sizes)} queries, "
                          f"{sum(sizes) / 1e6:.1f} MB answered, {fresh} pods read, errors {dict(source.errors)}")
                print(f"longest query URL: {max(len(q) for q in source.queries)} characters of PromQL")
                fields = [signal.field for signal in source._reader.signals] + ["recent_models", "modelmesh_failing"]
                for signal, promql in zip(fields, source.queries, strict=True):
                    seconds, peak = await asyncio.to_thread(query_stats, prom.url, promql)
                    print(f"  {signal:24s} {seconds:.2f} s evaluation, {peak} peak samples")
            finally:
                await source.close()


if __name__ == "__main__":
    options = parse_args()
    asyncio.run(main(options.runtimes, options.refreshes, options.timeout))
