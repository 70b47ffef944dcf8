"""An HA pair behind one Service, one replica restarted with an empty TSDB (`prometheus_empty_answer`).

Replica a holds the pods' series (backfilled); replica b has none, as a replica restarted on an emptyDir has
until its first scrapes. A front plays the Service: the test says which replica answers each query.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from autoscaler.policies.decision import SOURCE_DOWN, decide
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.sources.prometheus import PrometheusSource
from autoscaler.sources.prometheus_empty_answer import HOLD_LIMIT_S
from tests.fakes.prometheus import PrometheusServer
from tests.sources.conftest import StartPrometheus
from tests.sources.static_discovery import StaticDiscovery
from tests.sources.test_prometheus_probe_backends import forward, front
from tests.sources.test_prometheus_source import AGE_S, TRITON, by_pod, exporter_series, signals

pytestmark = pytest.mark.slow

Replica = Callable[[dict[str, str]], PrometheusServer]
"""Which replica the Service sends a query to (its parameters)."""


@pytest.fixture
async def empty_replica(tmp_path: Path) -> AsyncIterator[PrometheusServer]:
    async with PrometheusServer(workdir=tmp_path / "empty") as prom:
        yield prom


async def service(aiohttp_server: AiohttpServer, route: list[Replica]) -> str:
    """A Service in front of the replicas: each query goes where `route[0]` says (the test swaps it)."""

    async def proxy(request: web.Request) -> web.Response:
        params = dict(request.query)
        return await forward(request, route[0](params), params)

    return await front(aiohttp_server, proxy)


async def behind_service(start_prometheus: StartPrometheus, aiohttp_server: AiohttpServer,
                         sources: list[PrometheusSource], now: float,
                         ) -> tuple[PrometheusServer, list[Replica], PrometheusSource]:
    """A full replica holding pod a-1's series (40 req/s, scraped `AGE_S` ago) behind a Service that sends every
    query to it until the test swaps `route[0]`, and the source reading through that Service."""
    at = now - AGE_S
    full = await start_prometheus(exporter_series("team-a", "a-1", at, signals(40, 0.1, 2, 0.9, 5, lru=120),
                                                  last_success=at))
    route: list[Replica] = [lambda params: full]
    source = PrometheusSource(StaticDiscovery.of({(TRITON.namespace, TRITON.deployment): ["a-1"]}),
                              await service(aiohttp_server, route))
    sources.append(source)
    return full, route, source


def lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno == level]


async def test_a_replica_with_an_empty_tsdb_holds_the_last_samples_and_says_why(
    start_prometheus: StartPrometheus, empty_replica: PrometheusServer, aiohttp_server: AiohttpServer,
    sources: list[PrometheusSource], caplog: pytest.LogCaptureFixture, now: float,
) -> None:
    """After good refreshes, every query lands on the empty replica (and so does the retry): the runtime's
    values were 503 "metric source down" and the log asked whether Prometheus scrapes the exporters at all. The
    pods now hold their last samples (the refresh is good, they turn stale as in any gap), and the log names the
    replica with an empty TSDB, the lookback, and still the old hint; then, answered again, says so."""
    full, route, source = await behind_service(start_prometheus, aiohttp_server, sources, now)
    (good,) = await source.collect(now)

    route[0] = lambda params: empty_replica
    with caplog.at_level(logging.INFO, logger="autoscaler.sources.prometheus"):
        (held,) = await source.collect(now + 1)
        route[0] = lambda params: full
        (back,) = await source.collect(now + 2)

    assert good.source_ok and held.source_ok and back.source_ok
    assert by_pod([held]) == by_pod([good])
    assert by_pod([held])["team-a", "a-1"].requests_per_second == 40
    (warning,) = lines(caplog, logging.WARNING)
    assert "holding every pod's last sample, not an outage" in warning
    assert "a Prometheus replica with an empty TSDB" in warning and "--query.lookback-delta" in warning
    assert "is Prometheus scraping the exporters" in warning  # the old hint, for an empty answer that lasts
    assert not any("failed (empty)" in line for line in caplog.messages)
    assert any("answers with series again" in line for line in lines(caplog, logging.INFO))


async def test_an_empty_answer_from_one_replica_is_asked_again_at_once(
    start_prometheus: StartPrometheus, empty_replica: PrometheusServer, aiohttp_server: AiohttpServer,
    sources: list[PrometheusSource], caplog: pytest.LogCaptureFixture, now: float,
) -> None:
    """The Service sends the first freshness query of a refresh to the empty replica, everything else to the full
    one: the refresh asks again at once and reads the pod's new values, with nothing to say."""
    full, route, source = await behind_service(start_prometheus, aiohttp_server, sources, now)
    freshness = source.queries[0]
    await source.collect(now)
    sent: list[str] = []

    def once_to_the_empty_one(params: dict[str, str]) -> PrometheusServer:
        sent.append(params["query"])
        return empty_replica if sent.count(freshness) == 1 and params["query"] == freshness else full

    route[0] = once_to_the_empty_one
    with caplog.at_level(logging.INFO, logger="autoscaler.sources.prometheus"):
        (snapshot,) = await source.collect(now + 1)

    assert snapshot.source_ok and by_pod([snapshot])["team-a", "a-1"].requests_per_second == 40
    assert sent.count(freshness) == 2
    assert lines(caplog, logging.WARNING) == [] and source.errors == {}


async def test_an_empty_answer_that_lasts_becomes_the_outage_it_is(
    start_prometheus: StartPrometheus, empty_replica: PrometheusServer, aiohttp_server: AiohttpServer,
    sources: list[PrometheusSource], caplog: pytest.LogCaptureFixture, now: float,
) -> None:
    """One good round, then every answer empty for minutes (a PodMonitor deleted, a NetworkPolicy stopping the
    scrapes, Thanos with every store down). The hold never ended: source_ok stayed True, /debug showed no source
    problem, the runtime read "coverage 0% < 50%" instead of "metric source down", and the log said "not an
    outage" once, then nothing. Past the hold's limit it is the outage: `failed (empty)`, the runtime's values
    503 for the source, and /debug says the hint and the likely causes."""
    _, route, source = await behind_service(start_prometheus, aiohttp_server, sources, now)
    await source.collect(now)

    route[0] = lambda params: empty_replica
    interval = 30.0
    with caplog.at_level(logging.INFO, logger="autoscaler.sources.prometheus"):
        (first,) = await source.collect(now + interval)
        for refresh in range(2, int(HOLD_LIMIT_S // interval) + 3):
            at_refresh = now + interval * refresh
            (last,) = await source.collect(at_refresh)

    assert first.source_ok  # a replica with an empty TSDB is still held at first
    assert not last.source_ok
    view, _ = decide(last, RuntimePolicy(), None, at_refresh, 60.0)
    assert view.reason.startswith(SOURCE_DOWN), view.reason
    (problem,) = source.problems(TRITON)
    assert problem.reason == "empty"
    assert "is Prometheus scraping the exporters" in problem.detail and "empty TSDB" in problem.detail
    (outage,) = [line for line in lines(caplog, logging.WARNING) if "failed (empty)" in line]
    assert "empty TSDB" in outage and "--query.lookback-delta" in outage


async def test_a_run_of_empty_answers_is_asked_again_once_not_at_every_refresh(
    start_prometheus: StartPrometheus, empty_replica: PrometheusServer, aiohttp_server: AiohttpServer,
    sources: list[PrometheusSource], now: float,
) -> None:
    """While empty answers are held, each refresh sent every query twice (the immediate retry, meant for a load
    balancer's other replica): once at the start of the run is enough."""
    _, route, source = await behind_service(start_prometheus, aiohttp_server, sources, now)
    sent: list[str] = []

    def to_the_empty_one(params: dict[str, str]) -> PrometheusServer:
        sent.append(params["query"])
        return empty_replica

    freshness = source.queries[0]
    await source.collect(now)

    route[0] = to_the_empty_one
    asked = []
    for refresh in (1, 2, 3):
        (held,) = await source.collect(now + refresh)
        assert held.source_ok
        asked.append(sent.count(freshness))
        sent.clear()

    assert asked == [2, 1, 1]
