"""`PrometheusSource` against a real Prometheus (and, for the HTTP failure modes, a tiny misbehaving server).

Most tests backfill data with promtool so Prometheus answers at once; one lets it scrape an exporter-format
server, to check the `honor_labels` path end to end (it costs the ~6 s until the first scrape lands).
"""

from __future__ import annotations

import asyncio
import logging
import math
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from prometheus_client.aiohttp import make_aiohttp_handler
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry
from pytest_aiohttp import AiohttpServer

from autoscaler import cli
from autoscaler.api.certs import generate_self_signed, server_context
from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot
from autoscaler.serve_args import settings_from_args
from autoscaler.server import build_source
from autoscaler.sources import prometheus as source_module
from autoscaler.sources.base import MetricSource
from autoscaler.sources.prometheus import PrometheusSource
from autoscaler.sources.prometheus_promql import GpuSource
from exporter import names
from tests.fakes.prometheus import PrometheusServer, Sample, create_blocks, openmetrics_text
from tests.sources.conftest import StartPrometheus
from tests.sources.prometheus_stub import Answers, answering_prometheus, series_at
from tests.sources.static_discovery import StaticDiscovery
from tests.support.clock import SteppedClock
from tests.support.waiting import eventually

AGE_S = 10.0  # how old the newest backfilled scrape is: well inside instant queries' 5-minute lookback
OLDER_AGE_S = 40.0  # an older scrape, whose values the newest one must hide

TRITON = RuntimeKey("team-a", "modelmesh-serving-triton")
MLSERVER = RuntimeKey("team-b", "modelmesh-serving-mlserver")

MakeSource = Callable[..., PrometheusSource]


def exporter_series(
    namespace: str,
    pod: str,
    at: float,
    values: Mapping[str, float],
    *,
    gpus: Sequence[float] = (),
    dcgm_percent: Sequence[float] = (),
    last_success: float | None = None,
) -> list[Sample]:
    """One scrape of one pod's exporter as Prometheus stores it (target labels added, namespace/pod set)."""
    labels = {"namespace": namespace, "pod": pod, "job": "modelmesh-exporter", "instance": f"{pod}:9187"}
    samples = [Sample(name, labels, value, at) for name, value in values.items()]
    samples += [
        Sample(names.GPU_BUSY_RATIO, labels | {"gpu": str(i), "uuid": f"GPU-{i}"}, busy, at)
        for i, busy in enumerate(gpus)
    ]
    samples += [
        Sample(names.DCGM_GPU_UTIL, labels | {"gpu": str(i), "job": "dcgm"}, percent, at)
        for i, percent in enumerate(dcgm_percent)
    ]
    if last_success is not None:
        modelmesh = labels | {"collector": names.COLLECTOR_MODELMESH}
        samples.append(Sample(names.LAST_SUCCESS_TIMESTAMP, modelmesh, last_success, at))
        # The GPU collector's freshness is the GPU signal's own, not the load signals': it is older here, and
        # would otherwise win the load freshness min.
        samples.append(Sample(names.LAST_SUCCESS_TIMESTAMP, labels | {"collector": "gpu"}, at - 10, at))
    return samples


def signals(
    rps: float, queue: float, misses: float, cache: float, models: float, lru: float | None = None
) -> dict[str, float]:
    values = {
        names.REQUESTS_PER_SECOND: rps,
        names.QUEUE_DELAY_SECONDS: queue,
        names.CACHE_MISSES_PER_SECOND: misses,
        names.CACHE_USED_RATIO: cache,
        names.MODELS_LOADED: models,
    }
    if lru is not None:
        values[names.LRU_AGE_SECONDS] = lru
    return values


def cluster_samples(now: float, age_s: float = AGE_S) -> list[Sample]:
    """Two runtimes in two namespaces, sharing a pod name, plus an unrelated pod and an older scrape."""
    at, before = now - age_s, now - OLDER_AGE_S
    return [
        # An older scrape of team-a/a-1 with other values: instant queries must return the newer one.
        *exporter_series("team-a", "a-1", before, signals(1, 1, 1, 0.1, 1, lru=1), gpus=[0.9, 0.9],
                         dcgm_percent=[90, 90], last_success=before),
        *exporter_series("team-a", "a-1", at, signals(12.5, 0.02, 0.1, 0.95, 7, lru=300), gpus=[0.2, 0.4],
                         dcgm_percent=[50, 70], last_success=at - 3),
        # No model loaded: no LRU series. Exporter clock ahead of Prometheus: the scrape time wins the min.
        *exporter_series("team-a", "a-2", at, signals(3, 0, 0, 0.4, 0), gpus=[0.1], dcgm_percent=[10],
                         last_success=at + 100),
        *exporter_series("team-b", "a-1", at, signals(99, 0.5, 2, 0.99, 3, lru=42), gpus=[1.0],
                         last_success=at - 1),
        # An exporter that does not report its own freshness: the scrape time of its request rate is used.
        *exporter_series("team-b", "b-2", at, {names.REQUESTS_PER_SECOND: 5}),
        *exporter_series("team-c", "zzz", at, signals(1000, 9, 9, 1, 9, lru=9), gpus=[1.0], last_success=at),
    ]


def discovery() -> StaticDiscovery:
    return StaticDiscovery.of(
        {(TRITON.namespace, TRITON.deployment): ["a-1", "a-2", "a-3"],
         (MLSERVER.namespace, MLSERVER.deployment): ["a-1", "b-2"]},
        not_ready=["a-3"],
    )


def by_pod(snapshots: list[RuntimeSnapshot]) -> dict[tuple[str, str], PodSample]:
    return {(s.key.namespace, pod.name): pod for s in snapshots for pod in s.pods}


@pytest.fixture
def dead_url() -> Iterator[str]:
    """A URL nothing answers: its port is bound but not listening, so connections are refused at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
async def make_source() -> AsyncIterator[MakeSource]:
    sources: list[PrometheusSource] = []

    def make(url: str, disc: StaticDiscovery | None = None, **options: object) -> PrometheusSource:
        source = PrometheusSource(disc or discovery(), url, **options)  # type: ignore[arg-type]
        sources.append(source)
        return source

    yield make
    for source in sources:
        await source.close()


async def query_requests(prom: PrometheusServer) -> float:
    """How many instant queries Prometheus has answered, from its own self-metrics."""
    status, body = await prom.get("/metrics")
    assert status == 200
    return sum(
        sample.value
        for family in text_string_to_metric_families(body.decode())
        if family.name == "prometheus_http_requests"
        for sample in family.samples
        if sample.name.endswith("_total") and sample.labels.get("handler") == "/api/v1/query"
    )


# ---- against a real Prometheus ----


@pytest.mark.slow
async def test_values_per_pod_come_out_right(
    start_prometheus: StartPrometheus, make_source: MakeSource, now: float
) -> None:
    prom = await start_prometheus(cluster_samples(now))
    source = make_source(prom.url)
    scraped = now - AGE_S

    snapshots = await source.collect(now)

    assert [s.key for s in snapshots] == [TRITON, MLSERVER]
    assert all(s.source_ok and s.taken_at == now for s in snapshots)
    pods = by_pod(snapshots)
    a1 = pods["team-a", "a-1"]
    assert a1.sampled_at == pytest.approx(scraped - 3, abs=1e-3)  # the exporter's own, older than the scrape
    assert a1.gpu_busy == pytest.approx(0.3)  # mean over its two GPUs, from the newest scrape
    assert a1.gpu_sampled_at == pytest.approx(scraped - 10, abs=1e-3)  # the GPU collector's own clock
    assert replace(a1, sampled_at=None, gpu_busy=None, gpu_sampled_at=None) == PodSample(
        name="a-1", ready=True, requests_per_second=12.5, queue_delay_s=0.02, cache_misses_per_second=0.1,
        lru_age_s=300, cache_used_ratio=0.95, models_loaded=7,
    )
    a2 = pods["team-a", "a-2"]
    assert a2.sampled_at == pytest.approx(scraped, abs=1e-3)  # min(exporter's clock, scrape time)
    assert (a2.gpu_busy, a2.requests_per_second, a2.lru_age_s, a2.models_loaded) == (0.1, 3, None, 0)
    assert pods["team-a", "a-3"] == PodSample(name="a-3", ready=False)  # never seen: no data, not zeros
    b1 = pods["team-b", "a-1"]  # same pod name, other namespace: not mixed up
    assert (b1.requests_per_second, b1.lru_age_s) == (99, 42)
    assert b1.sampled_at == pytest.approx(scraped - 1, abs=1e-3)
    b2 = pods["team-b", "b-2"]
    assert b2.sampled_at == pytest.approx(scraped, abs=1e-3)
    assert (b2.requests_per_second, b2.gpu_busy, b2.queue_delay_s) == (5, None, None)
    assert source.errors == {}


@pytest.mark.slow
async def test_dcgm_mode_reads_percent_as_a_ratio(
    start_prometheus: StartPrometheus, make_source: MakeSource, now: float
) -> None:
    prom = await start_prometheus(cluster_samples(now))
    gpu_source: GpuSource = "dcgm"
    source = make_source(prom.url, gpu_source=gpu_source)

    pods = by_pod(await source.collect(now))

    assert pods["team-a", "a-1"].gpu_busy == pytest.approx(0.6)  # (50 + 70) / 2 / 100, not the exporter's 0.3
    assert pods["team-a", "a-2"].gpu_busy == pytest.approx(0.1)
    assert pods["team-b", "a-1"].gpu_busy is None  # no DCGM series for it
    assert pods["team-a", "a-1"].requests_per_second == 12.5


@pytest.mark.slow
async def test_nan_or_negative_series_is_absent_not_zero(
    start_prometheus: StartPrometheus, make_source: MakeSource, caplog: pytest.LogCaptureFixture, now: float
) -> None:
    bad = signals(rps=math.nan, queue=-0.5, misses=0.2, cache=0.5, models=2, lru=math.inf)
    at = now - AGE_S
    prom = await start_prometheus(exporter_series("team-a", "a-1", at, bad, gpus=[0.5], last_success=at))
    source = make_source(prom.url, StaticDiscovery.of({(TRITON.namespace, TRITON.deployment): ["a-1"]}))

    with caplog.at_level(logging.WARNING, logger=source_module.__name__):
        (snapshot,) = await source.collect(now)
        await source.collect(now + 15)

    assert snapshot.source_ok
    (pod,) = snapshot.pods
    assert (pod.requests_per_second, pod.queue_delay_s, pod.lru_age_s) == (None, None, None)
    assert (pod.cache_misses_per_second, pod.cache_used_ratio, pod.gpu_busy) == (0.2, 0.5, 0.5)
    assert source.errors["garbage"] == 6  # three series, two refreshes
    assert len(caplog.records) == 3  # logged once per pod and signal, not per refresh


@pytest.mark.slow
async def test_dead_prometheus_holds_last_good_samples_and_recovers(
    start_prometheus: StartPrometheus, make_source: MakeSource, caplog: pytest.LogCaptureFixture, now: float
) -> None:
    prom = await start_prometheus(cluster_samples(now))
    source = make_source(prom.url)
    good = await source.collect(now)

    await prom.kill()
    with caplog.at_level(logging.INFO, logger=source_module.__name__):
        held = [await source.collect(now + 15 * i) for i in (1, 2, 3)]
        # While it is down, newer data arrives (as if backfilled by a remote-write replay).
        newer = [s for s in cluster_samples(now, age_s=2) if s.labels["pod"] == "a-2"]
        create_blocks(openmetrics_text(newer), prom.tsdb_dir)
        await prom.start()
        back = await source.collect(now + 60)

    for snapshots in held:
        assert all(not s.source_ok for s in snapshots)
        assert by_pod(snapshots) == by_pod(good)  # last good samples, old sampled_at: stale, never zero
    assert source.errors["connect"] == 3
    assert all(s.source_ok for s in back)
    assert by_pod(back)["team-a", "a-2"].sampled_at == pytest.approx(now - 2, abs=1e-3)
    assert by_pod(back)["team-a", "a-1"] == by_pod(good)["team-a", "a-1"]
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "connect" in warnings[0].getMessage()  # once per outage, from any logger
    assert any("answers again" in r.getMessage() for r in caplog.records)
    assert source.outage_since is None


@pytest.mark.slow
async def test_one_query_per_signal_per_refresh(
    start_prometheus: StartPrometheus, make_source: MakeSource, now: float
) -> None:
    prom = await start_prometheus(cluster_samples(now))
    source = make_source(prom.url)

    before = await query_requests(prom)
    await source.collect(now)
    await source.collect(now + 15)
    after = await query_requests(prom)

    # Two runtimes, five pods, two refreshes: still one query per signal per refresh, and the round's instant.
    # the nine signals, the recent models, the failing ModelMesh collectors, time()
    assert after - before == 2 * (len(source.queries) + 1) == 24


@pytest.mark.slow
async def test_no_series_for_any_known_pod_is_an_outage(
    start_prometheus: StartPrometheus, make_source: MakeSource, now: float
) -> None:
    scraped = now - AGE_S
    other = exporter_series("elsewhere", "x-1", scraped, signals(1, 0, 0, 0.5, 1), last_success=scraped)
    prom = await start_prometheus(other)
    source = make_source(prom.url)

    snapshots = await source.collect(now)

    assert all(not s.source_ok for s in snapshots)
    assert source.errors["empty"] == 1
    assert all(pod == PodSample(name=pod.name, ready=pod.ready) for s in snapshots for pod in s.pods)


@pytest.mark.slow
@pytest.mark.slow
async def test_an_exporter_clock_that_is_off_is_read_on_its_own_clock(
    start_prometheus: StartPrometheus, make_source: MakeSource, now: float
) -> None:
    """Prometheus scraped three exporters at `at` by its own clock. c-1's node clock read 120 s behind and its
    collector had succeeded 2 s before: 2 s old, not 122 s. c-2's clock read 300 s ahead and its collector
    had hung for 100 s: 100 s old, not capped at the scrape time as fresh. c-3's clock was 0.5 s behind, within
    the tolerance: its timestamp as reported."""
    at = now - AGE_S
    values = signals(10, 0, 0, 0.5, 1)
    clock = names.EXPORTER_TIME
    samples = [
        *exporter_series("team-a", "c-1", at, values | {clock: at - 120}, last_success=at - 122),
        *exporter_series("team-a", "c-2", at, values | {clock: at + 300}, last_success=at + 200),
        *exporter_series("team-a", "c-3", at, values | {clock: at - 0.5}, last_success=at - 4),
    ]
    prom = await start_prometheus(samples)
    source = make_source(prom.url, StaticDiscovery.of({(TRITON.namespace, TRITON.deployment): ["c-1", "c-2", "c-3"]}))

    pods = by_pod(await source.collect(now))

    assert pods["team-a", "c-1"].sampled_at == pytest.approx(at - 2, abs=1e-3)
    assert pods["team-a", "c-2"].sampled_at == pytest.approx(at - 100, abs=1e-3)
    assert pods["team-a", "c-3"].sampled_at == pytest.approx(at - 4, abs=1e-3)


@pytest.mark.slow
async def test_a_pod_scraped_by_two_jobs_is_as_fresh_as_its_newest_scrape(
    start_prometheus: StartPrometheus, make_source: MakeSource, now: float
) -> None:
    """The same exporter scraped by a PodMonitor and by an annotation-based job at Prometheus's 1-minute default:
    d-1's collector succeeded 2 s before the fast job's scrape, AGE_S ago; the slow job last scraped it 60 s
    before that. The pod's freshness is the newest scrape's, AGE_S + 2 s old; read as the slow job's, 72 s
    old, every pod went stale once a minute, holding every value and answering 503 below `min_coverage`."""
    at, slow = now - AGE_S, now - AGE_S - 60
    values = signals(10, 0, 0, 0.5, 1)
    samples = [*exporter_series("team-a", "d-1", at, values, gpus=[0.5], last_success=at - 2),
               *(replace(sample, labels={**sample.labels, "job": "kubernetes-pods"})
                 for sample in exporter_series("team-a", "d-1", slow, values, gpus=[0.5], last_success=slow - 2))]
    prom = await start_prometheus(samples)
    source = make_source(prom.url, StaticDiscovery.of({(TRITON.namespace, TRITON.deployment): ["d-1"]}))

    pods = by_pod(await source.collect(now))

    assert pods["team-a", "d-1"].sampled_at == pytest.approx(at - 2, abs=1e-3)
    assert pods["team-a", "d-1"].gpu_sampled_at == pytest.approx(at - 10, abs=1e-3)  # the GPU collector's


@pytest.mark.slow
async def test_a_pod_scraped_by_two_jobs_reads_each_gpu_once(
    start_prometheus: StartPrometheus, make_source: MakeSource, now: float
) -> None:
    """The two jobs of the test above, the load just risen: the fast job's scrape has the GPUs 90% and 70% busy,
    the slow job's, 60 s older, 10% each. The pod is 80% busy, the mean of its two GPUs, each read once and the
    larger of its two scrapes (as every signal scraped twice); averaged over the four series it read 45% until
    the slow job scraped again, a scale-up held back up to a minute while the pod counted fresh."""
    at, slow = now - AGE_S, now - AGE_S - 60
    values = signals(10, 0, 0, 0.5, 1)
    samples = [*exporter_series("team-a", "d-1", at, values, gpus=[0.9, 0.7], last_success=at - 2),
               *(replace(sample, labels={**sample.labels, "job": "kubernetes-pods"})
                 for sample in exporter_series("team-a", "d-1", slow, values, gpus=[0.1, 0.1],
                                               last_success=slow - 2))]
    prom = await start_prometheus(samples)
    source = make_source(prom.url, StaticDiscovery.of({(TRITON.namespace, TRITON.deployment): ["d-1"]}))

    pods = by_pod(await source.collect(now))

    assert pods["team-a", "d-1"].gpu_busy == pytest.approx(0.8)


@pytest.mark.slow
async def test_a_pod_whose_gpu_collector_fails_has_no_gpu_signal_not_the_mean_of_the_gpus_left(
    start_prometheus: StartPrometheus, make_source: MakeSource, now: float
) -> None:
    """e-1's exporter lost its 90%-busy GPU: it serves the idle one's series alone and says its GPU collector
    fails. Averaged, the pod read 5% busy with the GPU timestamp of the pass before, still fresh; it is missing
    GPU data instead (held, never lowered). e-2, whose collector works, is read as ever."""
    at = now - AGE_S
    values = signals(10, 0, 0, 0.5, 1)
    failing = {"namespace": "team-a", "pod": "e-1", "job": "modelmesh-exporter", "instance": "e-1:9187",
               "collector": names.COLLECTOR_GPU}
    samples = [*exporter_series("team-a", "e-1", at, values, gpus=[0.05], last_success=at - 2),
               Sample(names.COLLECTOR_SUCCESS, failing, 0.0, at),
               *exporter_series("team-a", "e-2", at, values, gpus=[0.05, 0.9], last_success=at - 2),
               Sample(names.COLLECTOR_SUCCESS, {**failing, "pod": "e-2", "instance": "e-2:9187"}, 1.0, at)]
    prom = await start_prometheus(samples)
    source = make_source(prom.url, StaticDiscovery.of({(TRITON.namespace, TRITON.deployment): ["e-1", "e-2"]}))

    pods = by_pod(await source.collect(now))

    assert pods["team-a", "e-1"].gpu_busy is None
    assert pods["team-a", "e-1"].requests_per_second == 10  # its load, read as ever
    assert pods["team-a", "e-2"].gpu_busy == pytest.approx(0.475)


async def test_scraped_exporter_series_are_joined_by_their_own_labels(
    aiohttp_server: AiohttpServer, tmp_path: Path, make_source: MakeSource
) -> None:
    class PodCollector:
        """Exporter-format series that name their pod themselves, as when Prometheus honors labels."""

        def collect(self) -> Iterable[Metric]:
            for name, value in signals(7, 0.01, 0, 0.5, 2, lru=60).items():
                family = GaugeMetricFamily(name, "test", labels=["namespace", "pod"])
                family.add_metric(["team-a", "a-1"], value)
                yield family
            labels = ["namespace", "pod", "collector"]
            last = GaugeMetricFamily(names.LAST_SUCCESS_TIMESTAMP, "test", labels=labels)
            published.append(time.time() - 1)
            last.add_metric(["team-a", "a-1", names.COLLECTOR_MODELMESH], published[-1])
            yield last

    published: list[float] = []  # the last success times the exporter gave, a scrape each

    registry = CollectorRegistry()
    registry.register(PodCollector())
    app = web.Application()
    app.router.add_get("/metrics", make_aiohttp_handler(registry))
    exporter = await aiohttp_server(app)
    async with PrometheusServer([str(exporter.make_url("/metrics"))], workdir=tmp_path) as prom:
        await prom.wait_for(names.REQUESTS_PER_SECOND, timeout=20)
        source = make_source(prom.url, StaticDiscovery.of({(TRITON.namespace, TRITON.deployment): ["a-1"]}))
        before = time.time()
        (snapshot,) = await source.collect(before)

    (pod,) = snapshot.pods
    assert snapshot.source_ok
    assert (pod.requests_per_second, pod.lru_age_s, pod.models_loaded) == (7, 60, 2)
    # One of the last success times the exporter published (not a window of the clock before the refresh: a loaded
    # machine's newest scrape could be older than that)
    assert pod.sampled_at is not None and pod.sampled_at in published, (pod.sampled_at, published)


# ---- failure modes that need no Prometheus ----


async def test_dead_url_fails_fast(make_source: MakeSource, dead_url: str, now: float) -> None:
    source = make_source(dead_url, timeout_s=5.0)

    snapshots = await source.collect(now)

    assert all(not s.source_ok for s in snapshots)
    assert all(pod == PodSample(name=pod.name, ready=pod.ready) for s in snapshots for pod in s.pods)
    assert source.errors == {"connect": 1}  # refused at once: said as such, not waited out as a timeout
    assert source.last_error is not None and isinstance(source.last_error.__cause__, Exception)
    # The log line names the URL and why, not the whole URL-encoded query (it was about 1.5 KB).
    assert "query=" not in str(source.last_error) and len(str(source.last_error)) < 400, str(source.last_error)


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        pytest.param(503, "Service Unavailable", "http", id="http-5xx"),
        pytest.param(200, "<html>a proxy login page</html>", "parse", id="not-json"),
        pytest.param(200, '{"data": {"result": "oops"}}', "parse", id="not-a-vector"),
        pytest.param(200, '{"data": {"result": [{"value": 1}]}}', "parse", id="bad-item"),
    ],
)
async def test_bad_answers_are_an_outage_not_an_exception(
    aiohttp_server: AiohttpServer, make_source: MakeSource, status: int, body: str, reason: str, now: float
) -> None:
    async def answer(request: web.Request) -> web.Response:
        return web.Response(status=status, text=body, content_type="application/json")

    app = web.Application()
    app.router.add_get("/api/v1/query", answer)
    server = await aiohttp_server(app)
    source = make_source(str(server.make_url("")))

    snapshots = await source.collect(now)

    assert all(not s.source_ok for s in snapshots)
    assert source.errors == {reason: 1}


async def test_slow_prometheus_times_out(
    aiohttp_server: AiohttpServer, make_source: MakeSource, now: float
) -> None:
    release = asyncio.Event()

    async def stall(request: web.Request) -> web.Response:
        await release.wait()
        return web.Response(text="{}")

    app = web.Application()
    app.router.add_get("/api/v1/query", stall)
    server = await aiohttp_server(app)
    source = make_source(str(server.make_url("")), timeout_s=0.2)

    snapshots = await source.collect(now)  # returns only by giving up: the answer is released after it
    release.set()

    assert all(not s.source_ok for s in snapshots)
    assert source.errors == {"timeout": 1}


async def test_a_flapping_prometheus_is_logged_once_a_minute_not_at_every_flip(
    aiohttp_server: AiohttpServer, make_source: MakeSource, caplog: pytest.LogCaptureFixture, now: float
) -> None:
    """A Prometheus (or the proxy before it) failing every other refresh logged a warning and an "answers again"
    a flap: at a 5 s refresh about 17,000 lines a day. An outage that starts again for the same reason within a
    minute of the last line is counted, not logged (nor its recovery); the next line says how many there were."""
    refreshes = 0

    async def flap(request: web.Request) -> web.Response:
        if refreshes % 2 == 0:
            return web.json_response({"status": "error", "errorType": "unavailable", "error": "not ready"},
                                     status=503)
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": []}})

    app = web.Application()
    app.router.add_get("/api/v1/query", flap)
    server = await aiohttp_server(app)
    clock = SteppedClock(now)
    disc = StaticDiscovery.of({(TRITON.namespace, TRITON.deployment): ["a-1"]}, not_ready=["a-1"])
    source = make_source(str(server.make_url("")), disc, clock=clock)

    with caplog.at_level(logging.INFO, logger=source_module.__name__):
        for refreshes in range(30):  # 150 s: 15 outages, each over at the next refresh
            (snapshot,) = await source.collect(clock())
            assert snapshot.source_ok == (refreshes % 2 == 1)
            clock.advance(5)

    failed = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    recovered = [r.getMessage() for r in caplog.records if "answers again" in r.getMessage()]
    assert len(failed) == 3, failed  # at 0 s, 60 s and 120 s
    assert "11 more times" not in failed[0] and "HTTP 503" in failed[0]
    assert "it failed 5 more times since the last line 60 s ago, recovering in between" in failed[1], failed[1]
    assert len(recovered) == 3, recovered  # the logged outages' recoveries only
    assert source.errors == {"http": 15}


async def test_an_outage_quiet_at_its_start_that_lasts_is_not_counted_among_the_flaps_before_its_line(
    aiohttp_server: AiohttpServer, make_source: MakeSource, caplog: pytest.LogCaptureFixture, now: float
) -> None:
    """A flap within the minute, then an outage that starts quietly and lasts past the minute: its line counts
    the flap alone, the one outage since the last line that failed and recovered without a line of its own."""
    answers = [False, True, False, True] + [False] * 15  # whether each refresh, 5 s apart, is answered
    refresh = 0

    async def scripted(request: web.Request) -> web.Response:
        if answers[refresh]:
            return web.json_response({"status": "success", "data": {"resultType": "vector", "result": []}})
        return web.json_response({"status": "error", "errorType": "unavailable", "error": "not ready"}, status=503)

    app = web.Application()
    app.router.add_get("/api/v1/query", scripted)
    server = await aiohttp_server(app)
    clock = SteppedClock(now)
    disc = StaticDiscovery.of({(TRITON.namespace, TRITON.deployment): ["a-1"]}, not_ready=["a-1"])
    source = make_source(str(server.make_url("")), disc, clock=clock)

    with caplog.at_level(logging.INFO, logger=source_module.__name__):
        for refresh in range(len(answers)):
            (snapshot,) = await source.collect(clock())
            assert snapshot.source_ok == answers[refresh]
            clock.advance(5)

    failed = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(failed) == 2, failed
    assert "(it failed 1 more times since the last line 60 s ago, recovering in between)" in failed[1], failed[1]


class TricklingPrometheus:
    """A Prometheus (or a proxy before it) that answers slower than any timeout can see: it sends a byte of its
    answer's headers or of its body every 50 ms, for as long as the connection stays open, so that no socket
    read ever waits as long as the read timeout. `mode` says what the next connections get: "body" (200 and a
    body that never ends; "body-close" says `Connection: close`, "body-http10" answers in HTTP/1.0), "headers"
    (a status line and headers that never end) or "answer" (an empty vector, at once)."""

    def __init__(self) -> None:
        self.mode = "body"
        self.trickling = 0  # connections being trickled to now

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            if self.mode == "answer":
                body = b'{"status": "success", "data": {"resultType": "vector", "result": []}}'
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
                return
            self.trickling += 1
            try:
                if self.mode.startswith("body"):
                    writer.write(b"HTTP/1.0 200 OK\r\n" if self.mode == "body-http10" else b"HTTP/1.1 200 OK\r\n")
                    writer.write(b"Connection: close\r\n" if self.mode == "body-close" else b"")
                    writer.write(b"Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{")
                else:
                    writer.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                while not reader.at_eof():
                    writer.write(b"X" if self.mode == "headers" else b" ")
                    await writer.drain()
                    await asyncio.sleep(0.05)
            finally:
                self.trickling -= 1
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


async def read_again(source: PrometheusSource, stuck_at: float, refreshes: int = 3) -> RuntimeSnapshot:
    """The first of `refreshes` refreshes (15 s apart after `stuck_at`) that reads the healed backend, else the last.
    A wedged source reads it in none; a loaded machine can time one out (a 1 s read timeout, the backend answering
    from this event loop: a clean-clone run with the suite's other six files compiling beside it did)."""
    for refresh in range(1, refreshes + 1):
        (snapshot,) = await source.collect(stuck_at + 15 * refresh)
        if snapshot.source_ok:
            break
    return snapshot


@pytest.mark.parametrize(("mode", "tls"), [("body", False), ("headers", False), ("body", True),
                                           ("body-close", False), ("body-http10", False), ("body-close", True)])
async def test_a_prometheus_that_trickles_its_answers_wedges_nothing(
    make_source: MakeSource, mode: str, tls: bool, now: float, tmp_path: Path
) -> None:
    """requests' read timeout bounds each socket read, not an answer: a backend that sends a byte every 50 ms
    never trips it. Before, each query thread stayed in such a read for as long as the backend trickled, and
    every later refresh queued behind them ("queries took longer than 1.6 s", nothing asked) even once the
    backend answered again, until the adapter restarted. Now the round's deadline shuts its connections: the
    refresh fails as a timeout, the backend sees them closed, and the next refresh reads the healed backend.
    Also for an answer that will close its connection (`Connection: close`, HTTP/1.0), whose socket http.client
    hands to the response alone: it was not cut, and every value stayed 503 for as long as the trickle lasted."""
    backend = TricklingPrometheus()
    backend.mode = mode
    certificates = generate_self_signed(tmp_path / "tls", "prometheus", ["127.0.0.1"]) if tls else None
    server = await asyncio.start_server(
        backend.serve, "127.0.0.1", 0,
        ssl=None if certificates is None else server_context(certificates.cert_file, certificates.key_file))
    port = server.sockets[0].getsockname()[1]
    disc = StaticDiscovery.of({(TRITON.namespace, TRITON.deployment): ["a-1"]}, not_ready=["a-1"])
    # A read timeout well above the trickle's 50 ms between bytes, which never trips it, and above what a loaded
    # machine takes to answer the healed round's queries (0.3 s timed them out: the suite's other processes).
    source = make_source(f"{'https' if tls else 'http'}://127.0.0.1:{port}", disc, timeout_s=1.0,
                         verify=True if certificates is None else str(certificates.cert_file))
    try:
        (stuck,) = await source.collect(now)  # returns only by the deadline (2 x 1 s + 1 s): the trickle never ends
        assert not stuck.source_ok and source.errors == {"timeout": 1}
        await eventually(lambda: backend.trickling == 0)  # the adapter let go of every connection

        backend.mode = "answer"
        healed = await read_again(source, now)

        assert healed.source_ok, source.last_error
        assert set(source.errors) == {"timeout"}, source.errors
    finally:
        server.close()
        await server.wait_closed()


async def test_unhealthy_discovery_marks_snapshots_not_ok(
    aiohttp_server: AiohttpServer, make_source: MakeSource, now: float
) -> None:
    async def answer(request: web.Request) -> web.Response:
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": []}})

    app = web.Application()
    app.router.add_get("/api/v1/query", answer)
    server = await aiohttp_server(app)
    disc = StaticDiscovery.of({(TRITON.namespace, TRITON.deployment): ["a-1"]}, not_ready=["a-1"])
    disc.healthy = False
    source = make_source(str(server.make_url("")), disc)

    (snapshot,) = await source.collect(now)

    assert not snapshot.source_ok
    assert source.errors == {}  # Prometheus itself was fine: no Ready pod, so an empty answer is no outage


async def test_pod_missing_from_an_answer_keeps_its_last_good_sample(
    aiohttp_server: AiohttpServer, make_source: MakeSource, now: float
) -> None:
    """Prometheus answers, but one pod's series are gone (its scrape failed): hold, never zero, never go back."""
    answers: Answers = {}
    series = series_at(TRITON.namespace, now)
    url = await answering_prometheus(aiohttp_server, answers)
    source = make_source(url, StaticDiscovery.of({(TRITON.namespace, TRITON.deployment): ["a-1", "a-2"]}))
    freshness, _gpu, rps, *_ = source.queries

    answers[freshness] = [series("a-1", now - 5), series("a-2", now - 5)]
    answers[rps] = [series("a-1", 40.0), series("a-2", 2.0)]
    (first,) = await source.collect(now)
    answers[freshness] = [series("a-2", now)]  # a-1 vanished
    answers[rps] = [series("a-2", 3.0)]
    (second,) = await source.collect(now + 15)
    answers[freshness] = [series("a-1", now - 60), series("a-2", now)]  # a-1 back, but older than we hold
    answers[rps] = [series("a-1", 0.0), series("a-2", 3.0)]
    (third,) = await source.collect(now + 30)

    assert first.pods[0].requests_per_second == 40.0
    assert second.source_ok and third.source_ok
    assert second.pods[0] == first.pods[0] == third.pods[0]  # stale by its own sampled_at, not idle
    assert (second.pods[1].requests_per_second, second.pods[1].sampled_at) == (3.0, now)
    assert source.errors == {}


@pytest.mark.slow
async def test_dcgm_series_scraped_without_honor_labels_name_the_pod_in_exported_pod(
    start_prometheus: StartPrometheus, make_source: MakeSource, now: float
) -> None:
    at = now - AGE_S
    dcgm_exporter = {"namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-7x2k", "job": "dcgm"}
    samples = [
        *exporter_series("team-a", "a-1", at, signals(12.5, 0.02, 300, 0.95, 7), gpus=[0.3], last_success=at),
        # Prometheus kept the DCGM exporter's own pod in `pod` and moved the GPU's pod to `exported_pod`.
        Sample(names.DCGM_GPU_UTIL, dcgm_exporter | {"gpu": "0", "exported_namespace": "team-a",
                                                     "exported_pod": "a-1"}, 40, at),
        Sample(names.DCGM_GPU_UTIL, dcgm_exporter | {"gpu": "1", "exported_namespace": "team-a",
                                                     "exported_pod": "a-1"}, 80, at),
        Sample(names.DCGM_GPU_UTIL, dcgm_exporter | {"gpu": "2"}, 100, at),  # a GPU no pod holds
    ]
    prom = await start_prometheus(samples)
    source = make_source(prom.url, gpu_source="dcgm", dcgm_pod_label="exported_pod",
                         dcgm_namespace_label="exported_namespace")

    pods = by_pod(await source.collect(now))

    assert pods["team-a", "a-1"].gpu_busy == pytest.approx(0.6)  # (40 + 80) / 2 / 100, the idle GPU left out
    assert pods["team-a", "a-1"].requests_per_second == 12.5


@pytest.mark.slow
async def test_dcgm_gpu_freshness_with_exported_pod_is_the_samples_time_not_the_query_time(
    start_prometheus: StartPrometheus, make_source: MakeSource, now: float
) -> None:
    """`timestamp()` gives sample times only of a plain selector: of `label_replace(...)` it gives the query's
    time, which would make a DCGM exporter that stopped minutes ago look fresh to --max-staleness."""
    at, gpu_at = now - AGE_S, now - 200
    dcgm_exporter = {"namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-7x2k", "job": "dcgm"}
    samples = [
        *exporter_series("team-a", "a-1", at, signals(12.5, 0.02, 300, 0.95, 7), last_success=at),
        Sample(names.DCGM_GPU_UTIL, dcgm_exporter | {"gpu": "0", "exported_namespace": "team-a",
                                                     "exported_pod": "a-1"}, 40, gpu_at),
    ]
    prom = await start_prometheus(samples)
    source = make_source(prom.url, gpu_source="dcgm", dcgm_pod_label="exported_pod",
                         dcgm_namespace_label="exported_namespace")

    a1 = by_pod(await source.collect(now))["team-a", "a-1"]

    assert a1.gpu_busy == pytest.approx(0.4)
    assert a1.gpu_sampled_at == pytest.approx(gpu_at, abs=1e-3)


async def test_credentials_in_the_url_are_sent_but_never_logged(
    aiohttp_server: AiohttpServer, make_source: MakeSource, caplog: pytest.LogCaptureFixture, now: float
) -> None:
    """`--prometheus-url https://user:password@host/prefix` authenticates (requests sends basic auth), but its
    password must not land in the adapter's log or in the error it keeps for /debug."""
    authorizations: list[str | None] = []

    async def refuse(request: web.Request) -> web.Response:
        authorizations.append(request.headers.get("Authorization"))
        return web.Response(status=503, text="Service Unavailable")

    app = web.Application()
    app.router.add_get("/prom/api/v1/query", refuse)
    server = await aiohttp_server(app)
    url = str(server.make_url("/prom")).replace("://", "://alice:s3cret@")
    source = make_source(url)

    with caplog.at_level(logging.DEBUG, logger="autoscaler.sources.prometheus"):
        await source.collect(now)

    assert authorizations and set(authorizations) == {"Basic YWxpY2U6czNjcmV0"}
    assert source.errors == {"http": 1}
    assert "s3cret" not in caplog.text and "s3cret" not in str(source.last_error)
    assert "alice" in caplog.text  # which account failed is still said


@pytest.mark.slow
async def test_a_prometheus_clock_that_is_off_is_moved_onto_the_adapters(
    start_prometheus: StartPrometheus, make_source: MakeSource, caplog: pytest.LogCaptureFixture, now: float
) -> None:
    """Prometheus's node clock reads 120 s behind the adapter's: a pod it scraped 10 s ago is 10 s old, not
    130 s (stale for good, so its runtime never scales down); 120 s ahead, a pod 130 s old is not 10 s old."""
    at = now - AGE_S
    prom = await start_prometheus(exporter_series("team-a", "a-1", at, signals(10, 0, 0, 0.5, 1), gpus=[0.5],
                                                  last_success=at))
    disc = StaticDiscovery.of({(TRITON.namespace, TRITON.deployment): ["a-1"]})
    for off_s in (120.0, -120.0):
        source = make_source(prom.url, disc, clock=lambda off_s=off_s: time.time() + off_s)

        with caplog.at_level(logging.WARNING, logger="autoscaler.sources.prometheus"):
            began = time.time()
            a1 = by_pod(await source.collect(now + off_s))["team-a", "a-1"]
            took = time.time() - began

        # Moved by the offset measured from the send of Prometheus's time(): older by at most the time that query
        # took, never newer (a window of 0.5 s, as it was, a loaded machine's query overran). Milliseconds: its
        # precision.
        assert a1.sampled_at is not None
        assert at + off_s - took - 0.001 <= a1.sampled_at <= at + off_s + 0.001, (a1.sampled_at - at - off_s, took)
        assert a1.gpu_sampled_at is not None
        assert at - 10 + off_s - took - 0.001 <= a1.gpu_sampled_at <= at - 10 + off_s + 0.001, (
            a1.gpu_sampled_at - at + 10 - off_s, took)
        assert f"{-off_s:+.0f} s" in caplog.text  # the log says Prometheus's clock is off, and by how much


async def test_a_prometheus_whose_targets_carry_other_label_names_is_read_through_the_flags(
    start_prometheus: StartPrometheus, now: float
) -> None:
    """Prometheus setups from before the PodMonitor defaults name a target's namespace and pod
    `kubernetes_namespace` and `kubernetes_pod_name` (the classic `kubernetes_sd_configs` relabelling). The source
    always took other label names; `serve` had no flag to give them, so such a Prometheus read as empty."""
    renamed = {"namespace": "kubernetes_namespace", "pod": "kubernetes_pod_name"}
    samples = [
        Sample(sample.name, {renamed.get(key, key): value for key, value in sample.labels.items()}, sample.value,
               sample.timestamp)
        for sample in cluster_samples(now)
    ]
    prom = await start_prometheus(samples)
    args = cli.build_parser().parse_args([
        "serve", "--source", "prometheus", "--prometheus-url", prom.url,
        "--prometheus-namespace-label", "kubernetes_namespace", "--prometheus-pod-label", "kubernetes_pod_name"])
    source = build_source(settings_from_args(args, {}), discovery())
    try:
        pods = by_pod(await source.collect(now))
    finally:
        await source.close()
    assert (pods["team-a", "a-1"].requests_per_second, pods["team-b", "a-1"].requests_per_second) == (12.5, 99)
    assert pods["team-a", "a-1"].gpu_busy == pytest.approx(0.3)


async def test_a_prometheus_behind_tls_and_a_bearer_token_is_read_with_the_ca_and_token_files(
    start_prometheus: StartPrometheus, now: float, tmp_path: Path
) -> None:
    """Thanos Querier on OpenShift, or a Prometheus behind an oauth proxy: https with the cluster's own CA, and a
    service-account token that the kubelet rotates in its file. The stand-in here is a TLS proxy that checks the
    token and passes the query on to a real Prometheus (no such proxy runs here)."""
    prom = await start_prometheus(cluster_samples(now))
    certificates = generate_self_signed(tmp_path / "proxy", "thanos-querier", ["127.0.0.1"])
    token_file = tmp_path / "token"
    token_file.write_text("token-one\n")
    accepted = {"Bearer token-one"}
    seen: list[str | None] = []

    async def query(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        if request.headers.get("Authorization") not in accepted:
            return web.Response(status=401, text="Unauthorized")
        async with aiohttp.ClientSession() as session, session.get(f"{prom.url}/api/v1/query",
                                                                   params=request.query) as answer:
            return web.Response(status=answer.status, body=await answer.read(), content_type="application/json")

    app = web.Application()
    app.router.add_get("/api/v1/query", query)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_context(certificates.cert_file,
                                                                          certificates.key_file))
    await site.start()
    port = runner.addresses[0][1]
    args = cli.build_parser().parse_args([
        "serve", "--source", "prometheus", "--prometheus-url", f"https://127.0.0.1:{port}",
        "--prometheus-ca-file", str(certificates.cert_file), "--prometheus-token-file", str(token_file)])
    source = build_source(settings_from_args(args, {}), discovery())
    try:
        assert by_pod(await source.collect(now))["team-a", "a-1"].requests_per_second == 12.5
        # The kubelet rotates the token: the next refresh sends the new one.
        token_file.write_text("token-two\n")
        accepted = {"Bearer token-two"}
        assert by_pod(await source.collect(now))["team-a", "a-1"].requests_per_second == 12.5
        # A tool that rewrites the file in place empties it first: read then, it sent `Bearer ` with nothing
        # after it (a 401 outage), and kept the empty token as the last one read. The last good one stays.
        token_file.write_text("")
        assert by_pod(await source.collect(now))["team-a", "a-1"].requests_per_second == 12.5
        assert source.errors == {}
    finally:
        await source.close()
        await runner.cleanup()
    assert seen[-1] == "Bearer token-two"


async def test_headers_given_on_the_command_line_go_with_every_query(
    aiohttp_server: AiohttpServer, now: float
) -> None:
    """Grafana Mimir and Cortex pick the tenant by `X-Scope-OrgID`; without a way to send it the adapter could
    not read them, though the docs name Mimir."""
    headers: list[tuple[str | None, str | None]] = []

    async def refuse(request: web.Request) -> web.Response:
        headers.append((request.headers.get("X-Scope-OrgID"), request.headers.get("X-Extra")))
        return web.Response(status=503, text="Service Unavailable")

    app = web.Application()
    app.router.add_get("/prometheus/api/v1/query", refuse)
    server = await aiohttp_server(app)
    args = cli.build_parser().parse_args([
        "serve", "--source", "prometheus", "--prometheus-url", str(server.make_url("/prometheus")),
        "--prometheus-headers", "X-Scope-OrgID=team-a|team-b, X-Extra=1=2"])
    source = build_source(settings_from_args(args, {}), discovery())
    try:
        await source.collect(now)
    finally:
        await source.close()
    assert headers and set(headers) == {("team-a|team-b", "1=2")}


@pytest.mark.parametrize("value", ["X-Scope-OrgID", "=team", "X Bad=1"])
def test_a_header_that_is_not_name_value_is_refused_at_start(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.build_parser().parse_args(["serve", "--prometheus-headers", value])
    assert exit_.value.code == 2
    assert "--prometheus-headers" in capsys.readouterr().err


def test_only_one_of_the_dcgm_labels_moved_to_exported_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    """Where Prometheus does not honour the DCGM exporter's labels it moves both, pod and namespace, to
    `exported_*`: giving only `--dcgm-pod-label exported_pod` finds no pod's GPU, silently."""
    for flags, warned in ((["--dcgm-pod-label", "exported_pod"], True),
                          (["--dcgm-pod-label", "exported_pod", "--dcgm-namespace-label", "exported_namespace"],
                           False)):
        caplog.clear()
        args = cli.build_parser().parse_args(["serve", "--source", "prometheus", "--prometheus-url",
                                              "http://127.0.0.1:9", "--gpu-source", "dcgm", *flags])
        with caplog.at_level(logging.WARNING):
            build_source(settings_from_args(args, {}), discovery())
        assert ("--dcgm-namespace-label exported_namespace" in caplog.text) is warned, caplog.text


async def test_the_query_timeout_is_a_flag(aiohttp_server: AiohttpServer, now: float) -> None:
    """A Thanos or Mimir fanning out to many stores can take longer than the 5 s default, and a user who would
    rather hold values sooner may want less: the flag sets it, for the source and for Prometheus (its `timeout`
    parameter). Here a store slower than `--prometheus-timeout 0.5` answers once the source told 0.5 s has given
    up: that source sees a timeout, one on the default still gets the answer."""
    gave_up = asyncio.Event()
    told: list[str] = []

    async def slow(request: web.Request) -> web.Response:
        told.append(request.query.get("timeout", "(none)"))
        await gave_up.wait()
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": []}})

    app = web.Application()
    app.router.add_get("/api/v1/query", slow)
    server = await aiohttp_server(app)

    def source_with(flags: list[str]) -> MetricSource:
        args = cli.build_parser().parse_args(["serve", "--source", "prometheus", "--prometheus-url",
                                              str(server.make_url("")), *flags])
        return build_source(settings_from_args(args, {}), discovery())

    patient, hasty = source_with([]), source_with(["--prometheus-timeout", "0.5"])
    try:
        answered = asyncio.create_task(patient.collect(now))
        async with asyncio.timeout(60):  # only a hang guard: were the flag ignored, nothing would answer it
            await hasty.collect(now)
        gave_up.set()
        await answered
    finally:
        await patient.close()
        await hasty.close()
    assert hasty.errors == {"timeout": 1}
    assert patient.errors == {"empty": 1}
    assert set(told) == {"5", "0.5"}, told
