"""The exporter's log where a ModelMesh outage ends in a new container, as the platform engineer reads it.

A crash-looping `mm` container (CrashLoopBackOff: a few minutes between starts) made the exporter say the end of
each outage twice, at the same read: `ModelMesh restarted (...): counting on from its new counts ...` and
`modelmesh collector recovered`, some 15 extra lines a pod over the hour. That read is one line now, which says
both (and keeps both phrases an operator greps for); a restart with no logged outage, and an outage that ends in
the same container, still have their own line. So does an outage longer than the load window: its
`no good ModelMesh reading for N s ... rates start again` is said within the `recovered` line.
"""

from __future__ import annotations

import asyncio
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
from tests.support.log_lines import LineCatcher

INTERVAL_S = 5.0
RECOVERED = "modelmesh collector recovered"
RESTARTED = "ModelMesh restarted ("
GAP = "no good ModelMesh reading for "
RATES_START_AGAIN = "rates start again from this reading"
GAP_S = 30.0 + 2.0
"""The default load window plus the read timeout: good reads farther apart start the rates again."""


class Pod(ExporterPod):
    """A pod whose ModelMesh serves 40 requests/s while up."""

    async def read(self, serving: bool = True) -> None:
        if serving:
            self.container.serve(40 * INTERVAL_S)
        await self.read_modelmesh(INTERVAL_S)

    async def requests_total(self) -> float:
        text = await self.metrics_text()
        return next(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
                    if sample.name == names.REQUESTS_TOTAL and not sample.labels)


@pytest.fixture
def pod_class() -> type[Pod]:
    return Pod


def lines_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("exporter")]


async def outage(pod: Pod, seconds: float, *, new_container: bool) -> None:
    """ModelMesh's port refuses reads for `seconds`, then it answers again (a new JVM when `new_container`)."""
    await pod.port.down()
    for _ in range(int(seconds / INTERVAL_S)):
        await pod.read(serving=False)
    if new_container:
        pod.container.restart()
    await pod.port.up()


async def test_each_crash_of_a_crash_looping_modelmesh_ends_in_one_line(
    pod_factory: object, caplog: pytest.LogCaptureFixture,
) -> None:
    pod: Pod = await pod_factory()  # type: ignore[operator]
    for _ in range(6):
        await pod.read()
    total = await pod.requests_total()
    ends: list[list[str]] = []
    for crash in range(4):  # CrashLoopBackOff's waits grow: 20 s, 40 s, 80 s, 160 s down
        await outage(pod, 20.0 * 2 ** crash, new_container=True)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="exporter"):
            await pod.read()  # the new container's first answer
        ends.append(lines_of(caplog))
        for _ in range(30):  # up for a while, serving
            await pod.read()

    for said in ends:
        assert len(said) == 1, said
        [line] = said
        assert line.startswith(RECOVERED), line
        assert RESTARTED in line and "counting on from its new counts" in line, line
    assert await pod.requests_total() == total + 4 * 31 * 40 * INTERVAL_S, "the totals carried on over each restart"


async def test_a_restart_between_two_reads_and_an_outage_in_one_container_keep_their_own_lines(
    pod_factory: object, caplog: pytest.LogCaptureFixture,
) -> None:
    pod: Pod = await pod_factory()  # type: ignore[operator]
    for _ in range(6):
        await pod.read()
    with caplog.at_level(logging.INFO, logger="exporter"):
        pod.container.restart()  # faster than the read interval: no read failed
        await pod.read()
    restarted = lines_of(caplog)
    assert len(restarted) == 1 and restarted[0].startswith(RESTARTED), restarted
    for _ in range(30):
        await pod.read()

    await outage(pod, 20.0, new_container=False)  # the port refused, the container lived on
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="exporter"):
        await pod.read()
    assert lines_of(caplog) == [RECOVERED]


async def test_an_outage_longer_than_the_load_window_ends_in_one_line(
    pod_factory: object, caplog: pytest.LogCaptureFixture,
) -> None:
    """ModelMesh's port refused reads for 40 s, more than the load window plus the read timeout, and the same
    container answers again: the exporter said `no good ModelMesh reading for 45.0 s, ... rates start again`
    and `modelmesh collector recovered` at the same read. One line now, with both."""
    pod: Pod = await pod_factory()  # type: ignore[operator]
    for _ in range(6):
        await pod.read()
    await outage(pod, 40.0, new_container=False)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="exporter"):
        await pod.read()
    assert lines_of(caplog) == [
        f"{RECOVERED}; {GAP}45.0 s, more than the load window (30 s) plus the read timeout (2 s): "
        f"{RATES_START_AGAIN}"]


Event = tuple[int, bool]
"""Reads refused (0: none, the container may still restart between two reads), then whether a new container
answers; two reads of the serving ModelMesh follow each."""
EVENTS = st.lists(st.tuples(st.integers(min_value=0, max_value=40), st.booleans()), min_size=1, max_size=8)


async def live(events: list[Event]) -> None:
    """ModelMesh's life as `events` say, read by the real collector; at each read that ends an outage or sees a
    new container, what the log says of it is checked."""
    clock = Clock()
    container = ModelMeshContainer(clock)
    port = MetricsPort(container)
    await port.up()
    collector = ModelMeshCollector(CollectorHealth(clock=clock), port.url, ssl_context=False, clock=clock,
                                   wall_clock=clock)
    said = LineCatcher()
    logger = logging.getLogger("exporter")
    level = logger.level
    logger.addHandler(said)
    logger.setLevel(logging.INFO)
    try:
        async with aiohttp.ClientSession() as session:

            async def read() -> bool:
                clock.now += INTERVAL_S
                return await collector.scrape_once(session)

            for _ in range(3):
                container.serve(40 * INTERVAL_S)
                assert await read()
            for refused, new_container in events:
                said.take()
                if refused:
                    await port.down()
                    for _ in range(refused):
                        assert not await read()
                outage_logged = any("modelmesh collector failed" in line for line in said.take())
                if new_container:
                    container.restart()
                if refused:
                    await port.up()
                container.serve(40 * INTERVAL_S)
                assert await read()
                end = [line for line in said.take() if RECOVERED in line or RESTARTED in line or GAP in line]
                gap = (refused + 1) * INTERVAL_S > GAP_S
                expected = int(outage_logged or new_container or gap)
                assert len(end) == expected, (refused, new_container, end)
                if end:
                    assert end[0].startswith(RECOVERED) == outage_logged, end
                    assert (RESTARTED in end[0]) == new_container, end
                    # a new container's line says the gap itself; in the same container, the rates start again
                    assert ("without a reading" in end[0]) == (gap and new_container), end
                    assert (GAP in end[0] and RATES_START_AGAIN in end[0]) == (gap and not new_container), end
                container.serve(40 * INTERVAL_S)  # counts above a new container's first read: its restart shows
                assert await read()
    finally:
        logger.removeHandler(said)
        logger.setLevel(level)
        await port.down()


@settings(max_examples=25, deadline=None)
@given(events=EVENTS)
def test_an_outage_or_restart_ends_in_one_line_that_says_what_happened(events: list[Event]) -> None:
    """Whatever ModelMesh does (outages of any length, flaps within the minute that are counted not logged, new
    containers after an outage or between two reads): the read after it says it in one line at most, with
    `recovered` exactly where the outage had its `failed` line, `ModelMesh restarted` exactly where the
    container is new, and the time without a good reading exactly where it outlasted the load window."""
    asyncio.run(live(events))
