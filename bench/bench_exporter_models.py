"""What one `/metrics` scrape costs the exporter as the pod's recently served models grow: 8 and 2,000 by default.

Per model count, two real exporters (`exporter.app.build_app`, served by `exporter.app.run`, `--no-gpu`, the pod's
identity given) each read the same ModelMesh stand-in (`tests/exporter/modelmesh_wire.py`, per-model metrics
on: every model served after the exporter's first read, so every one is published) and are then scraped with no
read in between (ModelMesh read twice, then never):
`rendered` as shipped (ModelMesh's families rendered and gzipped once per read, `exporter.rendered_metrics`), and
`every scrape`, the same app with that part rendered again at each scrape, as before (the baseline, run in the same
script so the ratio holds on any machine). The client scrapes as Prometheus does (OpenMetrics, gzip, keep-alive) in
alternating blocks, and reads each server's CPU time from /proc (Linux).

Plain script, prints figures, asserts nothing:

    python bench/bench_exporter_models.py [--models 8 2000] [--scrapes 1000]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # tests/exporter: the ModelMesh stand-in

MODES = ("rendered", "every scrape")
START = 1_800_000_000.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", type=int, nargs="+", default=[8, 2000])
    parser.add_argument("--scrapes", type=int, default=1000, help="per server")
    parser.add_argument("--serve", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    return parser.parse_args()


if __name__ == "__main__":
    parse_args()  # `--help` and a mistyped flag answered before the libraries below load


from prometheus_client.registry import Collector  # noqa: E402

from bench.bench_exporter import Server, child, scrape  # noqa: E402
from exporter.rendered_metrics import Steady  # noqa: E402
from tests.support.ports import free_port  # noqa: E402


def serve_child(mode: str, port: int, models: int) -> None:
    """`--serve MODE --models N`: an exporter over a ModelMesh with `models` served, on 127.0.0.1:port."""
    import asyncio

    import aiohttp

    import exporter.app
    from exporter.collectors.modelmesh import ModelMeshCollector
    from exporter.pod_identity import PodIdentity
    from exporter.rendered_metrics import RenderedMetrics
    from exporter.settings import ExporterSettings
    from tests.exporter.modelmesh_wire import ModelMeshContainer, served_in_a_thread

    container = ModelMeshContainer(lambda: START, per_model=True)
    container.publish(models=models, lru_time_s=START - 100.0)

    async def two_reads(collector: ModelMeshCollector, interval_s: float) -> None:
        """The exporter's reads: one at its start, before ModelMesh's first request, as on a new pod (a model
        counted before it has an unknown time and is not published, `exporter.model_recency`); one with every
        model served since; then none (ModelMesh every hour, as before)."""
        async with aiohttp.ClientSession() as session:
            await collector.scrape_once(session)
            if models:
                container.add_models(models)
            await collector.scrape_once(session)
        await asyncio.Event().wait()

    ModelMeshCollector.run = two_reads  # type: ignore[method-assign,assignment]
    if mode == "every scrape":

        class EveryScrape(RenderedMetrics):
            """All of it rendered at each scrape, as before: the steady collectors served as live ones."""

            def __init__(self, steady: Sequence[Steady], live: Sequence[Collector], gzip_level: int = 6) -> None:
                super().__init__((), [*(part.collector for part in steady), *live], gzip_level)

        exporter.app.RenderedMetrics = EveryScrape  # type: ignore[attr-defined]
    with served_in_a_thread(container) as url:
        settings = ExporterSettings(listen_host="127.0.0.1", listen_port=port, modelmesh_url=url,
                                    modelmesh_interval_s=3600.0, gpu_enabled=False,
                                    identity=PodIdentity("bench", "runtime-0", "uid-0"))
        exporter.app.run(exporter.app.build_app(settings), "127.0.0.1", port)


def wait_for_models(port: int, models: int) -> int:
    """Wait for the exporter's first read (all `models` published); the plain body's size."""
    deadline = time.monotonic() + 60
    while True:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", "/metrics")
        text = connection.getresponse().read()
        connection.close()
        if text.count(b"\nmodelmesh_pod_model_last_served_timestamp_seconds{") == models:
            return len(text)
        if time.monotonic() > deadline:
            raise TimeoutError(f"no read of {models} models in 60 s")
        time.sleep(0.1)


def measure(models: int, scrapes: int, block: int = 100) -> dict[str, float]:
    """CPU ms per scrape of each mode at `models` models, in alternating blocks after a warm-up."""
    script = str(Path(__file__).resolve())
    ports = {mode: free_port() for mode in MODES}
    # Each child's ModelMesh stand-in takes its port from a block of its own, not from this process's block
    blocks = [{"PYTEST_XDIST_WORKER": f"gw{index}"} for index in (1, 2)]
    with child([script, "--serve", MODES[0], "--port", str(ports[MODES[0]]), "--models", str(models)], blocks[0],
               ports[MODES[0]], quiet=True) as first, \
         child([script, "--serve", MODES[1], "--port", str(ports[MODES[1]]), "--models", str(models)], blocks[1],
               ports[MODES[1]], quiet=True) as second:
        size = wait_for_models(ports[MODES[0]], models)
        wait_for_models(ports[MODES[1]], models)
        servers = [Server(MODES[0], ports[MODES[0]], first.pid), Server(MODES[1], ports[MODES[1]], second.pid)]
        gzipped = len(scrape(servers[0].connection, fresh=False))
        block = max(1, min(block, scrapes))
        for server in servers:
            server.block(min(50, block), fresh=False)  # warm-up
            server.reset()
        for _ in range(max(1, scrapes // block)):
            for server in servers:
                server.block(block, fresh=False)
        print(f"\n  {models} models: body {size} bytes as text, {gzipped} as Prometheus gets it (OpenMetrics, gzip)")
        print(f"    {'server':<14} {'median ms':>9} {'CPU ms/scrape':>13}")
        result = {"body_bytes": float(size)}
        for server in servers:
            cpu_ms = server.cpu_s / len(server.latencies) * 1e3
            result[server.name] = cpu_ms
            print(f"    {server.name:<14} {statistics.median(server.latencies) * 1e3:>9.3f} {cpu_ms:>13.3f}")
        return result


def main() -> None:
    options = parse_args()
    if options.serve:
        serve_child(options.serve, options.port, options.models[0])
        return
    print("== /metrics CPU per scrape by model count: rendered once per ModelMesh read, against every scrape")
    results = {models: measure(models, options.scrapes) for models in options.models}
    base = results[options.models[0]][MODES[1]]
    print(f"\n  ratios (baseline: every scrape at {options.models[0]} models, {base:.3f} ms CPU a scrape)")
    print(f"    {'models':>7} {'rendered/every scrape':>22} {'rendered/baseline':>18} {'every scrape/baseline':>22}")
    for models, result in results.items():
        print(f"    {models:>7} {result[MODES[0]] / result[MODES[1]]:>22.2f} {result[MODES[0]] / base:>18.2f} "
              f"{result[MODES[1]] / base:>22.2f}")
    print(json.dumps({str(models): result for models, result in results.items()}))


if __name__ == "__main__":
    main()
