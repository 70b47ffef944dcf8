"""The Prometheus source reads the models each pod served recently, from a real Prometheus on backfilled samples.

One more query per refresh, for all runtimes: per (namespace, pod, model_id) the last-served time, moved onto the
adapter's clock as the freshness is (the exporter's clock offset, then Prometheus's), only within the window the
policies can use. Its failure leaves the models out and nothing else: the refresh stays good.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Mapping

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from autoscaler.model import PodSample, RuntimeSnapshot
from autoscaler.sources.prometheus import PrometheusSource
from autoscaler.sources.prometheus_promql import RECENT_MODELS_WINDOW_S
from exporter import names
from tests.fakes.prometheus import Sample
from tests.sources.conftest import StartPrometheus
from tests.sources.static_discovery import StaticDiscovery
from tests.sources.test_prometheus_source import AGE_S, MLSERVER, TRITON, exporter_series, signals

pytestmark = pytest.mark.slow


def served(namespace: str, pod: str, at: float, models: Mapping[str, float]) -> list[Sample]:
    """The pod's last-served series as Prometheus stored them from one scrape at `at` (target labels added)."""
    labels = {"namespace": namespace, "pod": pod, "job": "modelmesh-exporter", "instance": f"{pod}:9187"}
    return [Sample(names.MODEL_LAST_SERVED_TIMESTAMP, labels | {names.MODEL_ID_LABEL: model}, time, at)
            for model, time in models.items()]


def fleet(now: float) -> list[Sample]:
    at = now - AGE_S  # the scrape, by Prometheus's clock (the test's)
    values = signals(10, 0, 0, 0.5, 3)
    clock = names.EXPORTER_TIME
    return [
        # Clock in sync. `gone` was last served two hours ago: outside the window, not in the answer.
        *exporter_series("team-a", "a-1", at, values | {clock: at}, last_success=at - 2),
        *served("team-a", "a-1", at, {"mnist": at - 20, 'say "hi"\n': at - 300, "gone": at - 7200}),
        # Its node's clock 120 s behind: a model served 30 s before the scrape reads so, not 150 s.
        *exporter_series("team-a", "a-2", at, values | {clock: at - 120}, last_success=at - 122),
        *served("team-a", "a-2", at, {"mnist": at - 150, "bert": math.inf, "nan": math.nan}),
        # Publishes the series, but served nothing within the window.
        *exporter_series("team-a", "a-3", at, values | {clock: at}, last_success=at - 2),
        *served("team-a", "a-3", at, {"old": at - 2 * RECENT_MODELS_WINDOW_S}),
        # ModelMesh without per-model metrics: no series at all.
        *exporter_series("team-b", "b-1", at, values | {clock: at}, last_success=at - 2),
        # Per-model metrics on, but no request ever ran in this pod (an idle pod, one a scale-up added): the exporter
        # declares the family with no sample, which Prometheus keeps nothing of, beside its horizon gauge.
        *exporter_series("team-a", "a-4", at, values | {clock: at}, last_success=at - 2),
        horizon("team-a", "a-4", at),
    ]


def horizon(namespace: str, pod: str, at: float) -> Sample:
    """The exporter's model-recency horizon (an hour), published wherever it reports per-model use."""
    labels = {"namespace": namespace, "pod": pod, "job": "modelmesh-exporter", "instance": f"{pod}:9187"}
    return Sample(names.MODEL_RECENCY_HORIZON, labels, 3600.0, at)


def discovery() -> StaticDiscovery:
    return StaticDiscovery.of({(TRITON.namespace, TRITON.deployment): ["a-1", "a-2", "a-3", "a-4"],
                               (MLSERVER.namespace, MLSERVER.deployment): ["b-1"]})


def by_pod(snapshots: list[RuntimeSnapshot]) -> dict[str, PodSample]:
    return {pod.name: pod for snapshot in snapshots for pod in snapshot.pods}


async def test_each_pod_carries_the_models_it_served_on_the_adapters_clock(
    start_prometheus: StartPrometheus, sources: list[PrometheusSource], now: float
) -> None:
    prom = await start_prometheus(fleet(now))
    sources.append(source := PrometheusSource(discovery(), prom.url))
    at = now - AGE_S

    snapshots = await source.collect(now)
    pods = by_pod(snapshots)

    assert all(snapshot.source_ok for snapshot in snapshots)
    assert pods["a-1"].recent_models == pytest.approx({"mnist": at - 20, 'say "hi"\n': at - 300}, abs=1e-3)
    assert pods["a-2"].recent_models == pytest.approx({"mnist": at - 30}, abs=1e-3)  # +Inf and NaN dropped
    assert pods["a-3"].recent_models == {}
    # Served none, not missing: read as missing, three idle pods of four held a runtime whose traffic stopped at
    # its old cache proposal (an outside tuning review, which the scrape source no longer does).
    assert pods["a-4"].recent_models == {}
    assert pods["b-1"].recent_models is None
    assert pods["a-2"].requests_per_second == 10 and pods["a-2"].sampled_at == pytest.approx(at - 2, abs=1e-3)
    assert source.errors == {"garbage": 1}  # the +Inf (NaN fails the window in PromQL)


async def test_one_models_query_per_refresh_for_every_runtime(
    start_prometheus: StartPrometheus, sources: list[PrometheusSource], now: float
) -> None:
    prom = await start_prometheus(fleet(now))
    asked: list[str] = []

    async def proxy(request: web.Request) -> web.Response:
        asked.append(request.query["query"])
        async with aiohttp.ClientSession() as session, session.get(f"{prom.url}/api/v1/query",
                                                                   params=request.query) as answer:
            return web.Response(body=await answer.read(), status=answer.status, content_type="application/json")

    async with serve(proxy) as server:
        sources.append(source := PrometheusSource(discovery(), str(server.make_url(""))))
        await source.collect(now)
        await source.collect(now + 15)

    models = [query for query in asked if names.MODEL_LAST_SERVED_TIMESTAMP in query]
    assert len(models) == 2 and len(asked) == 2 * (len(source.queries) + 1)  # and each refresh's time()
    assert f"time() - {RECENT_MODELS_WINDOW_S:g}" in models[0]


async def test_a_failing_models_query_leaves_only_the_models_out(
    start_prometheus: StartPrometheus, sources: list[PrometheusSource], now: float, caplog: pytest.LogCaptureFixture
) -> None:
    """Prometheus answers every query but the models one (a 503, as from a query frontend shedding load): the
    refresh is good, every other signal read, the models absent; counted by reason and logged once."""
    prom = await start_prometheus(fleet(now))
    failing = True

    async def proxy(request: web.Request) -> web.Response:
        if failing and names.MODEL_LAST_SERVED_TIMESTAMP in request.query["query"]:
            return web.json_response({"status": "error", "errorType": "unavailable", "error": "shedding load"},
                                     status=503)
        async with aiohttp.ClientSession() as session, session.get(f"{prom.url}/api/v1/query",
                                                                   params=request.query) as answer:
            return web.Response(body=await answer.read(), status=answer.status, content_type="application/json")

    async with serve(proxy) as server:
        sources.append(source := PrometheusSource(discovery(), str(server.make_url(""))))
        caplog.set_level(logging.INFO, logger="autoscaler.sources")
        first = await source.collect(now)
        second = await source.collect(now + 1)
        warnings = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
        failing = False
        third = await source.collect(now + 2)

    for snapshots in (first, second):
        assert all(snapshot.source_ok for snapshot in snapshots)
        pods = by_pod(snapshots)
        assert all(pod.recent_models is None for pod in pods.values())
        assert all(snapshot.models_unread for snapshot in snapshots)  # no evidence: per-model memory does not age
        assert pods["a-1"].requests_per_second == 10 and pods["a-1"].sampled_at is not None
    assert source.outage_since is None and source.errors["http"] == 2
    assert len(warnings) == 1 and "recent-models query" in warnings[0] and "shedding load" in warnings[0]
    assert by_pod(third)["a-1"].recent_models is not None
    assert not any(snapshot.models_unread for snapshot in third)
    assert any("recent-models query again" in record.getMessage() for record in caplog.records)


async def test_the_models_query_can_be_left_out(
    start_prometheus: StartPrometheus, sources: list[PrometheusSource], now: float
) -> None:
    prom = await start_prometheus(fleet(now))
    sources.append(source := PrometheusSource(discovery(), prom.url, recent_models_window_s=None))

    pods = by_pod(await source.collect(now))

    assert len(source.queries) == 10  # the nine signals and the failing ModelMesh collectors
    assert all(pod.recent_models is None for pod in pods.values())
    assert pods["a-1"].requests_per_second == 10


def serve(handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> TestServer:
    """A local HTTP server answering /api/v1/query with `handler`, in front of the real Prometheus."""
    app = web.Application()
    app.router.add_get("/api/v1/query", handler)
    return TestServer(app, host="127.0.0.1")


async def test_garbage_or_a_partial_answer_is_no_word_that_per_model_use_stopped(
    start_prometheus: StartPrometheus, sources: list[PrometheusSource], now: float
) -> None:
    """A runtime forgets per-model use once its pods have reported none for `target_lru_age_s`, and its cache need
    may fall then: only a models answer that says "none" may count toward that. A pod whose every last-served time
    is garbage, or an answer Thanos marks partial (a store it could not reach), leaves `recent_models` None as a
    pod without the series does; its snapshot says the models were unread, so that the memory does not age."""
    at = now - AGE_S
    samples = [*fleet(now),
               *served("team-b", "b-1", at, {"bert": math.inf})]  # every time it gives is garbage
    prom = await start_prometheus(samples)
    partial = False

    async def thanos(request: web.Request) -> web.Response:
        async with aiohttp.ClientSession() as session, session.get(f"{prom.url}/api/v1/query",
                                                                   params=request.query) as answer:
            payload = await answer.json()
        if partial:
            payload["warnings"] = ["No StoreAPIs matched for this query"]
        return web.json_response(payload)

    async with serve(thanos) as server:
        sources.append(source := PrometheusSource(discovery(), str(server.make_url(""))))
        whole = {snapshot.key: snapshot for snapshot in await source.collect(now)}
        partial = True
        partly = await source.collect(now + 1)

    assert by_pod(list(whole.values()))["b-1"].recent_models is None
    assert whole[MLSERVER].models_unread  # b-1's times all garbage
    assert not whole[TRITON].models_unread  # its pods' answers say what they served
    assert all(snapshot.models_unread for snapshot in partly)
