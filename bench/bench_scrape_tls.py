"""What scraping exporters over HTTPS (with client certificates) costs the adapter per refresh, against plain HTTP
in the same run, and how many connections (so TLS handshakes) each refresh opens at the exporters.

Why a bench of its own: a TLS handshake costs the client about a millisecond of CPU, a scrape over an open
connection a fraction of that. If the scrape's connections do not live from one refresh to the next, every
refresh pays one handshake per pod, and at thousands of pods that is seconds of CPU every 15 s. So the refreshes
here are spaced by the refresh interval (15 s by default, as the adapter's), not run back to back, which would
reuse every connection whatever the keep-alive.

The exporters run in a child process (the adapter's CPU is measured alone, the exporters' is printed beside it):
one aiohttp server with the exporter's own TLS context (`exporter.metrics_tls.serve_over_tls`: the serving
certificate and `--tls-client-ca-file`), listening on every address, so that pod N is reached at its own loopback
address 127.0.x.y, as pods have their own IPs: the adapter keeps one connection per address, never one for the
whole fleet. The adapter scrapes them with `--exporter-server-name` and a client certificate, as
manifests/examples/exporter-tls does. The child counts the connections it accepts, per scheme.

`python -m bench.bench_scrape_tls --exporters 1000 --rounds 5`. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path


def parse_args() -> argparse.Namespace:
    """The flags, parsed before the modules a run needs are imported (below), so that `--help` and a
    mistyped flag are answered at once."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exporters", type=int, default=1000, help="exporters scraped, in 10 runtimes (default 1000)")
    parser.add_argument("--gpus", type=int, default=8, help="GPUs in each exporter's output (default 8)")
    parser.add_argument("--rounds", type=int, default=5, help="refreshes per scheme (default 5)")
    parser.add_argument("--interval", type=float, default=15.0,
                        help="seconds between a scheme's refreshes, the adapter's --refresh-interval (default 15)")
    parser.add_argument("--concurrency", type=int, default=64, help="the adapter's --scrape-concurrency (default 64)")
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)  # the child: serve the exporters from this PKI
    return parser.parse_args()


if __name__ == "__main__":
    parse_args()


import aiohttp  # noqa: E402
import trustme  # noqa: E402
from aiohttp import web  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # the static discovery the source tests use lives in tests/

from autoscaler.model import RuntimeKey  # noqa: E402
from autoscaler.sources.base import PodTarget, RuntimeInventory  # noqa: E402
from autoscaler.sources.scrape import ScrapeSource  # noqa: E402
from autoscaler.sources.scrape_tls import exporter_client_tls  # noqa: E402
from bench import stop_on_term  # noqa: E402
from bench.fake_exporter import NAMESPACE, bench_pod, exporter_text  # noqa: E402
from exporter.metrics_tls import serve_over_tls  # noqa: E402
from exporter.settings import ExporterSettings  # noqa: E402
from tests.sources.static_discovery import StaticDiscovery  # noqa: E402
from tests.support.certificates import issue_cert  # noqa: E402

RUNTIMES = 10
SERVER_NAME = "exporter.bench.svc"
SCHEMES = ("http", "https")


def pod_address(pod: int) -> str:
    """Pod number `pod`'s own loopback address (127.0.0.0/8 is all loopback on Linux), never 127.0.0.1 itself."""
    return f"127.{1 + pod // 62500}.{pod // 250 % 250}.{1 + pod % 250}"


# --- the exporters' side (child process) --------------------------------------------------------------------------

async def serve(exporters: int, gpus: int, pki: Path, ready: Path) -> None:
    bodies = {pod: exporter_text(pod, gpus=gpus, modelmesh_stamp=time.time()) for pod in range(exporters)}
    seen: dict[str, set[asyncio.BaseTransport]] = {scheme: set() for scheme in SCHEMES}
    counted = {scheme: 0 for scheme in SCHEMES}

    def exporter(scheme: str) -> web.Application:
        async def metrics(request: web.Request) -> web.Response:
            if request.transport is not None:
                seen[scheme].add(request.transport)  # held, so that no later connection shares its id
            return web.Response(body=bodies[int(request.match_info["pod"])], content_type="text/plain")

        app = web.Application()
        app.router.add_get("/{pod}/metrics", metrics)
        return app

    async def connections(request: web.Request) -> web.Response:
        """The connections each scheme's exporters accepted since the last ask, and this process's CPU."""
        new = {scheme: len(seen[scheme]) - counted[scheme] for scheme in SCHEMES}
        counted.update({scheme: len(seen[scheme]) for scheme in SCHEMES})
        return web.json_response({"connections": new, "cpu_s": time.process_time()})

    plain, secure = exporter("http"), exporter("https")
    settings = replace(ExporterSettings(), tls_cert_file=pki / "tls.crt", tls_key_file=pki / "tls.key",
                       tls_client_ca_file=pki / "ca.pem")
    context = serve_over_tls(secure, settings)
    control = web.Application()
    control.router.add_get("/connections", connections)
    runners = []
    # Every address: pod N is at 127.x.y.z (above). keepalive_timeout as `web.run_app`, which the exporter runs.
    for app, port_file, ssl_context in ((plain, "http.port", None), (secure, "https.port", context),
                                        (control, "control.port", None)):
        runner = web.AppRunner(app, access_log=None, keepalive_timeout=75.0)
        await runner.setup()
        site = web.TCPSite(runner, "0.0.0.0" if app is not control else "127.0.0.1", 0, ssl_context=ssl_context,
                           backlog=4096)
        await site.start()
        (pki / port_file).write_text(str(runner.addresses[0][1]))
        runners.append(runner)
    ready.touch()
    await asyncio.Event().wait()


# --- the adapter's side -------------------------------------------------------------------------------------------

def scrape_source(scheme: str, port: int, exporters: int, concurrency: int, pki: Path) -> ScrapeSource:
    per_runtime = exporters // RUNTIMES
    inventory = [
        RuntimeInventory(RuntimeKey(NAMESPACE, f"modelmesh-serving-rt{runtime}"), tuple(
            PodTarget(bench_pod(pod).name or "", True, f"{scheme}://{pod_address(pod)}:{port}/{pod}/metrics",
                      uid=bench_pod(pod).uid)
            for pod in range(runtime * per_runtime, (runtime + 1) * per_runtime)))
        for runtime in range(RUNTIMES)
    ]
    tls = exporter_client_tls(pki / "ca.pem", pki / "client.crt", pki / "client.key")
    return ScrapeSource(StaticDiscovery(inventory), timeout_s=10, concurrency=concurrency,
                        ssl_context=tls.context if scheme == "https" else None,
                        server_name=SERVER_NAME if scheme == "https" else None,
                        client_certificate=tls.client_certificate if scheme == "https" else None)


def write_pki(directory: Path) -> None:
    authority = trustme.CA()
    authority.cert_pem.write_to_path(str(directory / "ca.pem"))
    serving = issue_cert(authority, SERVER_NAME)
    serving.private_key_and_cert_chain_pem.write_to_path(str(directory / "tls.crt"))
    serving.private_key_pem.write_to_path(str(directory / "tls.key"))
    client = issue_cert(authority, "modelmesh-autoscaler")
    client.cert_chain_pems[0].write_to_path(str(directory / "client.crt"))
    client.private_key_pem.write_to_path(str(directory / "client.key"))


async def measure(exporters: int, rounds: int, interval_s: float, concurrency: int, pki: Path) -> None:
    ports = {scheme: int((pki / f"{scheme}.port").read_text()) for scheme in SCHEMES}
    control = f"http://127.0.0.1:{(pki / 'control.port').read_text()}/connections"
    sources = {scheme: scrape_source(scheme, ports[scheme], exporters, concurrency, pki) for scheme in SCHEMES}
    cpu: dict[str, list[float]] = {scheme: [] for scheme in SCHEMES}
    opened: dict[str, list[int]] = {scheme: [] for scheme in SCHEMES}
    exporters_cpu: dict[str, list[float]] = {scheme: [] for scheme in SCHEMES}
    try:
        async with aiohttp.ClientSession() as asking:
            async def ask() -> dict[str, object]:
                async with asking.get(control) as answer:
                    return dict(await answer.json())

            await ask()
            for number in range(rounds):
                started = time.monotonic()
                for scheme in SCHEMES:  # alternating, so that a machine slowing down weighs on both alike
                    before, served_before = time.process_time(), await ask()
                    snapshots = await sources[scheme].collect(time.time())
                    cpu[scheme].append(time.process_time() - before)
                    served = await ask()
                    opened[scheme].append(int(served["connections"][scheme]))  # type: ignore[index]
                    exporters_cpu[scheme].append(float(served["cpu_s"]) - float(served_before["cpu_s"]))  # type: ignore[arg-type]
                    fresh = sum(1 for s in snapshots for p in s.pods if p.sampled_at is not None)
                    print(f"  round {number + 1} {scheme:5}: adapter CPU {cpu[scheme][-1] * 1000:6.0f} ms, exporters' "
                          f"CPU {exporters_cpu[scheme][-1] * 1000:6.0f} ms, connections opened {opened[scheme][-1]:5}, "
                          f"pods scraped {fresh}/{exporters}, adapter's open files {len(os.listdir('/proc/self/fd'))}",
                          flush=True)
                if number + 1 < rounds:
                    await asyncio.sleep(max(0.0, started + interval_s - time.monotonic()))
    finally:  # a SIGTERM or Ctrl-C too: no connector left unclosed
        for source in sources.values():
            await source.close()
    steady = slice(1, None) if rounds > 1 else slice(None)  # the first refresh opens every connection anyway
    # Means, not medians: where connections are dropped, it is some refreshes that pay every handshake (those
    # after the pool's clean-up ran), and the others almost none; what a fleet pays is the mean.
    http, https = statistics.mean(cpu["http"][steady]), statistics.mean(cpu["https"][steady])
    print(f"after the first refresh, mean per refresh: adapter CPU http {http * 1000:.0f} ms, https "
          f"{https * 1000:.0f} ms, https/http {https / http:.2f}; exporters' CPU http "
          f"{statistics.mean(exporters_cpu['http'][steady]) * 1000:.0f} ms, https "
          f"{statistics.mean(exporters_cpu['https'][steady]) * 1000:.0f} ms; connections opened http "
          f"{statistics.mean(opened['http'][steady]):.0f}, https {statistics.mean(opened['https'][steady]):.0f} "
          f"(of {exporters})")


def main() -> None:
    args = parse_args()
    exporters = max(1, args.exporters // RUNTIMES) * RUNTIMES
    if args.serve is not None:
        asyncio.run(serve(exporters, args.gpus, args.serve, args.serve / "ready"))
        return
    with tempfile.TemporaryDirectory(prefix="bench-scrape-tls-") as directory:
        pki = Path(directory)
        write_pki(pki)
        child = subprocess.Popen([sys.executable, "-m", "bench.bench_scrape_tls", "--serve", str(pki),
                                  "--exporters", str(exporters), "--gpus", str(args.gpus)], cwd=REPO)
        try:
            while not (pki / "ready").exists():
                if child.poll() is not None:
                    raise SystemExit(f"the exporters' process exited {child.returncode}")
                time.sleep(0.1)
            print(f"{exporters} exporters ({args.gpus} GPUs each) at their own loopback addresses, concurrency "
                  f"{args.concurrency}, a refresh every {args.interval:g} s per scheme, {args.rounds} rounds; https "
                  f"with --exporter-server-name, a client certificate and the exporters' --tls-client-ca-file")
            asyncio.run(measure(exporters, args.rounds, args.interval, args.concurrency, pki))
        finally:
            child.terminate()
            child.wait()


if __name__ == "__main__":
    if "--serve" in sys.argv[1:]:
        main()  # the exporters' process: SIGTERM's default ends it (it holds only sockets), never mid-callback
    else:
        stop_on_term.run(main)
