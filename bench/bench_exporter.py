"""What the exporter costs a runtime pod: one `/metrics` scrape, and the background sampling between scrapes.

Scrape cost. Two server processes serve the same registry contents, built by the same code: ModelMesh
metrics folded from the ModelMesh stand-in's real output, 8 GPUs from the real `GpuCollector` over the fake
NVML library (`tests/fakes/nvml.py`; a stand-in collector with the same families if gcc or the GPU collector
is missing), and the self-metrics. One serves them the way the exporter does (`exporter.app.metrics_app`,
run by `exporter.app.run`), the other with prometheus_client's `start_http_server`, the reference. The
client scrapes like Prometheus (OpenMetrics Accept header, gzip) in alternating blocks, so both see the same
machine state, and reads each server's CPU time from /proc (Linux). Two connection patterns:
`keep-alive` reuses a connection where the server allows it, as Prometheus does (the reference speaks
HTTP/1.0 and closes every time); `fresh` opens a new connection per scrape for both.

Background cost. The real exporter app (`build_app`) with default settings (ModelMesh over https every 5 s,
GPU every 1 s, 8 fake GPUs) runs in its own process without being scraped; its CPU time over
`--background-seconds` (getrusage, all threads) as a share of one core.

Plain script, prints figures, asserts nothing:

    python bench/bench_exporter.py [--gpus 8] [--scrapes 2000] [--background-seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import http.client
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # tests/fakes: the fake NVML library and its controller


def parse_args() -> argparse.Namespace:
    """The flags, parsed before the modules a run needs are imported (below), so that `--help` and a
    mistyped flag are answered at once."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--scrapes", type=int, default=2000, help="per server and connection pattern")
    parser.add_argument("--background-seconds", type=float, default=10.0)
    parser.add_argument("--serve", choices=["exporter", "reference"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--background", nargs=3, metavar=("URL", "CA", "GPU"), help=argparse.SUPPRESS)
    return parser.parse_args()


if __name__ == "__main__":
    parse_args()


from prometheus_client import CollectorRegistry, generate_latest, start_http_server  # noqa: E402
from prometheus_client.core import GaugeMetricFamily, Metric  # noqa: E402
from prometheus_client.registry import Collector  # noqa: E402

from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad  # noqa: E402
from bench import stop_on_term  # noqa: E402
from bench.tail_latency import p99  # noqa: E402
from exporter import names  # noqa: E402
from exporter.collectors.health import CollectorHealth  # noqa: E402
from exporter.collectors.modelmesh import ModelMeshCollector  # noqa: E402
from tests.support.ports import free_port  # noqa: E402

# What Prometheus 2.x sends when it scrapes.
SCRAPE_HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
              "text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    "Accept-Encoding": "gzip",
    "User-Agent": "Prometheus/2.42.0",
}
CLOCK_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
BUSY_PERCENT = (97, 85, 60, 40, 22, 10, 3, 0)


# ---- the registry both servers serve ----


class _SteppedClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class GpuStandIn(Collector):
    """The GPU collector's three families for `gpus` GPUs, for when the real one cannot run here."""

    def __init__(self, gpus: int) -> None:
        self._gpus = gpus

    def collect(self) -> Iterable[Metric]:
        busy = GaugeMetricFamily(names.GPU_BUSY_RATIO, "Fraction of the sample window in which a kernel ran.",
                                 labels=["gpu", "uuid"])
        used = GaugeMetricFamily(names.GPU_MEMORY_USED_BYTES, "GPU memory in use.", labels=["gpu", "uuid"])
        total = GaugeMetricFamily(names.GPU_MEMORY_TOTAL_BYTES, "GPU memory size.", labels=["gpu", "uuid"])
        for index in range(self._gpus):
            labels = [str(index), f"GPU-fa4e0000-0000-0000-0000-{index:012d}"]
            busy.add_metric(labels, BUSY_PERCENT[index % len(BUSY_PERCENT)] / 100)
            used.add_metric(labels, float((index + 1) * 7 << 30))
            total.add_metric(labels, float(80 << 30))
        yield from (busy, used, total)


def build_registry(gpus: int) -> tuple[CollectorRegistry, CollectorHealth, str]:
    """Every family the exporter serves for a busy pod with `gpus` GPUs; also says what the GPUs came from."""
    health = CollectorHealth()
    registry = CollectorRegistry(auto_describe=False)
    clock = _SteppedClock()
    modelmesh = ModelMeshCollector(health, "https://127.0.0.1:2112/metrics", clock=clock)  # fed in-process
    fake = FakeModelMesh(
        ModelMeshLoad(requests_per_second=180.0, queue_delay_ms=12.0, cache_misses_per_second=0.4,
                      models_loaded=24, cache_used_ratio=0.93, lru_age_s=1800.0), clock=clock,
    )
    source = CollectorRegistry(auto_describe=False)
    source.register(fake)
    for _ in range(7):
        clock.now += 5.0
        modelmesh.ingest(generate_latest(source).decode(), clock.now)
    health.succeeded(names.COLLECTOR_MODELMESH)
    health.observe_duration(names.COLLECTOR_MODELMESH, 0.004)
    registry.register(modelmesh)
    gpu_origin = "stand-in collector"
    if os.environ.get("FAKE_NVML_STATE"):
        from exporter.collectors.gpu import GpuCollector

        gpu = GpuCollector(health, window_s=10.0)
        gpu.sample_once()
        time.sleep(0.4)
        gpu.sample_once()
        if len(gpu.readings) == gpus:
            registry.register(gpu)
            gpu_origin = "GpuCollector over the fake NVML library"
    if gpu_origin == "stand-in collector":
        registry.register(GpuStandIn(gpus))
        health.succeeded(names.COLLECTOR_GPU)
    registry.register(health)
    return registry, health, gpu_origin


# ---- child processes ----


def serve_child(kind: str, port: int, gpus: int) -> None:
    """`--serve exporter|reference`: serve the registry on 127.0.0.1:port until killed."""
    registry, health, origin = build_registry(gpus)
    started, renders = time.process_time(), 500
    for _ in range(renders):
        generate_latest(registry)
    render_ms = (time.process_time() - started) / renders * 1e3
    print(json.dumps({"gpus": origin, "render_ms": render_ms}), flush=True)
    if kind == "reference":
        start_http_server(port, addr="127.0.0.1", registry=registry)
        while True:
            time.sleep(3600)
    from exporter.app import metrics_app, run

    run(metrics_app(registry, health), "127.0.0.1", port)


def background_child(seconds: float, modelmesh_url: str, ca_file: str, gpus: bool) -> None:
    """`--background`: the real exporter app with default intervals, unscraped; print its CPU share."""
    from aiohttp import web

    from exporter.app import build_app
    from exporter.settings import ExporterSettings

    async def measure() -> dict[str, float]:
        settings = ExporterSettings(listen_host="127.0.0.1", listen_port=0, modelmesh_url=modelmesh_url,
                                    modelmesh_ca_file=Path(ca_file), gpu_enabled=gpus)
        runner = web.AppRunner(build_app(settings), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        try:
            await asyncio.sleep(2.0)  # start-up: imports settle, first TLS handshake, NVML init
            usage, wall = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
            await asyncio.sleep(seconds)
            after, elapsed = resource.getrusage(resource.RUSAGE_SELF), time.monotonic() - wall
        finally:
            await runner.cleanup()
        cpu = (after.ru_utime - usage.ru_utime) + (after.ru_stime - usage.ru_stime)
        return {"cpu_s": cpu, "wall_s": elapsed}

    print(json.dumps(asyncio.run(measure())), flush=True)


# ---- measuring ----


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process and its finished threads (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * CLOCK_TICK_S


@contextmanager
def child(
    args: list[str], env: dict[str, str], ready_port: int | None = None, quiet: bool = False,
) -> Iterator[subprocess.Popen[str]]:
    """Run `python ARGS` (stdout piped) until the block ends; wait for `ready_port` to serve /metrics."""
    process = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, text=True,
                               stderr=subprocess.DEVNULL if quiet else None, env={**os.environ, **env})
    try:
        if ready_port is not None:
            deadline = time.monotonic() + 30
            while True:
                try:
                    scrape(http.client.HTTPConnection("127.0.0.1", ready_port, timeout=2), fresh=True)
                    break
                except OSError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def scrape(connection: http.client.HTTPConnection, fresh: bool) -> bytes:
    connection.request("GET", "/metrics", headers=SCRAPE_HEADERS)
    response = connection.getresponse()
    body = response.read()
    if response.status != 200:
        raise OSError(f"HTTP {response.status}")
    if fresh:
        connection.close()
    return body


class Server:
    def __init__(self, name: str, port: int, pid: int) -> None:
        self.name, self.port, self.pid = name, port, pid
        self.latencies: list[float] = []
        self.cpu_s = 0.0
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

    def block(self, count: int, fresh: bool) -> None:
        cpu = process_cpu_s(self.pid)
        for _ in range(count):
            if fresh:
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
            started = time.perf_counter()
            scrape(self.connection, fresh)
            self.latencies.append(time.perf_counter() - started)
        self.cpu_s += process_cpu_s(self.pid) - cpu

    def reset(self) -> None:
        self.latencies, self.cpu_s = [], 0.0
        self.connection.close()
        self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)


def compare(servers: list[Server], scrapes: int, fresh: bool, block: int = 100) -> None:
    """`scrapes` of each server in alternating blocks, after a warm-up. A run of fewer than a block (a quick run)
    is one block of that many, warmed up with as many: `--scrapes 2` scraped each server 150 times a pattern."""
    block = max(1, min(block, scrapes))
    for server in servers:
        server.reset()
        server.block(min(50, block), fresh)  # warm-up
        server.reset()
    for _ in range(max(1, scrapes // block)):
        for server in servers:
            server.block(block, fresh)
    label = "fresh connection per scrape" if fresh else "keep-alive where the server allows (as Prometheus)"
    print(f"\n  {label}, {len(servers[0].latencies)} scrapes each:")
    print(f"    {'server':<34} {'median ms':>9} {'p99 ms':>8} {'CPU ms/scrape':>13}")
    rows = []
    for server in servers:
        median, tail = statistics.median(server.latencies), p99(server.latencies)
        cpu = server.cpu_s / len(server.latencies)
        rows.append((median, tail, cpu))
        print(f"    {server.name:<34} {median * 1e3:>9.3f} {tail * 1e3:>8.3f} {cpu * 1e3:>13.3f}")
    (m0, t0, c0), (m1, t1, c1) = rows
    cpu_ratio = c0 / c1 if c1 else float("nan")
    print(f"    {'ratio exporter / reference':<34} {m0 / m1:>9.2f} {t0 / t1:>8.2f} {cpu_ratio:>13.2f}")


def fake_gpus(workdir: Path, gpus: int) -> dict[str, str]:
    """Environment for children that load the fake NVML with `gpus` GPUs; empty if it cannot be built."""
    if shutil.which("gcc") is None:
        print("  gcc missing: GPU families come from a stand-in collector")
        return {}
    try:
        import exporter.collectors.gpu  # noqa: F401
        from tests.fakes.nvml import FakeNvml
    except ImportError as error:
        print(f"  GPU collector or fake NVML unavailable ({error}): stand-in collector")
        return {}
    fake = FakeNvml.create(workdir, gpus=gpus)
    for index in range(gpus):
        fake.set_gpu(index, util=BUSY_PERCENT[index % len(BUSY_PERCENT)], mem_used=(index + 1) * 7 << 30)
    return fake.env()


def main() -> None:
    options = parse_args()
    if options.serve:
        serve_child(options.serve, options.port, options.gpus)
        return
    if options.background:
        url, ca, gpu = options.background
        background_child(options.background_seconds, url, ca, gpu == "on")
        return

    workdir = Path(tempfile.mkdtemp(prefix="bench-exporter-"))
    try:
        env = fake_gpus(workdir, options.gpus)
        print(f"== /metrics scrape cost: {options.gpus} GPUs + every ModelMesh metric + self-metrics")
        ports = {"exporter": free_port(), "reference": free_port()}
        script = str(Path(__file__).resolve())
        common = ["--gpus", str(options.gpus)]
        with child([script, "--serve", "exporter", "--port", str(ports["exporter"]), *common], env,
                   ports["exporter"]) as exporter_process, \
             child([script, "--serve", "reference", "--port", str(ports["reference"]), *common], env,
                   ports["reference"]) as reference_process:
            assert exporter_process.stdout is not None
            started = json.loads(exporter_process.stdout.readline())
            plain = http.client.HTTPConnection("127.0.0.1", ports["exporter"], timeout=10)
            plain.request("GET", "/metrics")
            text = plain.getresponse().read()
            plain.close()
            samples = len([line for line in text.splitlines() if line and not line.startswith(b"#")])
            print(f"  GPU families from: {started['gpus']}")
            print(f"  body: {len(text)} bytes in the text format, {len(gzip.compress(text))} gzipped, "
                  f"{samples} samples; generate_latest alone: {started['render_ms']:.3f} ms CPU")
            servers = [
                Server("exporter (aiohttp, metrics_app)", ports["exporter"], exporter_process.pid),
                Server("reference (start_http_server)", ports["reference"], reference_process.pid),
            ]
            compare(servers, options.scrapes, fresh=False)
            compare(servers, options.scrapes, fresh=True)

        print(f"\n== background sampling at default settings, unscraped, over {options.background_seconds:g} s")
        port = free_port()
        cert_dir = workdir / "mm-tls"
        with child(["-m", "autoscaler.demo.fake_modelmesh", "--listen", f"127.0.0.1:{port}", "--rps", "180",
                    "--cert-dir", str(cert_dir)], {}, quiet=True):
            deadline = time.monotonic() + 20
            while not (cert_dir / "tls.crt").exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(0.5)
            for gpu in (["off"] + (["on"] if env else [])):
                url, ca = f"https://127.0.0.1:{port}/metrics", str(cert_dir / "tls.crt")
                with child([script, "--background", url, ca, gpu, "--background-seconds",
                            str(options.background_seconds)], env if gpu == "on" else {}) as process:
                    out, _ = process.communicate(timeout=options.background_seconds + 60)
                result = json.loads(out.strip().splitlines()[-1])
                share = result["cpu_s"] / result["wall_s"] * 100
                what = (f"ModelMesh every 5 s + {options.gpus} GPUs every 1 s" if gpu == "on"
                        else "ModelMesh every 5 s, --no-gpu")
                print(f"  {what:<44} {result['cpu_s'] * 1e3:7.1f} ms CPU in {result['wall_s']:.1f} s "
                      f"= {share:.3f} % of one core")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    stop_on_term.run(main)
