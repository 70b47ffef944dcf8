"""What the API's security costs: the adapter's external-metric endpoint over TLS with authentication and
authorization on, against a bare aiohttp handler returning the same bytes over the same TLS setup.

Both servers run in their own process with the same serving certificate and the same client-certificate
verification; the load generator (one process, aiohttp with keep-alive connections) presents the
aggregator's front-proxy certificate and `X-Remote-User`, as kube-apiserver does. The secured server asks a
fake Kubernetes API for the SubjectAccessReview once; afterwards the cache answers (the steady state of an
HPA polling every 15 s is one review per TTL). Runs alternate between the servers and each server's best run
is kept, so a noisy neighbour hurts both alike. Plain script, no asserts:

    python bench/bench_api.py [--seconds 3] [--concurrency 16] [--rounds 2]

The servers run on CPU 0 and the load generator on CPU 1 (where there are two), so one Python client
process is the load; the ratio stays fair, the absolute figures are a floor.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import shutil
import ssl
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # the fake Kubernetes API and the view builders live in tests/


def parse_args() -> argparse.Namespace:
    """The flags, parsed before the modules a run needs are imported (below), so that `--help` and a
    mistyped flag are answered at once."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=3.0, help="length of one measured run")
    parser.add_argument("--concurrency", type=int, default=16, help="keep-alive connections")
    parser.add_argument("--rounds", type=int, default=2, help="measured runs per server (best is kept)")
    parser.add_argument("--client", choices=["ab", "aiohttp"], default="ab" if shutil.which("ab") else "aiohttp",
                        help="load generator: ApacheBench when installed (Debian apache2-utils), else aiohttp")
    return parser.parse_args()


if __name__ == "__main__":
    parse_args()


import aiohttp  # noqa: E402

from bench import stop_on_term  # noqa: E402
from bench.apachebench import run_ab  # noqa: E402
from bench.bench_fleet import bare_app, listen, server_tls, write_pki  # noqa: E402
from bench.client_priority import client_priority_words  # noqa: E402

HPA_USER = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
HEADERS = {"X-Remote-User": HPA_USER, "X-Remote-Group": "system:serviceaccounts"}
SERVER_CPU, CLIENT_CPU = 0, 1


async def _serve_secured(workdir: Path, ports: multiprocessing.Queue[int]) -> None:
    from autoscaler.api.app import build_api_app
    from autoscaler.api.auth import build_api_security
    from autoscaler.names import API_GROUP
    from autoscaler.selfmetrics import AdapterMetrics
    from autoscaler.settings import ServeSettings
    from tests.api.builders import refresher_with, runtime_view
    from tests.fakes.kube import FakeKubeApi

    async with FakeKubeApi() as kube:
        kube.allow(user=HPA_USER, verb="list", group=API_GROUP)
        settings = ServeSettings(kubeconfig=kube.write_kubeconfig(workdir / "kube.yaml"),
                                 requestheader_client_ca_file=workdir / "front-proxy-ca.pem",
                                 requestheader_allowed_names=("front-proxy-client",))
        tls, metrics = server_tls(workdir), AdapterMetrics()
        security = await build_api_security(settings, tls, metrics)
        view = runtime_view(now=time.time())
        await listen(build_api_app(refresher_with(view, metrics=metrics), metrics, security.gate), tls, ports)


def pin(cpu: int) -> None:
    """Give the servers one core and the load generator another, where there are two: each side then
    competes only with the machine's other work, the same for both servers."""
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {cpu})


def serve_secured(workdir: Path, ports: multiprocessing.Queue[int]) -> None:
    pin(SERVER_CPU)
    asyncio.run(_serve_secured(workdir, ports))


def serve_bare(workdir: Path, body: bytes, ports: multiprocessing.Queue[int]) -> None:
    pin(SERVER_CPU)
    asyncio.run(listen(bare_app(body), server_tls(workdir), ports))


@dataclass
class Run:
    requests: int
    seconds: float
    p50_s: float
    p99_s: float

    @property
    def throughput(self) -> float:
        return self.requests / self.seconds


def percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def aiohttp_load(url: str, context: ssl.SSLContext, seconds: float, concurrency: int) -> Run:
    """Load from this process: aiohttp, `concurrency` keep-alive connections, one request in flight on each."""
    latencies: list[float] = []
    connector = aiohttp.TCPConnector(ssl=context, limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                async with session.get(url, headers=HEADERS) as response:
                    await response.read()
                    if response.status != 200:
                        raise RuntimeError(f"{url}: {response.status} {await response.text()}")
                latencies.append(time.perf_counter() - started)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    return Run(len(latencies), elapsed, percentile(latencies, 0.5), percentile(latencies, 0.99))


def ab_load(url: str, client_pem: Path, seconds: float, concurrency: int) -> Run:
    """Load from ApacheBench: the figure is the server's capacity, not the client's."""
    run = run_ab(url, client_pem, HEADERS, seconds, concurrency)
    return Run(run.requests, run.seconds, run.percentiles_s[50], run.percentiles_s[99])


def start(target: object, *args: object) -> tuple[multiprocessing.process.BaseProcess, int]:
    spawn = multiprocessing.get_context("spawn")
    ports: multiprocessing.Queue[int] = spawn.Queue()
    process = spawn.Process(target=target, args=(*args, ports), daemon=True)  # type: ignore[arg-type]
    process.start()
    return process, ports.get(timeout=60)


async def generate(args: argparse.Namespace, url: str, client: ssl.SSLContext, client_pem: Path,
                   seconds: float) -> Run:
    if args.client == "ab":
        return await asyncio.to_thread(ab_load, url, client_pem, seconds, args.concurrency)
    return await aiohttp_load(url, client, seconds, args.concurrency)


async def measure(args: argparse.Namespace, workdir: Path, client: ssl.SSLContext) -> dict[str, Run]:
    from tests.api.builders import DEPLOYMENT, NAMESPACE

    path = (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{NAMESPACE}/modelmesh_desired_replicas"
            f"?labelSelector=deployment%3D{DEPLOYMENT}")
    secured, secured_port = start(serve_secured, workdir)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client)) as session, \
            session.get(f"https://127.0.0.1:{secured_port}{path}", headers=HEADERS) as response:
        body = await response.read()
        if response.status != 200:
            raise RuntimeError(f"secured server answered {response.status}: {body!r}")
    bare, bare_port = start(serve_bare, workdir, body)
    urls = {"bare aiohttp handler": f"https://127.0.0.1:{bare_port}{path}",
            "adapter, auth on": f"https://127.0.0.1:{secured_port}{path}"}
    best: dict[str, Run] = {}
    client_pem = workdir / "front-proxy-client.pem"
    try:
        for url in urls.values():
            await generate(args, url, client, client_pem, 1.0)  # warm-up: connections, caches, code paths
        for _ in range(args.rounds):
            for name, url in urls.items():
                run = await generate(args, url, client, client_pem, args.seconds)
                if name not in best or run.throughput > best[name].throughput:
                    best[name] = run
    finally:
        for process in (secured, bare):
            process.terminate()
            process.join(5)
    return best


def main() -> None:
    args = parse_args()
    pin(CLIENT_CPU)
    with tempfile.TemporaryDirectory(prefix="bench-api-") as directory:
        workdir = Path(directory)
        client = write_pki(workdir)
        runs = asyncio.run(measure(args, workdir, client))
    print(f"GET .../modelmesh_desired_replicas?labelSelector=... over TLS, front-proxy certificate + X-Remote-User, "
          f"load from {args.client}, {args.concurrency} keep-alive connections, best of {args.rounds} x "
          f"{args.seconds:g} s" + (f"; {client_priority_words()}" if args.client == "ab" else ""))
    print(f"{'server':<24}{'requests/s':>12}{'p50 ms':>10}{'p99 ms':>10}")
    for name, run in runs.items():
        print(f"{name:<24}{run.throughput:>12.0f}{run.p50_s * 1000:>10.2f}{run.p99_s * 1000:>10.2f}")
    bare, secured = runs["bare aiohttp handler"], runs["adapter, auth on"]
    print(f"ratio (adapter / bare): {secured.throughput / bare.throughput:.0%} of the bare handler's throughput "
          "(goal: at least 50%)")


if __name__ == "__main__":
    stop_on_term.run(main)
