"""Memory of the adapter under slow connections: `--slow` clients each open a TLS connection, send part of a
request's headers and dribble one byte every 2 s, reconnecting whenever the adapter closes them, for
`--seconds`; meanwhile a probe asks `/healthz` every second, each time on a new connection. Prints the
adapter's RSS (refresh process and serving workers together) every few seconds, and how many probes were
answered. Plain script, no asserts:

    python bench/bench_connections.py [--slow 2500] [--seconds 30] [--workers 1]

The shipped memory limit is 512 MiB; before connection limits, 1,450 idle TLS connections passed it.

`--refused N` adds N clients that loop on instant 4xx answers (a path that does not exist: 404, as a bad token's
401 would be), `--pipeline` requests at a time on a kept-alive connection, reconnecting at once whenever the
adapter closes it; with `--max-connections` below N they hold every place, and the probes show whether a new
client still gets in:

    python bench/bench_connections.py --slow 0 --refused 64 --pipeline 8 --max-connections 16 --seconds 20

`--greedy N` adds N clients that are served (`/healthz`, 200) in a loop, reconnecting at once whenever the
adapter closes them, all from 127.0.0.1: one address opening many times `--max-connections`. With
`--probe-address 127.0.0.2` the probes come from another address (Linux routes all of 127/8 to loopback), and
show whether that address still gets in (each address has a share of the places):

    python bench/bench_connections.py --slow 0 --greedy 64 --max-connections 16 --probe-address 127.0.0.2 \
        --seconds 20
"""

from __future__ import annotations

import argparse
import asyncio
import os
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import yaml  # noqa: E402


def parse_args() -> argparse.Namespace:
    """The flags, parsed before the modules a run needs are imported (below), so that `--help` and a
    mistyped flag are answered at once."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--slow", type=int, default=2500)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--refused", type=int, default=0, help="clients looping on instant 4xx answers")
    parser.add_argument("--greedy", type=int, default=0,
                        help="clients served in a loop from 127.0.0.1, reconnecting at once when closed")
    parser.add_argument("--pipeline", type=int, default=1,
                        help="requests a refused or greedy client sends at a time")
    parser.add_argument("--probe-address", default=None,
                        help="the probes' source address (e.g. 127.0.0.2: another client address)")
    parser.add_argument("--max-connections", type=int, default=None, help="the adapter's, if not its default")
    return parser.parse_args()


if __name__ == "__main__":
    parse_args()


from bench import stop_on_term  # noqa: E402
from tests.support.ports import free_port  # noqa: E402

INSECURE = ssl.create_default_context()
INSECURE.check_hostname = False
INSECURE.verify_mode = ssl.CERT_NONE


def rss_mib(pid: int) -> float:
    """RSS of `pid` and its children, MiB."""
    total = 0
    pids = [pid] + [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _parent(p) == pid]
    for one in pids:
        try:
            for line in Path(f"/proc/{one}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def _parent(entry: Path) -> int:
    try:
        return int((entry / "stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


async def connect(port: int, counters: dict[str, int]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    """A TLS connection to the adapter, counted as opened or refused (None)."""
    try:
        streams = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port, ssl=INSECURE), 20)
    except (OSError, TimeoutError, ssl.SSLError):
        counters["refused"] += 1
        return None
    counters["opened"] += 1
    return streams


async def slow_client(port: int, until: float, counters: dict[str, int]) -> None:
    while time.monotonic() < until:
        if (streams := await connect(port, counters)) is None:
            await asyncio.sleep(0.5)
            continue
        reader, writer = streams
        try:
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: adapter\r\n")
            while time.monotonic() < until and not reader.at_eof():
                await asyncio.sleep(2)
                writer.write(b"X")
                await writer.drain()
        except (OSError, ssl.SSLError):
            pass
        finally:
            writer.close()


async def refused_client(port: int, until: float, counters: dict[str, int], pipeline: int) -> None:
    await looping_client(port, until, counters, pipeline, "/no-such-path", "4xx answered")


async def greedy_client(port: int, until: float, counters: dict[str, int], pipeline: int) -> None:
    await looping_client(port, until, counters, pipeline, "/healthz", "greedy answered")


async def looping_client(port: int, until: float, counters: dict[str, int], pipeline: int, path: str,
                         counter: str) -> None:
    """`path` asked `pipeline` times at a time on one kept-alive connection, until the adapter closes it; then
    again at once on a new one."""
    batch = f"GET {path} HTTP/1.1\r\nHost: adapter\r\n\r\n".encode() * pipeline
    while time.monotonic() < until:
        if (streams := await connect(port, counters)) is None:
            continue  # again at once
        reader, writer = streams
        try:
            while time.monotonic() < until:
                writer.write(batch)
                for _ in range(pipeline):
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = next(int(line.partition(b":")[2]) for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length:"))
                    await reader.readexactly(length)
                    counters[counter] += 1
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()


async def probe(url: str, until: float, counters: dict[str, int], address: str | None) -> None:
    """`/healthz` every second on a new connection, from `address` (None: the system's choice, 127.0.0.1)."""
    while time.monotonic() < until:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(
                "127.0.0.1", int(url.rsplit(":", 1)[1]), ssl=INSECURE,
                local_addr=(address, 0) if address else None), 5)
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: adapter\r\nConnection: close\r\n\r\n")
            answer = await asyncio.wait_for(reader.read(), 5)
            writer.close()
            counters["probes ok" if answer.startswith(b"HTTP/1.1 200") else "probes failed"] += 1
        except (OSError, TimeoutError, ssl.SSLError):
            counters["probes failed"] += 1
        await asyncio.sleep(1)


async def run(args: argparse.Namespace, pid: int, port: int) -> None:
    counters = {"opened": 0, "refused": 0, "4xx answered": 0, "greedy answered": 0, "probes ok": 0,
                "probes failed": 0}
    until = time.monotonic() + args.seconds
    print(f"adapter RSS before: {rss_mib(pid):.0f} MiB")
    peak = 0.0

    async def monitor() -> None:
        nonlocal peak
        while time.monotonic() < until:
            await asyncio.sleep(3)
            rss = rss_mib(pid)
            peak = max(peak, rss)
            print(f"  t={args.seconds - (until - time.monotonic()):4.0f} s  RSS {rss:6.0f} MiB  {counters}",
                  flush=True)

    tasks = [asyncio.create_task(probe(f"https://127.0.0.1:{port}", until, counters, args.probe_address)),
             asyncio.create_task(monitor())]
    for _ in range(args.refused):
        tasks.append(asyncio.create_task(refused_client(port, until, counters, args.pipeline)))
    for _ in range(args.greedy):
        tasks.append(asyncio.create_task(greedy_client(port, until, counters, args.pipeline)))
    for _ in range(args.slow):
        tasks.append(asyncio.create_task(slow_client(port, until, counters)))
        await asyncio.sleep(0.002)
    await asyncio.gather(*tasks, return_exceptions=True)
    print(f"peak RSS {peak:.0f} MiB with {args.slow} slow clients, {args.refused} refused clients, "
          f"{args.greedy} greedy clients; {counters}")


def main() -> None:
    args = parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-connections-") as directory:
        targets = Path(directory) / "targets.yaml"
        targets.write_text(yaml.safe_dump({"runtimes": [{"namespace": "bench", "deployment": "rt",
                                                          "pods": [{"name": "p", "url": "http://127.0.0.1:9/m"}]}]}))
        adapter = subprocess.Popen(
            [sys.executable, "-m", "autoscaler.cli", "serve", "--insecure-dev", "--listen", f"127.0.0.1:{port}",
             "--targets", str(targets), "--workers", str(args.workers), "--deletion-cost", "off",
             "--log-level", "ERROR",
             *(["--max-connections", str(args.max_connections)] if args.max_connections else [])],
            env={**os.environ, "PYTHONPATH": str(REPO)})
        try:
            time.sleep(4)
            asyncio.run(run(args, adapter.pid, port))
        finally:
            adapter.terminate()
            adapter.wait(20)


if __name__ == "__main__":
    stop_on_term.run(main)
