"""The exporter where `--modelmesh-url` reaches more than one ModelMesh: the `modelmesh-serving` Service's
`prometheus` port (2112 over every runtime pod) instead of the pod's own `127.0.0.1:2112`.

Each read may come from another pod. Two idle pods read in turn looked like a ModelMesh restart at every other
read, and each "restart" added that pod's whole lifetime count: `modelmesh_pod_requests_total` rose by thousands
a read, requests/s read thousands every other read, the collector stayed healthy, no error was counted, and the
log said `ModelMesh restarted` every 10 s without limit. ModelMesh's JVM takes tens of seconds to start, so
counters going down twice within a minute are refused as a bad read (reason `parse`, the last good values kept)
with one warning a minute that names `--modelmesh-url`; a ModelMesh that did restart twice that fast is read
again once a minute has passed without a good read.
"""

from __future__ import annotations

import asyncio
import itertools
import logging

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from exporter import names
from exporter.collectors.health import CollectorHealth
from exporter.collectors.modelmesh import ModelMeshCollector
from tests.exporter.conftest import Clock, ExporterPod
from tests.exporter.modelmesh_wire import MetricsPort, ModelMeshContainer
from tests.support.log_lines import caught_lines

INTERVAL_S = 5.0
RESTARTED = "ModelMesh restarted ("
SERVICE_HINT = "different ModelMesh containers"


def published(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The exporter's samples as a scraper reads them, by name and labels."""
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def parse_errors(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> float:
    return samples.get((names.SCRAPE_ERRORS_TOTAL, (("collector", "modelmesh"), ("reason", "parse"))), 0.0)


def exporter_lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("exporter") and r.levelno == level]


def idle_container(clock: Clock, served: float) -> ModelMeshContainer:
    """Another runtime pod's ModelMesh, which served `served` requests in its life and serves none now."""
    container = ModelMeshContainer(clock)
    container.serve(served)
    container.publish(models=8, lru_time_s=clock.now - 100.0)
    return container


@pytest.fixture
def pod_class() -> type[ExporterPod]:
    return ExporterPod


async def test_reads_of_two_idle_pods_in_turn_add_no_load_and_say_the_url_is_wrong(
    pod_factory: object, caplog: pytest.LogCaptureFixture,
) -> None:
    pod: ExporterPod = await pod_factory()  # type: ignore[operator]
    pods = [idle_container(pod.clock, 5000), idle_container(pod.clock, 10000)]
    totals: list[float] = []
    with caplog.at_level(logging.INFO, logger="exporter"):
        for read in range(120):  # ten minutes, the Service answering from each pod in turn
            pod.port.container = pods[read % 2]
            await pod.read_modelmesh(INTERVAL_S)
            totals.append(published(await pod.metrics_text())[(names.REQUESTS_TOTAL, ())])
    samples = published(await pod.metrics_text())

    assert totals[-1] == totals[12], f"no request ran, yet the total rose from {totals[12]} to {totals[-1]}"
    assert totals[-1] <= 2 * 10000, totals[:12]
    assert samples[(names.REQUESTS_PER_SECOND, ())] == 0.0
    assert parse_errors(samples) >= 50, "every read of the other pod is refused and counted"
    warnings = [line for line in exporter_lines(caplog, logging.WARNING) if SERVICE_HINT in line]
    assert 1 <= len(warnings) <= 11, warnings  # one a minute at most
    assert "--modelmesh-url (EXPORTER_MODELMESH_URL)" in warnings[0], warnings[0]
    assert "modelmesh-serving Service" in warnings[0] and "https://127.0.0.1:2112/metrics" in warnings[0]
    restarts = [line for line in exporter_lines(caplog, logging.INFO) if RESTARTED in line]
    assert len(restarts) <= 1, restarts


async def test_a_modelmesh_restarted_twice_within_a_minute_is_read_again_after_a_minute(
    pod_factory: object, caplog: pytest.LogCaptureFixture,
) -> None:
    """Not real for ModelMesh, but its count must not be lost: the second container's reads are refused until a
    minute has passed without a good read, then absorbed as a restart, counting all it served."""
    pod: ExporterPod = await pod_factory()  # type: ignore[operator]
    served = 0.0

    async def read(requests: float = 200.0) -> bool:
        nonlocal served
        pod.container.serve(requests)
        served += requests
        pod.clock.now += INTERVAL_S
        assert pod.collector is not None
        async with aiohttp.ClientSession() as session:
            return await pod.collector.scrape_once(session)

    for _ in range(6):
        assert await read()
    served = 0.0  # the first read is the exporter's baseline: what came before it is not counted
    base = published(await pod.metrics_text())[(names.REQUESTS_TOTAL, ())]
    pod.container.restart()
    assert await read()
    assert await read()
    pod.container.restart()  # again, 10 s later; quieter, so its counts stay below the last container's
    with caplog.at_level(logging.INFO, logger="exporter"):
        answers = [await read(20.0) for _ in range(14)]
    assert answers[0] is False and answers[-1] is True, answers
    assert answers.index(True) * INTERVAL_S >= 55.0, answers
    samples = published(await pod.metrics_text())
    assert samples[(names.REQUESTS_TOTAL, ())] - base == served, (base, served)
    assert parse_errors(samples) == answers.index(True)
    assert any(RESTARTED in line for line in exporter_lines(caplog, logging.INFO))


Picks = list[list[int]]
"""Which pod the Service sends each read to: blocks in each of which every pod is read once."""


async def through_service(counts: list[float], blocks: Picks) -> None:
    clock = Clock()
    containers = [idle_container(clock, count) for count in counts]
    port = MetricsPort(containers[blocks[0][0]])
    await port.up()
    collector = ModelMeshCollector(CollectorHealth(clock=clock), port.url, ssl_context=False, clock=clock,
                                   wall_clock=clock)
    refused_at: int | None = None
    with caught_lines("exporter") as said:
        try:
            async with aiohttp.ClientSession() as session:
                for read, pick in enumerate(itertools.chain.from_iterable(blocks)):
                    port.container = containers[pick]
                    clock.now += INTERVAL_S
                    if not await collector.scrape_once(session) and refused_at is None:
                        latest = collector.window.latest
                        assert latest is not None
                        refused_at, total_then = read, latest.values["requests"]
                    latest = collector.window.latest
                    assert latest is not None
                    if refused_at is not None:
                        assert latest.values["requests"] - total_then <= max(counts) - min(counts)
        finally:
            await port.down()
    reads = sum(map(len, blocks))
    if reads >= 24:
        assert refused_at is not None and refused_at < 24, refused_at
    lines = said.take()
    assert sum(RESTARTED in line for line in lines) <= 2, [line for line in lines if RESTARTED in line]
    warned = sum(SERVICE_HINT in line for line in lines)
    assert warned <= 1 + reads * INTERVAL_S / 60.0


@st.composite
def service_reads(draw: st.DrawFn) -> tuple[list[float], Picks]:
    pods = draw(st.integers(min_value=2, max_value=3))
    counts = draw(st.lists(st.integers(min_value=1, max_value=10**6).map(float), min_size=pods, max_size=pods,
                           unique=True))
    blocks = draw(st.lists(st.permutations(range(pods)), min_size=1, max_size=60))
    return counts, blocks


@settings(max_examples=20, deadline=None)
@given(reads=service_reads())
def test_idle_pods_read_in_any_order_invent_load_only_until_caught(reads: tuple[list[float], Picks]) -> None:
    """Whatever order the Service sends the reads in (each pod read at least once every two rounds): a read is
    refused within two minutes, from then on the total rises at most by the gap between the pods' counts (a read
    of a pod above the one followed), the restart line comes twice at most, and the warning once a minute."""
    asyncio.run(through_service(*reads))
