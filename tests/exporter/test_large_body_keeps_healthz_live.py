"""Parsing a large ModelMesh answer does not stall the exporter's own HTTP server.

The largest answer the exporter reads (`MAX_BODY_BYTES`, from a ModelMesh or proxy that ignores `name[]`) takes
over a second of CPU to parse here, and five times that under the sidecar's 200m CPU limit: done on the event
loop, every /healthz and /metrics waits for it, the liveness probe (timeout 5 s) fails read after read, and the
kubelet restarts a sidecar that was working. /healthz must answer while such a body is parsed.
"""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.request
from collections.abc import Sequence

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from prometheus_client import CollectorRegistry

from exporter import modelmesh_text
from exporter.app import metrics_app
from exporter.collectors import modelmesh as modelmesh_collector
from exporter.collectors.health import CollectorHealth
from exporter.collectors.modelmesh import MAX_BODY_BYTES, ModelMeshCollector
from exporter.modelmesh_text import ModelMeshReading, parse_modelmesh, parse_with_library
from tests.exporter.test_exporter_memory_limit import unfiltered_modelmesh as unfiltered_modelmesh
from tests.exporter.test_exporter_memory_limit import unfiltered_modelmesh_body

__all__ = ["unfiltered_modelmesh"]  # the fixture, used by name


def probe_until(url: str, stop: threading.Event, answered: list[int]) -> None:
    """The kubelet's side: GET `url` again and again from outside the event loop, counting the answers."""
    while not stop.is_set():
        with urllib.request.urlopen(url, timeout=30) as response:
            assert response.status == 200
        answered[0] += 1
        time.sleep(0.01)


async def scrape_while_probing(modelmesh_url: str, answered: list[int]) -> None:
    """One read of `modelmesh_url` by the real collector behind the real app, /healthz asked from another thread
    all the while (its answers counted in `answered[0]`)."""
    health = CollectorHealth()
    collector = ModelMeshCollector(health, modelmesh_url, timeout_s=30)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    registry.register(health)
    async with TestServer(metrics_app(registry, health), host="127.0.0.1") as server:
        stop = threading.Event()
        prober = threading.Thread(target=probe_until, args=(str(server.make_url("/healthz")), stop, answered))
        prober.start()
        try:
            async with aiohttp.ClientSession() as session:
                assert await collector.scrape_once(session)
        finally:
            stop.set()
            await asyncio.to_thread(prober.join)


@pytest.mark.slow
async def test_healthz_answers_while_the_largest_body_is_parsed(
    unfiltered_modelmesh: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Counted, not timed: the /healthz answers the prober got while the exporter parsed the body. On the event
    loop none could be written until the parse ended (at most one, already on its way as it began); in a
    thread the loop answers between the parser's turns of Python's lock. The body is parsed the way a body the
    narrow reader gives up on is (`parse_with_library`: 0.8 s here, four times the narrow reader's 0.2 s,
    which is mostly regular expressions in C that hold the lock, so a thread would change little there)."""
    answered = [0]
    during: list[int] = []

    def parse_counting(text: str | Sequence[str]) -> ModelMeshReading:
        before = answered[0]
        reading = parse_with_library(text)
        during.append(answered[0] - before)
        return reading

    monkeypatch.setattr(modelmesh_collector, "parse_modelmesh", parse_counting)
    await scrape_while_probing(unfiltered_modelmesh, answered)
    [answers] = during
    assert answers >= 2, f"/healthz answered {answers} times while the exporter parsed the body"


MAX_READS = 20
ANSWERS_IN_ONE_READ = 2


@pytest.mark.slow
async def test_healthz_answers_while_the_narrow_reader_reads_the_largest_body(
    unfiltered_modelmesh: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The narrow reader (what reads ModelMesh's own shapes) found every line in one regular-expression call over
    the whole body: 0.2-0.3 s here of C that holds Python's lock, during which the event loop answered nothing
    (five times longer under the sidecar's CPU limit): /healthz and /metrics waited though the parse ran in a
    thread. Counted, not timed: the answers the prober got during one read of the body's bucket lines and gauges
    (the lines it skips, 32 MiB of them, and the few it reads), so that the read is nearly all that
    regular-expression pass. Before, one answer at most came during a read (one already on its way as it
    began); now four or five. A loaded machine gives fewer (the count is a rate), so the reads go on, up to
    `MAX_READS`, until one of them has seen `ANSWERS_IN_ONE_READ`: the old code never could."""
    answered = [0]
    during: list[int] = []

    def parse_counting(text: str | Sequence[str]) -> ModelMeshReading:
        lines = "".join(text).splitlines(keepends=True)  # the body's pieces (`exporter.body_pieces`), joined
        skipped_mostly = "".join(line for line in lines if "_count{" not in line)
        for _ in range(MAX_READS):
            before = answered[0]
            reading = parse_modelmesh(skipped_mostly)
            during.append(answered[0] - before)
            if during[-1] >= ANSWERS_IN_ONE_READ:
                break
        return reading

    monkeypatch.setattr(modelmesh_collector, "parse_modelmesh", parse_counting)
    await scrape_while_probing(unfiltered_modelmesh, answered)
    assert max(during) >= ANSWERS_IN_ONE_READ, f"/healthz answers during each read: {during}"


@pytest.mark.slow
def test_the_library_paths_line_filter_lets_other_threads_run_over_the_largest_body() -> None:
    """Where the narrow reader gives up, the library reads the lines the exporter uses, picked out of the body by
    one regular expression: over the largest body one call, about 0.5 s here holding Python's lock, in which the
    event loop (another thread) got not a single turn. Counted, not timed: the turns a thread that asks for the
    lock every millisecond gets while the lines are picked."""
    text = unfiltered_modelmesh_body(MAX_BODY_BYTES).decode()
    turns = [0]
    stop = threading.Event()

    def ask_for_turns() -> None:
        while not stop.is_set():
            turns[0] += 1
            time.sleep(0.001)

    other = threading.Thread(target=ask_for_turns)
    other.start()
    try:
        while turns[0] < 3:  # running, and asking
            time.sleep(0.01)
        before = turns[0]
        picked = modelmesh_text._lines_read(text)
        during = turns[0] - before
    finally:
        stop.set()
        other.join()
    assert picked.count("\n") > 10_000  # the count lines of every model, and the comments
    assert during >= 3, f"another thread ran {during} times while the lines were picked"  # before: one at most
