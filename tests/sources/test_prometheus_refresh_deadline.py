"""One refresh of `--source prometheus` waits on Prometheus for at most one round's deadline (2 x
--prometheus-timeout + 1 s), which the stall limit (/livez) and the late-refresh line are built on.

The scrape-interval check (`prometheus_lookback`) reads two more pages after a round that shows its symptoms (the
pod's samples over 10 minutes, Prometheus's flags), and each was given a full deadline of its own: a slow but
answering Prometheus held one refresh up to three deadlines, past the stall limit, and the adapter was restarted
over it. And a flags page cut for time ended the check for the run: a lookback-delta too short was never said.

A stand-in Prometheus answers the round (a pod's sample older than max_staleness_s: the check runs), the
samples' spacing (60 s) and the flags page as each test says.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st
from pytest_aiohttp import AiohttpServer

from autoscaler.sources.prometheus import PrometheusSource
from autoscaler.sources.prometheus_check_reads import OutOfTime
from autoscaler.sources.prometheus_lookback import RECHECK_S, LookbackCheck
from tests.sources.prometheus_stub import series_at
from tests.sources.static_discovery import StaticDiscovery
from tests.support.log_lines import catching

TIMEOUT_S = 2.0
MAX_STALENESS_S = 30.0
SPACING_S = 60.0

FlagsPage = Callable[[web.Request], Awaitable[web.StreamResponse]]


class SlowPrometheus:
    """Answers the pod team-a/a-1's freshness `sample_age_s` old, each round query `hold_s` late; its samples
    `SPACING_S` apart over the range read at once; the flags page with `flags`."""

    def __init__(self, now: float, flags: FlagsPage, hold_s: float = 0.0, sample_age_s: float = 100.0) -> None:
        self.now = now
        self.flags = flags
        self.hold_s = hold_s
        self.sample_age_s = sample_age_s
        self.freshness = ""  # set once the source is built: its first query
        self.range_reads = 0
        self.flags_reads = 0

    async def query(self, request: web.Request) -> web.Response:
        promql = request.query["query"]
        pod = {"namespace": "team-a", "pod": "a-1"}
        if promql.endswith("s]"):  # the check's range read
            self.range_reads += 1
            values = [[self.now - SPACING_S * n, "3"] for n in (3, 2, 1)]
            return web.json_response({"status": "success", "data": {"resultType": "matrix", "result": [
                {"metric": pod, "values": values}]}})
        await asyncio.sleep(self.hold_s)
        result = ([series_at("team-a", self.now)("a-1", self.now - self.sample_age_s)]
                  if promql == self.freshness else [])
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": result}})

    async def flags_page(self, request: web.Request) -> web.StreamResponse:
        self.flags_reads += 1
        return await self.flags(request)

    async def serve(self, aiohttp_server: AiohttpServer) -> str:
        app = web.Application()
        app.router.add_get("/api/v1/query", self.query)
        app.router.add_get("/api/v1/status/flags", self.flags_page)
        return str((await aiohttp_server(app)).make_url(""))


async def trickled_until(let_go: asyncio.Event, request: web.Request) -> web.StreamResponse:
    """A flags page a byte at a time, each within any read timeout, until `let_go`: only a deadline cuts it."""
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    await response.write(b'{"status": "success", "data": {"query.lookback-delta": "')
    while not let_go.is_set():
        await response.write(b" ")
        await asyncio.sleep(0.2)
    return response


async def held_until(let_go: asyncio.Event, request: web.Request) -> web.StreamResponse:
    """No answer until `let_go`: a read timeout cuts it."""
    await let_go.wait()
    return web.Response(status=503)


def flags_answering(lookback: str) -> FlagsPage:
    async def page(request: web.Request) -> web.StreamResponse:
        return web.json_response({"status": "success", "data": {"query.lookback-delta": lookback,
                                                                "config.file": "/etc/prometheus.yml"}})
    return page


async def source_of(prometheus: SlowPrometheus, aiohttp_server: AiohttpServer,
                    sources: list[PrometheusSource], timeout_s: float = TIMEOUT_S) -> PrometheusSource:
    discovery = StaticDiscovery.of({("team-a", "rt"): ["a-1"]})
    source = PrometheusSource(discovery, await prometheus.serve(aiohttp_server), timeout_s=timeout_s,
                              max_staleness_s=MAX_STALENESS_S)
    sources.append(source)
    prometheus.freshness = source.queries[0]
    return source


async def test_a_slow_round_and_a_slow_flags_page_hold_the_refresh_one_round_deadline_not_two(
    aiohttp_server: AiohttpServer, sources: list[PrometheusSource], now: float
) -> None:
    """Each round query answers 2 s late (the round takes 4 s: the clock's query, then the others), well within its
    11 s deadline (a 5 s timeout); the flags page answers only once let go. The refresh is over 3 s after the
    round's deadline at the latest: with a deadline of its own the flags page held it until 11 s after the round
    had ended, 15 s in at the earliest, whatever the machine's load (the holds are sleeps), and the round has 7 s to
    spare for a loaded machine."""
    timeout_s = 5.0
    round_deadline_s = 2 * timeout_s + 1.0
    let_go = asyncio.Event()
    prometheus = SlowPrometheus(now, functools.partial(trickled_until, let_go), hold_s=0.4 * timeout_s)
    source = await source_of(prometheus, aiohttp_server, sources, timeout_s)

    refresh = asyncio.create_task(source.collect(now))
    await asyncio.wait({refresh}, timeout=round_deadline_s + 3.0)
    over_by_then = refresh.done()
    let_go.set()
    (snapshot,) = await refresh

    assert prometheus.flags_reads == 1  # the check ran: its spacing was read, and its flags asked for
    assert over_by_then
    assert snapshot.source_ok


@pytest.mark.parametrize("slow", [trickled_until, held_until], ids=["trickled", "silent"])
async def test_a_flags_page_cut_for_time_is_read_again_at_a_later_refresh_and_its_lookback_said(
    aiohttp_server: AiohttpServer, sources: list[PrometheusSource], now: float, caplog: pytest.LogCaptureFixture,
    slow: Callable[[asyncio.Event, web.Request], Awaitable[web.StreamResponse]],
) -> None:
    """The first flags read outlasts the refresh's deadline (trickled) or its read timeout (silent); a later
    refresh that shows the symptom still reads it, and says the lookback-delta of 30 s, shorter than twice the
    samples' 60 s."""
    never = asyncio.Event()
    reads: list[str] = []

    async def slow_then_answering(request: web.Request) -> web.StreamResponse:
        reads.append("flags")
        if len(reads) == 1:
            return await slow(never, request)
        return await flags_answering("30s")(request)

    prometheus = SlowPrometheus(now, slow_then_answering)
    source = await source_of(prometheus, aiohttp_server, sources)

    with caplog.at_level(logging.WARNING, logger="autoscaler.sources.prometheus"):
        for later_s in range(0, 600, 15):  # every 15 s for 10 minutes, the pod's sample still stale
            prometheus.now = now + later_s
            await source.collect(now + later_s)
    never.set()

    lookback = [r.getMessage() for r in caplog.records if "--query.lookback-delta 30 s" in r.getMessage()]
    assert len(lookback) == 1, [r.getMessage() for r in caplog.records]
    assert len(reads) >= 2  # read again after the cut one (and again, every 5 minutes at most, while stale)


class CuttingReads:
    """The check's reads, the first `cut_samples` spacing reads and `cut_flags` flags reads cut by the refresh's
    deadline, the others answered: samples `SPACING_S` apart, a lookback-delta of 30 s."""

    def __init__(self, cut_samples: int, cut_flags: int) -> None:
        self.cut_samples, self.cut_flags = cut_samples, cut_flags
        self.reads: list[str] = []

    async def sample_times(self, selector: str, window_s: float) -> list[list[float]]:
        self.reads.append("samples")
        if self.reads.count("samples") <= self.cut_samples:
            raise OutOfTime("reading the samples' spacing was cut at the refresh's deadline")
        return [[0.0, SPACING_S, 2 * SPACING_S]]

    async def flags(self) -> dict[str, str] | None:
        self.reads.append("flags")
        if self.reads.count("flags") <= self.cut_flags:
            raise OutOfTime("reading /api/v1/status/flags was cut at the refresh's deadline")
        return {"query.lookback-delta": "30s", "config.file": "/etc/prometheus.yml"}


@given(cut_samples=st.integers(0, 3), cut_flags=st.integers(0, 3))
def test_reads_cut_for_time_never_end_the_check_and_each_finding_is_said_once(cut_samples: int,
                                                                              cut_flags: int) -> None:
    """Refreshes every 15 s for half an hour, each showing the symptom: each check reads the spacing, then, where
    it answered, the flags; checks go on while the symptom lasts, further apart each time up to every 5 minutes
    (the interval may change later); what the spacing shows (60 s, over max_staleness_s) is said once, as soon as
    it is known; the lookback-delta once, only once the flags answered."""
    reads = CuttingReads(cut_samples, cut_flags)
    check = LookbackCheck("http://prometheus:9090", MAX_STALENESS_S)
    said_after: list[tuple[int, int]] = []  # after each check: (staleness lines, lookback lines) said so far
    checked_at: list[int] = []

    async def refreshes() -> None:
        for now in range(0, 1800, 15):
            if check.due(now):
                checked_at.append(now)
                await check.run(reads, ("team-a", "a-1"), "selector", now)
                said_after.append((sum("max_staleness_s" in line for line in lines.lines),
                                   sum("lookback-delta 30 s" in line for line in lines.lines)))

    with catching("autoscaler.sources.prometheus", logging.WARNING) as lines:
        asyncio.run(refreshes())

    checks = len(checked_at)
    assert reads.reads == ["samples"] * cut_samples + ["samples", "flags"] * (checks - cut_samples)
    gaps = [later - earlier for earlier, later in itertools.pairwise(checked_at)]
    assert gaps == sorted(gaps) and max(gaps) <= RECHECK_S + 15, checked_at
    staleness = [stale for stale, _ in said_after]
    assert staleness == [0] * cut_samples + [1] * (checks - cut_samples)
    lookback = [short for _, short in said_after]
    assert lookback == [0] * (cut_samples + cut_flags) + [1] * (checks - cut_samples - cut_flags)
