"""How long a serving worker's event loop stalls while it swaps in the refresh process's next snapshot.

A worker (`autoscaler.workers`) receives the whole `ServingSnapshot` after every refresh: about 17 MiB at
5,000 runtimes. This script builds such a snapshot the way the refresh does (decisions, then
`render_snapshot`), then, in one process, runs a ticker on an event loop (it wakes every millisecond and does
one lookup, as a request would) while another process sends the snapshot over a `multiprocessing` pipe
and the loop swaps it in, interleaving the ways of receiving it:

    no swap (noise floor)           the loop ticking while nothing is received
    pickle, decoded on the loop     what workers did before (`pickle.loads` of plain tuples, then rebuilding
                                    the named tuples, on the loop; the old snapshot freed on the loop)
    pickle, decoded in a thread     the same decode moved off the loop (but `pickle.loads` holds the GIL)
    packed, through the pipe        `autoscaler.api.packed` sent whole down the pipe, read in a thread
    packed, shared memory mapped    what workers do now: a memfd passed down the pipe, mapped, read in place

(each sender does its own preparation, such as writing the shared memory, before the measurement starts, so
that on a small machine its CPU does not compete with the measured loop) and prints, per way, the longest
stall of the loop (the longest gap between ticks beyond the 1 ms asked) and the 99th percentile of the gaps,
over all swaps.

    python bench/bench_snapshot_swap.py --runtimes 5000 --swaps 5
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import os
import pickle
import sys
import time
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def parse_args() -> argparse.Namespace:
    """The flags, parsed before the modules a run needs are imported (below), so that `--help` and a
    mistyped flag are answered at once."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runtimes", type=int, default=5000)
    parser.add_argument("--swaps", type=int, default=5, help="swaps per way, interleaved")
    return parser.parse_args()


if __name__ == "__main__":
    parse_args()


from autoscaler.api import packed as packing  # noqa: E402
from autoscaler.api.packed import pack, unpack  # noqa: E402
from autoscaler.api.render import render_snapshot  # noqa: E402
from autoscaler.api.snapshot import RenderedRuntimes, RuntimeAnswers, ServingSnapshot, SnapshotHolder  # noqa: E402
from autoscaler.model import RuntimeKey  # noqa: E402
from autoscaler.policies.policy import RuntimePolicy  # noqa: E402
from autoscaler.policies.runtime_memory import RuntimeMemory  # noqa: E402
from bench import stop_on_term  # noqa: E402
from bench.bench_refresh import build_snapshots, refresh  # noqa: E402
from bench.tail_latency import p99  # noqa: E402

TICK_S = 0.001


def pickle_encode(snapshot: ServingSnapshot) -> bytes:
    """The former wire format: a pickle of plain tuples."""
    plain = {key: tuple(answers) for key, answers in snapshot.runtimes.items()}
    return pickle.dumps((snapshot.ready, plain, snapshot.refresh_metrics), protocol=pickle.HIGHEST_PROTOCOL)


def pickle_decode(blob: bytes) -> ServingSnapshot:
    ready, plain, refresh_metrics = pickle.loads(blob)
    make = RuntimeAnswers._make
    return ServingSnapshot(bool(ready), RenderedRuntimes({key: make(answers) for key, answers in plain.items()}),
                           bytes(refresh_metrics))


def build(runtimes: int) -> ServingSnapshot:
    now = 1_700_000_000.0
    memory: dict[RuntimeKey, RuntimeMemory] = {}
    views = refresh(build_snapshots(runtimes, 2, now), RuntimePolicy(target_rps_per_pod=120.0), memory, now)
    return render_snapshot(views, True, b"# refresh metrics\n")


async def on_loop(pipe: Connection) -> ServingSnapshot:
    return pickle_decode(await asyncio.to_thread(pipe.recv_bytes))


async def in_thread(pipe: Connection) -> ServingSnapshot:
    return await asyncio.to_thread(lambda: pickle_decode(pipe.recv_bytes()))


async def packed_recv_bytes(pipe: Connection) -> ServingSnapshot:
    return await asyncio.to_thread(lambda: unpack(pipe.recv_bytes()))


async def packed(pipe: Connection) -> ServingSnapshot:
    return await asyncio.to_thread(packing.receive, pipe)


def serve_shared(pipe: Connection, blob: bytes) -> None:
    """The refresh process's side for the shared-memory handover: on "prep" it writes the next snapshot to
    shared memory (as the refresh process does before it tells the workers), on "go" it passes it."""
    fd = -1
    try:
        while message := pipe.recv_bytes():
            if message == b"prep":
                fd = packing.share(blob)
                pipe.send_bytes(b"ok")
            else:
                packing.send(pipe, fd)
                os.close(fd)
    except EOFError:
        pass


async def no_swap(pipe: Connection) -> object:
    """The noise floor: the sender sends, but nothing is received or swapped (drained afterwards)."""
    await asyncio.sleep(0.03)
    return None


WAYS: dict[str, tuple[Callable[[ServingSnapshot], bytes], Callable[[Connection], Awaitable[object]]]] = {
    "no swap (noise floor)": (lambda snapshot: b"", no_swap),
    "pickle, decoded on the loop": (pickle_encode, on_loop),
    "pickle, decoded in a thread": (pickle_encode, in_thread),
    "packed, through the pipe": (pack, packed_recv_bytes),
    "packed, shared memory mapped": (pack, packed),
}


def serve_blob(pipe: Connection, blob: bytes) -> None:
    """The refresh process's side (a forked process): send `blob` each time it is asked, until end of file.
    Its work before the handover happens on "prep", before the measurement starts, in every way alike, so
    that the sender's CPU does not compete with the measured loop on a small machine."""
    try:
        while message := pipe.recv_bytes():
            pipe.send_bytes(b"ok" if message == b"prep" else blob)
    except EOFError:
        pass


async def swap_once(pipe: Connection, receive: Callable[[Connection], Awaitable[object]], holder: SnapshotHolder,
                    key: tuple[str, str]) -> list[float]:
    """One swap while ticking; the gaps between ticks (seconds beyond `TICK_S`) from 50 ms before the request
    for a snapshot to 50 ms after the swap."""
    gaps: list[float] = []
    done = asyncio.Event()
    pipe.send_bytes(b"prep")
    pipe.recv_bytes()

    async def tick() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(TICK_S)
            now = time.perf_counter()
            gaps.append(max(0.0, now - last - TICK_S))
            last = now
            holder.current.runtimes.get(key)  # a request's lookup

    ticking = asyncio.ensure_future(tick())
    await asyncio.sleep(0.05)
    pipe.send_bytes(b"go")
    received = await receive(pipe)
    if isinstance(received, ServingSnapshot):
        holder.current = received
    else:  # the noise floor: drain what was sent
        pipe.recv_bytes()
    await asyncio.sleep(0.05)
    done.set()
    await ticking
    return gaps


async def run(pipes: dict[str, Connection], key: tuple[str, str], swaps: int) -> dict[str, list[float]]:
    gaps: dict[str, list[float]] = {name: [] for name in WAYS}
    holders = {name: SnapshotHolder() for name in WAYS}
    for name, (_, receive) in WAYS.items():  # warm up: each holder has a previous snapshot to free
        await swap_once(pipes[name], receive, holders[name], key)
    for _ in range(swaps):
        for name, (_, receive) in WAYS.items():
            gaps[name] += await swap_once(pipes[name], receive, holders[name], key)
    return gaps


def main() -> None:
    args = parse_args()
    started = time.perf_counter()
    snapshot = build(args.runtimes)
    print(f"{args.runtimes} runtimes rendered in {time.perf_counter() - started:.1f} s; "
          f"load average {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")
    fork = multiprocessing.get_context("fork")
    pipes, senders = {}, []
    for name, (encode, receive) in WAYS.items():
        blob = encode(snapshot)
        print(f"{name}: {len(blob) / 2**20:.1f} MiB on the wire")
        ours, theirs = fork.Pipe(duplex=True)
        sender = fork.Process(target=serve_shared if receive is packed else serve_blob, args=(theirs, blob),
                              daemon=True)
        sender.start()
        theirs.close()
        pipes[name] = ours
        senders.append(sender)
    key = next(iter(snapshot.runtimes))
    del snapshot, blob
    gc.collect()
    gc.freeze()  # as in a worker: the long-lived objects out of the collector's way
    try:
        gaps = asyncio.run(run(pipes, key, args.swaps))
    finally:
        for pipe in pipes.values():
            pipe.close()
        for sender in senders:
            sender.join(5)
    print(f"loop stall during a swap ({args.swaps} swaps each, ticking every {TICK_S * 1e3:g} ms):")
    for name, values in gaps.items():
        print(f"  {name:30} longest {max(values) * 1e3:7.2f} ms   p99 {p99(values) * 1e3:6.2f} ms   "
              f"({len(values)} ticks)")


if __name__ == "__main__":
    stop_on_term.run(main)
