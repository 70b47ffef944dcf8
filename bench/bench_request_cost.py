"""CPU instructions one request costs the adapter's serving worker, against the bare aiohttp TLS handler: the
"throughput per serving core" of `bench_fleet.py` as a count that does not move with the machine's load.

`bench_fleet.py` reads the serving processes' CPU time from /proc; on a small shared machine that figure swings
by up to 2x with whatever else runs (two vCPUs that share a core). Instructions do not: each server runs under
valgrind's callgrind with instrumentation off until it is warm, then the counters are zeroed, a fixed number of
requests is sent over keep-alive TLS connections (the aggregator's front-proxy certificate and `X-Remote-User`,
as bench_fleet sends them), and the counters are dumped. Counted: every user-space instruction of the serving
process (the adapter's one worker; the bare handler's process), TLS included; not the kernel's. The adapter runs
with its refresh far apart (`--refresh-interval 3600`), so no snapshot arrives while it is counted.

    python bench/bench_request_cost.py [--runtimes 1000] [--requests 2000] [--concurrency 8]

Prints instructions per request of each server and their ratio (bare / adapter: the share of the bare
handler's throughput one serving core would reach, if instructions were time). Under valgrind a request takes
about 50x its usual time, so a run takes a few minutes. Plain script, no asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def build_parser() -> argparse.ArgumentParser:
    """The flags, read before the modules a run needs are imported (below), so that `--help` and a
    mistyped flag are answered at once."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runtimes", type=int, default=1000,
                        help="fleet size: the counted requests ask its answers in turn, each once when --requests is "
                        "at most runtimes x 4, as HPAs do between two refreshes")
    parser.add_argument("--requests", type=int, default=2000, help="requests counted per server")
    parser.add_argument("--warm", type=int, default=0, help="requests sent before counting (at least one for "
                        "each runtime x metric)")
    parser.add_argument("--concurrency", type=int, default=8, help="keep-alive connections")
    parser.add_argument("--client", choices=("aiohttp", "ab"), default="aiohttp",
                        help="aiohttp: every runtime x metric in turn over connections kept from the warm-up "
                        "(as HPAs ask); ab: one URL again and again, as bench_fleet.py's load run (the /proc "
                        "figure) asks it, each server counted for a short and a longer run and the difference "
                        "taken, so that ab's handshakes are not counted")
    parser.add_argument("--simulate", action="store_true",
                        help="also simulate the caches and branch predictor (callgrind's models): misses and "
                        "mispredictions a request, where time per instruction can differ between the servers")
    parser.add_argument("--adapter-only", action="store_true",
                        help="count the adapter only (when comparing changes to it: the bare figure does not move)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="copy the callgrind dumps here (read them with callgrind_annotate)")
    return parser


if __name__ == "__main__":
    build_parser().parse_args()


import aiohttp  # noqa: E402

from bench import stop_on_term  # noqa: E402
from bench.bench_fleet import (  # noqa: E402
    HEADERS,
    METRICS,
    bare_app,
    metric_path,
    serve_fleet,
    serve_kube,
    server_tls,
    start,
    wait_served,
    write_pki,
    write_targets,
)
from tests.support.ports import free_port  # noqa: E402
from tests.support.processes import serving_workers  # noqa: E402

STARTUP_TIMEOUT_S = 600.0  # imports and the first refresh under valgrind


def callgrind(out: Path, simulate: bool = False) -> list[str]:
    """valgrind's callgrind, counting from when it is told to; `simulate`: with its cache and branch-predictor
    models too (misses, mispredictions), several times slower."""
    return ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--trace-children=yes",
            f"--callgrind-out-file={out}/callgrind.%p", "--dump-instr=no", "--compress-strings=no",
            *(["--cache-sim=yes", "--branch-sim=yes"] if simulate else [])]


Events = dict[str, float]
"""callgrind's events by name: `Ir` (instructions), and with the simulation `I1mr`, `D1mr`, `D1mw` (first-level
misses), `ILmr`, `DLmr`, `DLmw` (last-level), `Bcm`, `Bim` (mispredicted conditional and indirect branches)."""


def control(*args: str) -> None:
    subprocess.run(["callgrind_control", *args], check=True, capture_output=True, timeout=120)


def dumped_events(out: Path, pid: int) -> Events:
    """The events of the last dump of `pid` (callgrind numbers its dumps: callgrind.PID.N)."""
    dumps = sorted(out.glob(f"callgrind.{pid}.*"), key=lambda path: int(path.suffix[1:]))
    if not dumps:
        raise RuntimeError(f"no callgrind dump of process {pid} in {out}")
    text = dumps[-1].read_text(errors="replace")
    names = re.search(r"^events: (.+)$", text, re.M)
    match = re.search(r"^(?:summary|totals): ([\d ]+)$", text, re.M)
    if names is None or match is None:
        raise RuntimeError(f"{dumps[-1]}: no events or totals line")
    return {name: float(value) for name, value in zip(names.group(1).split(), match.group(1).split(), strict=False)}


def per_request(before: Events, after: Events, requests: int) -> Events:
    return {name: (after[name] - before.get(name, 0.0)) / requests for name in after}


async def send(session: aiohttp.ClientSession, urls: list[str], requests: int, concurrency: int,
               first: int = 0) -> int:
    """`requests` GETs, `concurrency` at a time, for urls[first], urls[first + 1], ... round the list; the
    number answered 200."""
    answered = 0

    async def worker(offset: int) -> None:
        nonlocal answered
        for index in range(first + offset, first + requests, concurrency):
            async with session.get(urls[index % len(urls)], headers=HEADERS) as response:
                body = await response.read()
                answered += response.status == 200
                if response.status != 200 and len(failures) < 5:
                    failures.append(f"{response.status} {body[:200]!r}")

    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return answered


def ab_requests(url: str, client_pem: Path, requests: int, concurrency: int) -> int:
    """`requests` keep-alive GETs of one URL over `concurrency` new connections from ApacheBench, as
    `bench_fleet.py`'s load run sends them (HTTP/1.0 keep-alive, ab's own headers); the number answered 2xx."""
    from bench.bench_serving_kernel import ab

    return ab(url, client_pem, requests, concurrency)


async def count_ab(pid: int, out: Path, url: str, client_pem: Path, args: argparse.Namespace) -> Events:
    """Instructions per request of `pid` under ab's requests for one URL, as `bench_fleet.py`'s /proc figure is
    measured. ab opens its connections anew each run, so each server is counted for a short run and for one
    `--requests` longer, and the difference is divided by `--requests`: the handshakes cancel out."""
    await asyncio.to_thread(control, "--instr=on", str(pid))
    await asyncio.to_thread(ab_requests, url, client_pem, max(args.warm, 200), args.concurrency)
    totals = []
    for requests in (SHORT_AB_RUN, SHORT_AB_RUN + args.requests):
        await asyncio.to_thread(control, "--zero", str(pid))
        await asyncio.to_thread(ab_requests, url, client_pem, requests, args.concurrency)
        await asyncio.to_thread(control, "--dump", str(pid))
        totals.append(dumped_events(out, pid))
    return per_request(totals[0], totals[1], args.requests)


SHORT_AB_RUN = 200
"""The requests of the short ab run whose count (handshakes included) is taken from the long one's."""


SIMULATED = (("I1mr", "L1 instruction misses"), ("D1mr", "L1 data read misses"), ("D1mw", "L1 data write misses"),
             ("ILmr", "last-level instruction misses"), ("DLmr", "last-level data read misses"),
             ("DLmw", "last-level data write misses"), ("Bcm", "mispredicted conditional branches"),
             ("Bim", "mispredicted indirect branches"))


def simulated_words(events: Events) -> str:
    """The simulated misses a request, where `--simulate` counted them."""
    return "".join(f"; {events[name]:,.0f} {words}" for name, words in SIMULATED if name in events)


failures: list[str] = []
"""The first few answers other than 200, printed when a count is refused for them."""


async def count(pid: int, out: Path, urls: list[str], client: ssl.SSLContext, args: argparse.Namespace) -> Events:
    """Instructions per request of the serving process `pid`, already under callgrind. The warm-up asks every
    answer once (as HPAs have, by the time a fleet runs steadily) over the connections that the counted
    requests then reuse, as the aggregator keeps its connections open: no TLS handshake is counted."""
    connector = aiohttp.TCPConnector(ssl=client, limit=args.concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.to_thread(control, "--instr=on", str(pid))
        warm = max(args.warm, len(urls))
        await send(session, urls, warm, args.concurrency)  # code translated with instrumentation, caches warm
        await asyncio.to_thread(control, "--zero", str(pid))
        failures.clear()
        answered = await send(session, urls, args.requests, args.concurrency, first=warm)
        await asyncio.to_thread(control, "--dump", str(pid))
    if answered != args.requests:
        raise RuntimeError(f"only {answered} of {args.requests} requests were answered 200; the first others: "
                           + "; ".join(failures))
    return per_request({}, dumped_events(out, pid), args.requests)


def bare_main(workdir: str, body_file: str, port: int) -> None:
    """The bare handler, as bench_fleet's, on a known port (this process runs under valgrind)."""
    from aiohttp import web

    web.run_app(bare_app(Path(body_file).read_bytes()), host="127.0.0.1", port=port,
                ssl_context=server_tls(Path(workdir)), access_log=None, print=None)


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--serve-bare":
        bare_main(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = build_parser()
    args = parser.parse_args()
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        parser.error("needs valgrind (Debian: apt-get install valgrind), whose callgrind counts the instructions")
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": "0"}
    with tempfile.TemporaryDirectory(prefix="bench-request-cost-") as directory:
        workdir = Path(directory)
        client = write_pki(workdir)
        fleet, fleet_port = start(serve_fleet, args.runtimes * 2)
        kube, _ = start(serve_kube, workdir)
        targets = write_targets(workdir / "targets.yaml", args.runtimes, fleet_port)
        processes: list[subprocess.Popen[bytes]] = []
        try:
            port = free_port()
            base = f"https://127.0.0.1:{port}"
            adapter_out = workdir / "adapter"
            adapter_out.mkdir()
            log = open(workdir / "adapter.log", "wb")  # noqa: SIM115
            processes.append(subprocess.Popen(
                [*callgrind(adapter_out, args.simulate), sys.executable, "-m", "autoscaler.cli", "serve", "--listen",
                 f"127.0.0.1:{port}", "--tls-cert-file", str(workdir / "server.pem"), "--tls-private-key-file",
                 str(workdir / "server.pem"), "--requestheader-client-ca-file", str(workdir / "front-proxy-ca.pem"),
                 "--requestheader-allowed-names", "front-proxy-client", "--kubeconfig", str(workdir / "kubeconfig"),
                 "--targets", str(targets), "--refresh-interval", "3600", "--workers", "1", "--deletion-cost",
                 "off", "--log-level", "WARNING"], stdout=log, stderr=subprocess.STDOUT, env=env))
            started = time.monotonic()
            body = asyncio.run(wait_served(base + metric_path(args.runtimes - 1, METRICS[0]), client,
                                           STARTUP_TIMEOUT_S))
            workers = serving_workers(processes[0].pid)
            if len(workers) != 1:
                raise RuntimeError(f"expected one serving worker, found {workers}")
            adapter_urls = [base + metric_path(r, m) for r in range(args.runtimes) for m in METRICS]
            print(f"adapter served after {time.monotonic() - started:.0f} s under valgrind; counting", flush=True)
            pem = workdir / "front-proxy-client.pem"
            if args.client == "ab":
                adapter = asyncio.run(count_ab(workers[0], adapter_out, adapter_urls[0], pem, args))
            else:
                adapter = asyncio.run(count(workers[0], adapter_out, adapter_urls, client, args))
            if args.adapter_only:
                print(f"adapter: {adapter['Ir'] / 1e3:.1f}k instructions a request" + simulated_words(adapter))
                return

            bare_port = free_port()
            bare_out = workdir / "bare"
            bare_out.mkdir()
            (workdir / "body.json").write_bytes(body)
            processes.append(subprocess.Popen(
                [*callgrind(bare_out, args.simulate), sys.executable, __file__, "--serve-bare", str(workdir),
                 str(workdir / "body.json"), str(bare_port)], env=env))
            bare_base = f"https://127.0.0.1:{bare_port}"
            asyncio.run(wait_served(bare_base + metric_path(0, METRICS[0]), client, STARTUP_TIMEOUT_S))
            bare_urls = [bare_base + metric_path(r, m) for r in range(args.runtimes) for m in METRICS]
            if args.client == "ab":
                bare = asyncio.run(count_ab(processes[1].pid, bare_out, bare_urls[0], pem, args))
            else:
                bare = asyncio.run(count(processes[1].pid, bare_out, bare_urls, client, args))
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()
            for child in (fleet, kube):
                child.terminate()
                child.join(5)
            if args.keep is not None:
                shutil.copytree(workdir, args.keep, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("*.pem", "*.yaml", "kubeconfig"))
    print("| runtimes | client | requests x connections | adapter instructions a request | bare | bare / adapter |")
    print("|---|---|---|---|---|---|")
    print(f"| {args.runtimes} | {args.client} | {args.requests} x {args.concurrency} | {adapter['Ir'] / 1e3:.0f}k "
          f"| {bare['Ir'] / 1e3:.0f}k | {bare['Ir'] / adapter['Ir']:.2f} |")
    if args.simulate:
        print(f"adapter:{simulated_words(adapter)}")
        print(f"bare:{simulated_words(bare)}")


if __name__ == "__main__":
    stop_on_term.run(main)
