"""A small fleet whose exporter connections keep closing (pods restarted or deleted, an exporter that resets or answers
with `Connection: close`) left the refresh process's memory creeping: on Python 3.11 every closed connection is a
reference cycle (asyncio's socket transport keeps a bound method of itself), which only the garbage collector frees,
and with the refresh process's raised young-generation threshold (`autoscaler/gcsettings.py`: 50,000) a small fleet
went hours without a collection (docs/performance.md, "The refresh process's memory under churn").

Now a full collection ends a refresh once the young generation has grown by `GROWTH_BEFORE_COLLECTING` over
refreshes that ran none: what the refresh process holds of closed connections stays under a bound, however many
refreshes have run. Run in a child interpreter (the GC settings are the process's), against exporters served from
this process that close each connection after one or two answers.
"""

from __future__ import annotations

import contextlib
import socketserver
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import yaml

from autoscaler.gcsettings import GROWTH_BEFORE_COLLECTING
from tests.support.exporter_texts import exporter_text

PODS = 10

CHILD = textwrap.dedent("""
    import asyncio, gc, socket, sys
    from pathlib import Path
    from autoscaler.gcsettings import tune_for_refresh
    from autoscaler.server import RefreshStack
    from autoscaler.settings import ServeSettings

    def closed_connections_held() -> int:
        return sum(1 for o in gc.get_objects() if isinstance(o, socket.socket) and o.fileno() == -1)

    async def main() -> None:
        stack = RefreshStack(ServeSettings(targets=Path(sys.argv[1]), refresh_interval_s=1, window_s=3,
                                           deletion_cost=False))
        await stack.start()
        await stack.refresher.refresh_once()
        tune_for_refresh()  # as `serve` does once start-up is over
        done = 0
        for refreshes in map(int, sys.argv[2:]):
            for _ in range(refreshes - done):
                await stack.refresher.refresh_once()
            done = refreshes
            print(closed_connections_held(), len(stack.refresher.views))
        await stack.close()

    asyncio.run(main())
""")


class _ClosingExporter(socketserver.BaseRequestHandler):
    """A pod's exporter that closes each connection after `answers` scrapes (`Connection: close`), as a
    restarted pod's or a proxied exporter's do."""

    answers = 1

    def handle(self) -> None:
        request = b""
        for answer in range(1, self.answers + 1):
            while b"\r\n\r\n" not in request:
                chunk = self.request.recv(4096)
                if not chunk:
                    return
                request += chunk
            request = request[request.index(b"\r\n\r\n") + 4:]
            body = exporter_text(0, time.time(), None).encode()
            closing = b"Connection: close\r\n" if answer == self.answers else b""
            self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n" + closing
                                 + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


@contextlib.contextmanager
def exporters_closing_after(answers: int) -> Iterator[int]:
    """Every pod's exporter on one port (their URLs differ by a query), each connection closed after `answers`."""
    handler = type("Exporter", (_ClosingExporter,), {"answers": answers})
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def held_after(tmp_path: Path, answers: int, refreshes: list[int]) -> list[int]:
    """Closed connections the refresh process holds after each count of `refreshes` of one runtime of `PODS`
    pods, their exporters closing each connection after `answers` scrapes."""
    targets = tmp_path / "targets.yaml"
    with exporters_closing_after(answers) as port:
        pods = [{"name": f"modelmesh-serving-rt-5d9c8b7f6-{pod}", "url": f"http://127.0.0.1:{port}/metrics?pod={pod}"}
                for pod in range(PODS)]
        targets.write_text(yaml.safe_dump({"runtimes": [{"namespace": "team", "deployment": "modelmesh-serving-rt",
                                                         "pods": pods}]}))
        done = subprocess.run([sys.executable, "-c", CHILD, str(targets), *map(str, refreshes)], capture_output=True,
                              text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()]
    assert [runtimes for _, runtimes in rows] == ["1"] * len(refreshes)
    return [int(held) for held, _ in rows]


HELD_AT_MOST = GROWTH_BEFORE_COLLECTING // 5 + 2 * PODS
"""Each closed connection is at least five objects of garbage (the transport, its socket and the socket's
wrapper, its dict of extra facts, the bound method of itself): the collector runs before the young generation
has grown by more than `GROWTH_BEFORE_COLLECTING` over its size at the end of the refresh after the last
collection (that refresh's and the last one's closes aside)."""


def test_connections_closed_after_each_scrape_do_not_pile_up(tmp_path: Path) -> None:
    # each refresh closes one connection a pod (4,000 in 400 refreshes)
    held = held_after(tmp_path, 1, [100, 400])
    assert max(held) <= HELD_AT_MOST, f"{held} closed connections held after 100 and 400 refreshes of {PODS} pods"


def test_connections_that_outlive_a_collection_do_not_pile_up(tmp_path: Path) -> None:
    # each connection serves two refreshes: open at a collection, it is closed after it (an older generation's
    # garbage, which a young collection does not free)
    held = held_after(tmp_path, 2, [100, 400])
    assert max(held) <= HELD_AT_MOST, f"{held} closed connections held after 100 and 400 refreshes of {PODS} pods"


PUBLISH_CHILD = textwrap.dedent("""
    import asyncio, gc, sys
    from pathlib import Path
    from autoscaler.gcsettings import tune_for_refresh
    from autoscaler.server import RefreshStack
    from autoscaler.settings import ServeSettings

    def full_collections() -> int:
        return gc.get_stats()[2]["collections"]

    async def main() -> None:
        stack = RefreshStack(ServeSettings(targets=Path(sys.argv[1]), refresh_interval_s=1, window_s=3,
                                           deletion_cost=False))
        at_publish = []

        async def publish(views) -> None:  # as the refresh process sends the snapshot to the serving workers
            at_publish.append(full_collections())

        stack.listen(publish)
        await stack.start()
        tune_for_refresh()  # as `serve` does once start-up is over
        kept = []
        for _ in range(int(sys.argv[2])):
            before = full_collections()
            await stack.refresher.refresh_once()
            print(at_publish[-1] - before, full_collections() - before)
            kept += [[] for _ in range(3_000)]  # what a refresh keeps: the young generation grows
        await stack.close()

    asyncio.run(main())
""")


def test_each_refreshs_snapshot_is_published_before_the_collection_the_refresh_ends_with(tmp_path: Path) -> None:
    """The collection ran as the first refresh listener: every refresh that ended with a full collection sent its
    snapshot to the serving workers only after it."""
    targets = tmp_path / "targets.yaml"
    with exporters_closing_after(1) as port:
        pods = [{"name": f"modelmesh-serving-rt-5d9c8b7f6-{pod}", "url": f"http://127.0.0.1:{port}/metrics?pod={pod}"}
                for pod in range(PODS)]
        targets.write_text(yaml.safe_dump({"runtimes": [{"namespace": "team", "deployment": "modelmesh-serving-rt",
                                                         "pods": pods}]}))
        done = subprocess.run([sys.executable, "-c", PUBLISH_CHILD, str(targets), "6"], capture_output=True,
                              text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [tuple(map(int, line.split())) for line in done.stdout.splitlines()]
    assert any(collected for _, collected in rows), rows  # some refresh ended with a full collection
    assert [before_publish for before_publish, _ in rows] == [0] * len(rows), rows
