"""The exporter's `/metrics` over a ModelMesh container's life: restarts, start-up, publishes, its own restart.

The ModelMesh side is `modelmesh_wire` (the real container's text and timing, from its source); the exporter
side is its real collector and HTTP app, read over HTTP and parsed with prometheus_client as a scraper does.
One stepped clock drives ModelMesh's wall clock and the exporter's clocks, so every value below is exact.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import ssl
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.api.certs import generate_self_signed, server_context
from exporter import names
from exporter.collectors.health import CollectorHealth
from exporter.collectors.modelmesh import ModelMeshCollector
from tests.exporter.conftest import Clock, ExporterPod, failed_read_line
from tests.exporter.modelmesh_wire import MetricsPort, ModelMeshContainer

INTERVAL_S = 5.0
WINDOW_S = 30.0
RESTART_LOG = "ModelMesh restarted"
CACHE_FAMILIES = (names.MODELS_LOADED, names.CACHE_CAPACITY_BYTES, names.CACHE_USED_RATIO, names.LRU_AGE_SECONDS)


class Pod(ExporterPod):
    """A pod whose exporter averages load over WINDOW_S, read as its unlabelled series."""

    default_collector_options = {"load_window_s": WINDOW_S}

    async def step(self, requests_per_second: float = 40.0, seconds: float = INTERVAL_S) -> dict[str, float]:
        """`seconds` of traffic in ModelMesh, then one exporter read of it; what /metrics serves after it."""
        if requests_per_second:
            self.container.serve(requests_per_second * seconds)
        await self.read_modelmesh(seconds)
        return await self.published()

    async def published(self) -> dict[str, float]:
        """The exporter's unlabelled series as a scraper reads them."""
        text = await self.metrics_text()
        return {sample.name: sample.value for family in text_string_to_metric_families(text)
                for sample in family.samples if not sample.labels}


PodFactory = Callable[..., Awaitable[Pod]]


@pytest.fixture
def pod_class() -> type[Pod]:
    return Pod


def pod_series(served: dict[str, float]) -> dict[str, float]:
    return {name: value for name, value in served.items() if name.startswith("modelmesh_pod_")}


def restart_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if RESTART_LOG in r.getMessage()]


@pytest.mark.parametrize(("per_model", "queue_timed"), [(False, True), (True, True), (False, False)],
                         ids=["per-model-off", "per-model-on", "per-model-off-queue-untimed"])
async def test_a_modelmesh_restart_is_one_reset_with_no_rate_mixing_the_two_containers(
    pod_factory: PodFactory, caplog: pytest.LogCaptureFixture, per_model: bool, queue_timed: bool,
) -> None:
    """The `mm` container restarts: its port refuses connections for 20 s (inside the load window), then its
    new JVM answers with no request series yet, and traffic resumes a little later. One restart must be one
    reset: no rate from the old container's counts once the new one answers, a rate on every read once two
    readings of the new one exist (above all when traffic resumes, when the pod turns Ready and the adapter
    needs it), every request of the new container counted, and one log line that says it restarted.

    `per-model-off-queue-untimed` is modelmesh-serving's default: per-model metrics off, and a built-in runtime
    that does not limit model concurrency, so ModelMesh (kserve/modelmesh v0.9.0 to v0.12.0, `ModelMesh.java`:
    `QUEUE_DELAY` only in `MaxConcCacheEntry.beforeInvoke`) never times its queue. Its new JVM's first answer
    then holds its unlabelled histograms at 0 as the old one's were (no counter went down), no invoke series,
    and no instance record yet (its gauges at 0, `Metrics.logInstanceStats` not yet called)."""
    pod = await pod_factory(per_model=per_model, queue_timed=queue_timed)
    for _ in range(6):
        before = await pod.step()
    assert before[names.REQUESTS_PER_SECOND] == 40.0
    await pod.port.down()
    for _ in range(4):
        assert pod_series(await pod.step(0.0)) == pod_series(before)  # refused: the last good values stay
    pod.container.restart()
    await pod.port.up()

    with caplog.at_level(logging.INFO, logger="exporter"):
        first = await pod.step(0.0)
        assert names.REQUESTS_PER_SECOND not in first  # not the old container's counts over the window
        pod.container.publish(models=0, lru_time_s=None)
        assert (await pod.step(0.0))[names.REQUESTS_PER_SECOND] == 0.0  # up, nothing served yet: true zero
        rates = [(await pod.step(40.0)).get(names.REQUESTS_PER_SECOND) for _ in range(7)]

    assert None not in rates  # no second "reset" when the first requests of the new container show up
    assert rates[-1] == 40.0
    assert (await pod.published())[names.REQUESTS_TOTAL] == before[names.REQUESTS_TOTAL] + 7 * 200.0
    assert len(restart_lines(caplog)) == 1, restart_lines(caplog)


@pytest.mark.parametrize("queue_timed", [False, True], ids=["queue-untimed", "queue-timed"])
async def test_a_new_modelmesh_that_published_its_record_before_serving_is_no_garbled_read(
    pod_factory: PodFactory, caplog: pytest.LogCaptureFixture, queue_timed: bool,
) -> None:
    """A new JVM may publish its instance record (its models loaded) before the exporter reads it and before it
    serves: none of the old request series is left, as in a body that lost them, but nothing proves the same
    container (its unlabelled histograms at 0, below or as the old one's). That read is not refused; the new
    container's requests are counted in full once they come."""
    pod = await pod_factory(queue_timed=queue_timed)
    for _ in range(6):
        before = await pod.step()
    await pod.port.down()
    await pod.step(0.0)
    pod.container.restart()
    pod.container.publish(models=8, lru_time_s=pod.clock.now - 1.0)
    await pod.port.up()
    with caplog.at_level(logging.INFO, logger="exporter"):
        first = await pod.step(0.0)
        served = [await pod.step(40.0) for _ in range(7)]
    assert first[names.MODELS_LOADED] == 8.0
    assert not [r for r in caplog.records if "collector failed (parse)" in r.getMessage()]
    assert served[-1][names.REQUESTS_TOTAL] == before[names.REQUESTS_TOTAL] + 7 * 200.0
    assert served[-1][names.REQUESTS_PER_SECOND] == 40.0
    assert len(restart_lines(caplog)) == 1, restart_lines(caplog)


QUEUE_UNTIMED_LOG = "timed none in its request queue"


@pytest.mark.parametrize("per_model", [False, True], ids=["per-model-off", "per-model-on"])
@pytest.mark.parametrize("queue_timed", [False, True], ids=["queue-untimed", "queue-timed"])
async def test_a_modelmesh_that_does_not_time_its_queue_is_named_in_the_log(
    pod_factory: PodFactory, caplog: pytest.LogCaptureFixture, per_model: bool, queue_timed: bool,
) -> None:
    """ModelMesh times a request's queueing only where the model server limits each model's concurrency
    (kserve/modelmesh v0.9.0 to v0.12.0, `ModelMesh.java`: `Metric.QUEUE_DELAY` is recorded in
    `MaxConcCacheEntry.beforeInvoke` alone, made only when `limitModelConcurrency`), and modelmesh-serving's
    built-in runtimes do not by default (kserve/modelmesh-runtime-adapter: `LIMIT_PER_MODEL_CONCURRENCY`
    defaults to 0, `runtimeStatus.LimitModelConcurrency = ... > 0`). Its queue histogram then stays at
    `_count 0.0` (per-model metrics on: has no series) however busy the pod, and the exporter's queue delay
    reads 0: not a measurement. The operator is told once, with the setting that turns it on; a ModelMesh that
    times its queue is not named."""
    pod = await pod_factory(per_model=per_model, queue_timed=queue_timed)
    with caplog.at_level(logging.INFO, logger="exporter"):
        served = [await pod.step(40.0) for _ in range(4)]
    assert served[-1][names.REQUESTS_PER_SECOND] == 40.0
    assert served[-1][names.QUEUE_DELAY_SECONDS] == (0.001 if queue_timed else 0.0)
    told = [r for r in caplog.records if QUEUE_UNTIMED_LOG in r.getMessage()]
    if queue_timed:
        assert told == []
    else:
        [line] = told
        assert line.levelno == logging.WARNING
        assert "perModelConcurrencyLimit" in line.getMessage()
        assert names.QUEUE_DELAY_SECONDS in line.getMessage()


def instance_gauges_only(text: str) -> str:
    """What a proxy or filter that lost the histograms passes on: ModelMesh's instance gauges alone."""
    return "".join(line for line in text.splitlines(keepends=True) if "modelmesh_instance" in line)


def queue_count_twice(text: str) -> str:
    """Every queue-delay count written twice, the second from another body (two answers run together)."""
    lines = []
    for line in text.splitlines(keepends=True):
        lines.append(line)
        if line.startswith(f"{names.MM_QUEUE_DELAY_MS}_count"):
            lines.append(line.rsplit(" ", 1)[0] + " 99999.0\n")
    return "".join(lines)


def request_histogram_renamed(text: str) -> str:
    """The request histogram under another name (a ModelMesh that renamed it, a relabelling proxy): every request
    series gone, while the instance gauges and the queue histogram, which goes on counting, stay."""
    return text.replace(names.MM_INVOKE_MODEL_MS, "modelmesh_invoke_model_ms")


@pytest.mark.parametrize(("garble", "per_model"), [
    pytest.param(instance_gauges_only, False, id="histograms-lost"),
    pytest.param(queue_count_twice, False, id="series-repeated"),
    pytest.param(queue_count_twice, True, id="series-repeated-per-model"),
    pytest.param(request_histogram_renamed, False, id="request-series-lost"),
    pytest.param(request_histogram_renamed, True, id="request-series-lost-per-model"),
])
async def test_a_garbled_body_is_refused_not_taken_for_a_restart(
    pod_factory: PodFactory, caplog: pytest.LogCaptureFixture, garble: Callable[[str], str], per_model: bool,
) -> None:
    """A body that lost the histograms ModelMesh serves from its start, or that repeats a series, cannot come
    from a running or a restarted ModelMesh. Taken as good, it read as a restart (no series left, or a count
    that went down at the next good read), and the next good read counted ModelMesh's whole history again:
    `requests_total` jumped by everything the pod ever served, and the load with it. It must be refused as
    any garbled read is: the last good values stay, and the next good read counts only what was served.

    So must a body without any of the request series the last one had while the queue histogram's counts go on
    (the same container: ModelMesh never drops a series while it runs). It was served as 0 requests/s, a fresh
    and good read with nothing in the log: a busy pod read as idle, which can scale it down."""
    pod = await pod_factory(per_model=per_model)
    if per_model:
        pod.container.serve(1.0, model="model-1", latency_ms=20.0)  # a queue series per model: two of them
    for _ in range(6):
        before = await pod.step()
    pod.port.garble = garble
    with caplog.at_level(logging.INFO, logger="exporter"):
        assert pod_series(await pod.step()) == pod_series(before)  # refused: the last good values stay
        pod.port.garble = None
        after = [await pod.step() for _ in range(2)]
    assert after[-1][names.REQUESTS_TOTAL] == before[names.REQUESTS_TOTAL] + 3 * 200.0
    assert after[-1][names.REQUESTS_PER_SECOND] == 40.0
    assert restart_lines(caplog) == []
    failed = [r.getMessage() for r in caplog.records if "modelmesh collector failed (parse)" in r.getMessage()]
    assert len(failed) == 1, failed


async def test_a_body_without_counter_series_is_no_restart_with_per_model_metrics_on(
    pod_factory: PodFactory, caplog: pytest.LogCaptureFixture,
) -> None:
    """With per-model metrics on every counter series is labelled, so a body cut or filtered down to the instance
    gauges holds none of them and nothing that proves it garbled. It was read as a new container ("none of its 3
    counter series is left"): the old counts were forgotten, and the next good read counted ModelMesh's whole
    history again as new load, `requests_total` and the request rate jumping by everything the pod ever served.
    A series missing from one body is no news: the next good read counts only what was served since."""
    pod = await pod_factory(per_model=True)
    pod.container.serve(100_000.0)  # what ModelMesh served before this exporter started
    for _ in range(6):
        before = await pod.step()
    pod.port.garble = instance_gauges_only
    with caplog.at_level(logging.INFO, logger="exporter"):
        await pod.step()
        pod.port.garble = None
        after = [await pod.step() for _ in range(2)]
    assert after[-1][names.REQUESTS_TOTAL] == before[names.REQUESTS_TOTAL] + 3 * 200.0
    assert after[-1][names.REQUESTS_PER_SECOND] == 40.0
    assert restart_lines(caplog) == []


async def test_a_body_without_request_series_after_one_cut_to_the_instance_gauges_is_refused(
    pod_factory: PodFactory, caplog: pytest.LogCaptureFixture,
) -> None:
    """A body cut down to the instance gauges (per-model metrics on) is no news, and no reading of which series are
    left either: the body after it is checked against the one before. Where that one lost every request series
    while the queue histogram goes on (a relabelling proxy, a renamed histogram), it is refused as it would be
    without the cut between. Checked against the cut body's series (none), it was taken: a fresh good read of 0
    requests since, the request rate falling with nothing in the log, a busy pod read as idling."""
    pod = await pod_factory(per_model=True)
    for _ in range(6):
        before = await pod.step()
    pod.port.garble = instance_gauges_only
    with caplog.at_level(logging.INFO, logger="exporter"):
        cut = await pod.step()
        pod.port.garble = request_histogram_renamed
        assert pod_series(await pod.step()) == pod_series(cut)  # refused: the values after the cut stay
        pod.port.garble = None
        after = [await pod.step() for _ in range(2)]
    assert after[-1][names.REQUESTS_TOTAL] == before[names.REQUESTS_TOTAL] + 4 * 200.0
    assert after[-1][names.REQUESTS_PER_SECOND] == 40.0
    assert restart_lines(caplog) == []
    failed = [r.getMessage() for r in caplog.records if "modelmesh collector failed (parse)" in r.getMessage()]
    assert len(failed) == 1, failed
    assert "lacks every" in failed[0]


@pytest.mark.parametrize("per_model", [False, True], ids=["per-model-off", "per-model-on"])
async def test_every_request_of_a_crash_looping_modelmesh_is_counted(
    pod_factory: PodFactory, caplog: pytest.LogCaptureFixture, per_model: bool,
) -> None:
    """A crash-looping `mm` container: each new JVM is read before it publishes its instance record (no request
    series, capacity 0: a restart), then serves 5 requests and is read with them. Each JVM's requests are its own
    and count in full. Kept as baselines instead, the old container's counts hid the new one's series until they
    rose above them: of 8 JVMs serving 5 each, `requests_total` rose by 5 and the rate read 0."""
    pod = await pod_factory(per_model=per_model, queue_timed=False)
    pod.container.serve(1_000.0)  # a long-lived first container: far above what each new JVM serves
    for _ in range(6):
        before = await pod.step(0.0)
    with caplog.at_level(logging.INFO, logger="exporter"):
        for _ in range(8):
            pod.container.restart()
            await pod.step(0.0)
            pod.container.publish(models=1, lru_time_s=pod.clock.now)
            pod.container.serve(5.0)
            rate = (await pod.step(0.0)).get(names.REQUESTS_PER_SECOND)
            after = await pod.step(0.0)
            assert rate == 1.0  # the 5 requests over the 5 s since the new JVM's first read
    assert after[names.REQUESTS_TOTAL] == before[names.REQUESTS_TOTAL] + 8 * 5.0
    assert len(restart_lines(caplog)) == 8, restart_lines(caplog)


async def test_a_series_back_above_its_old_count_after_a_restart_counts_in_full(
    pod_factory: PodFactory, caplog: pytest.LogCaptureFixture,
) -> None:
    """A restart told by a series that went down (the OK requests, 1000 in the old container, 50 in the new): the
    new container's series that came back above their old count (4 UNAVAILABLE before, 20 now) are its own too,
    counted in full. Counted beyond the old count instead, the old container's 4 were taken from the new one's."""
    pod = await pod_factory()
    pod.container.serve(1_000.0)
    pod.container.serve(4.0, code="UNAVAILABLE")
    for _ in range(6):
        before = await pod.step(0.0)
    pod.container.restart()
    pod.container.serve(50.0)
    pod.container.serve(20.0, code="UNAVAILABLE")
    with caplog.at_level(logging.INFO, logger="exporter"):
        after = await pod.step(0.0)
    assert after[names.REQUESTS_TOTAL] == before[names.REQUESTS_TOTAL] + 70.0
    assert len(restart_lines(caplog)) == 1, restart_lines(caplog)


REQUESTS_UNSEEN_LOG = "but none of its request series"


@pytest.mark.parametrize("per_model", [False, True], ids=["per-model-off", "per-model-on"])
@pytest.mark.parametrize("renamed", [False, True], ids=["as-modelmesh-names-it", "request-histogram-renamed"])
async def test_a_modelmesh_whose_request_series_stay_absent_while_it_queues_requests_is_named_in_the_log(
    pod_factory: PodFactory, caplog: pytest.LogCaptureFixture, per_model: bool, renamed: bool,
) -> None:
    """An exporter started against a ModelMesh whose request histogram has another name (or a port that serves
    ModelMesh's other families) reads 0 requests/s for good: there was never a request series to lose. Where the
    queue histogram counts requests, which ModelMesh times before it runs each one, the operator is told once,
    as for a queue that is never timed. A request queued and not yet run at one read (its request series comes
    when it ends) is no reason: requests must stay absent across reads."""
    pod = await pod_factory(per_model=per_model)
    if renamed:
        pod.port.garble = request_histogram_renamed
    pod.container.queued(1)
    with caplog.at_level(logging.INFO, logger="exporter"):
        await pod.step(0.0)  # one request queued, still running: no request series yet
        served = [await pod.step(40.0) for _ in range(3)]
    assert served[-1][names.REQUESTS_PER_SECOND] == (0.0 if renamed else 40.0)
    told = [r for r in caplog.records if REQUESTS_UNSEEN_LOG in r.getMessage()]
    if not renamed:
        assert told == []
    else:
        [line] = told
        assert line.levelno == logging.WARNING
        assert names.MM_INVOKE_MODEL_MS in line.getMessage() and "--modelmesh-url" in line.getMessage()
        assert names.REQUESTS_PER_SECOND in line.getMessage()


async def test_a_garbled_first_read_does_not_count_modelmesh_history_later(pod_factory: PodFactory) -> None:
    """The exporter's first read met a body without the histograms (a proxy still starting): nothing to keep,
    so it is the baseline. The histograms ModelMesh serves from its start then appeared as new series and
    counted in full: every request the pod had served before the exporter started, as served in one read."""
    pod = await pod_factory()
    pod.container.serve(100_000.0)  # what ModelMesh served before this exporter started
    pod.port.garble = instance_gauges_only
    await pod.step()
    pod.port.garble = None
    served = [await pod.step() for _ in range(3)]
    assert served[-1][names.REQUESTS_TOTAL] <= 4 * 200.0  # what was served since the exporter's first read
    assert served[-1][names.REQUESTS_PER_SECOND] == 40.0


async def test_no_cache_capacity_while_modelmesh_has_published_no_instance_record(
    pod_factory: PodFactory,
) -> None:
    """ModelMesh's instance gauges read 0 from its start until it first publishes its instance record (when its
    first model loads, or from its janitor within 6 minutes), and again in the last record of a stopping
    ModelMesh. No model and no LRU is true then; a cache of 0 bytes is not: no capacity series, as no ratio."""
    pod = await pod_factory()
    pod.container.restart()  # a new JVM: serving its port, no instance record published yet
    for _ in range(2):
        served = await pod.step()
    assert names.REQUESTS_PER_SECOND in served
    assert served[names.MODELS_LOADED] == 0.0
    assert [name for name in CACHE_FAMILIES if name in served] == [names.MODELS_LOADED]

    pod.container.publish(models=3, lru_time_s=pod.clock.now - 30.0)
    served = await pod.step()
    assert (served[names.MODELS_LOADED], served[names.CACHE_USED_RATIO]) == (3.0, 0.5)
    assert served[names.CACHE_CAPACITY_BYTES] == 16 * 2**30

    pod.container.shut_down()
    served = await pod.step()
    assert [name for name in CACHE_FAMILIES if name in served] == [names.MODELS_LOADED]


async def test_lru_age_keeps_growing_between_modelmesh_publishes(pod_factory: PodFactory) -> None:
    """ModelMesh sets `modelmesh_instance_lru_age_seconds` only when it publishes its instance record: on a
    change worth publishing, or from its janitor every 6 minutes. A pod whose LRU model stays unused keeps
    the same age for minutes; the age is its last-use time (`modelmesh_instance_lru_seconds`) from now."""
    pod = await pod_factory()
    assert (await pod.step())[names.LRU_AGE_SECONDS] == 105.0  # published 100 s old, read 5 s later
    for _ in range(60):  # 5 minutes, no publish
        served = await pod.step()
    assert served[names.LRU_AGE_SECONDS] == 405.0

    pod.container.publish(models=8, lru_time_s=pod.clock.now + 20.0)  # only copies stamped 20 s ahead
    assert names.LRU_AGE_SECONDS not in await pod.step()  # just used: no age, as for ModelMesh's own 0
    pod.container.publish(models=0, lru_time_s=None)
    assert names.LRU_AGE_SECONDS not in await pod.step()


async def test_per_model_metrics_of_many_models_are_read_without_their_buckets(
    pod_factory: PodFactory,
) -> None:
    """With per-model metrics on, ModelMesh keeps a series per model in every histogram, buckets included, for
    every model used on the pod in its life: 1,400 models are about 35 MiB of text (42 MiB here), over the
    32 MiB the exporter reads, so every read failed and the pod stayed stale for good. ModelMesh's metrics
    server answers `name[]` filters with only the samples named."""
    pod = await pod_factory(per_model=True)
    pod.container.add_models(1400)
    await pod.step()
    served = await pod.step()
    assert served[names.REQUESTS_PER_SECOND] == 40.0
    assert served[names.MODELS_LOADED] == 8.0


async def test_what_is_served_does_not_depend_on_who_scraped_when(pod_factory: PodFactory) -> None:
    """Prometheus and the adapter scrape the same exporter at their own intervals. Rates are computed when
    ModelMesh is read, never when the exporter is scraped: two pods given the same ModelMesh traffic serve
    the same values after every read whether their /metrics was scraped six times in between or not at all."""
    scraped, quiet = await pod_factory(), await pod_factory()
    for rate in (40.0, 40.0, 120.0, 0.0, 0.0, 75.0, 75.0, 75.0):
        for _ in range(6):
            await scraped.published()  # Prometheus at 1 s, between two ModelMesh reads
        assert pod_series(await scraped.step(rate)) == pod_series(await quiet.step(rate))


def prometheus_increase(values: list[float]) -> float:
    """What Prometheus's `increase()` adds up over consecutive samples of a counter: a value below the one
    before is a counter that started again from 0 (its whole value is new)."""
    return sum(b - a if b >= a else b for a, b in itertools.pairwise(values))


async def test_an_exporter_restart_is_no_spike_in_the_requests_counter(
    pod_factory: PodFactory,
) -> None:
    """The exporter absorbs a ModelMesh restart into `modelmesh_pod_requests_total`; later the exporter
    itself restarts while ModelMesh runs on. Prometheus must not see the requests ModelMesh counted since its
    restart as served within one scrape interval."""
    pod = await pod_factory()
    for _ in range(6):
        await pod.step()
    pod.container.restart()
    pod.container.publish(models=8, lru_time_s=pod.clock.now - 1.0)
    scraped = [(await pod.step())[names.REQUESTS_TOTAL] for _ in range(60)]  # 5 minutes at 40/s

    await pod.start_exporter()  # the sidecar restarts (OOM, a new image); ModelMesh keeps serving
    scraped += [(await pod.step())[names.REQUESTS_TOTAL] for _ in range(2)]

    served_meanwhile = 2 * 200.0  # what ModelMesh served from the old exporter's last read to the new one's 2nd
    assert prometheus_increase(scraped[-3:]) <= served_meanwhile


@pytest.fixture(scope="module")
def tls_context(tmp_path_factory: pytest.TempPathFactory) -> ssl.SSLContext:
    files = generate_self_signed(Path(tmp_path_factory.mktemp("mm-tls")), "mm", ["127.0.0.1"])
    return server_context(files.cert_file, files.key_file)


@pytest.mark.parametrize(("modelmesh_tls", "url_scheme", "advice"), [
    pytest.param(False, "https", "use an http:// URL in --modelmesh-url (EXPORTER_MODELMESH_URL)",
                 id="modelmesh-serves-http"),
    pytest.param(True, "http", "use an https:// URL in --modelmesh-url (EXPORTER_MODELMESH_URL) with "
                 "--modelmesh-insecure (EXPORTER_MODELMESH_INSECURE=true)", id="modelmesh-serves-https"),
])
async def test_a_url_scheme_modelmesh_does_not_serve_is_named_in_the_log(
    tls_context: ssl.SSLContext, caplog: pytest.LogCaptureFixture, modelmesh_tls: bool, url_scheme: str,
    advice: str,
) -> None:
    """modelmesh-serving's `metrics.scheme` (ModelMesh's `MM_METRICS=prometheus:...;scheme=...`) chooses http
    or https on port 2112. An exporter URL with the other scheme fails every read, and its one log line is all
    an operator has: it must name the setting and the URL to use. It said to add --modelmesh-insecure to an
    https URL read against plain http (already insecure), and only "server closed the connection" the other
    way round."""
    clock = Clock()
    container = ModelMeshContainer(clock)
    port = MetricsPort(container, tls_context if modelmesh_tls else None)
    await port.up()
    try:
        url = f"{url_scheme}://127.0.0.1:{port.port}/metrics"
        collector = ModelMeshCollector(CollectorHealth(clock=clock), url, ssl_context=False, clock=clock)
        line = await failed_read_line(collector, caplog)
    finally:
        await port.down()
    assert advice in line and "metrics.scheme" in line, line


async def test_an_https_url_to_a_plain_port_that_hangs_up_is_named_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A plain-http server may drop a TLS handshake unanswered instead of answering it with an HTTP error (which
    the TLS library reads as "wrong version number"): the log said only "Cannot connect to host ... [None]",
    reason connect, which reads as nothing listening."""

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(64)  # the client's hello
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    clock = Clock()
    try:
        collector = ModelMeshCollector(CollectorHealth(clock=clock), f"https://127.0.0.1:{port}/metrics",
                                       ssl_context=False, clock=clock)
        line = await failed_read_line(collector, caplog)
    finally:
        server.close()
        await server.wait_closed()
    assert "(tls)" in line and "use an http:// URL in --modelmesh-url" in line and "metrics.scheme" in line, line


@pytest.mark.parametrize(("scheme", "family", "host"), [("http", socket.AF_INET, "127.0.0.1"),
                                                        ("https", socket.AF_INET, "127.0.0.1"),
                                                        ("http", socket.AF_INET6, "[::1]")])
async def test_a_refused_connection_is_logged_as_its_host_port_and_the_os_error(
    scheme: str, family: socket.AddressFamily, host: str, caplog: pytest.LogCaptureFixture,
) -> None:
    """Nothing listening on the port (ModelMesh not started yet, a wrong port): the log said aiohttp's "Cannot
    connect to host 127.0.0.1:21999 ssl:default [Connect call failed ...]", whose `ssl:default` on an http:// URL
    read as a TLS problem. A socket bound and not listening refuses, and holds the port for the test. An IPv6
    address keeps its brackets, as in the URL: "::1:21012" read as a port of ::1 or of an address :1:21012."""
    with socket.socket(family) as bound:
        bound.bind((host.strip("[]"), 0))
        port = bound.getsockname()[1]
        clock = Clock()
        collector = ModelMeshCollector(CollectorHealth(clock=clock), f"{scheme}://{host}:{port}/metrics",
                                       ssl_context=False, clock=clock)
        line = await failed_read_line(collector, caplog)
    assert f"cannot connect to {host}:{port}: Connection refused" in line and "(connect)" in line, line
    assert "ssl" not in line.lower().replace(f"{scheme}://", ""), line


async def test_a_certificate_the_ca_file_does_not_verify_names_the_ca_file(
    tmp_path: Path, tls_context: ssl.SSLContext, caplog: pytest.LogCaptureFixture,
) -> None:
    """With --modelmesh-ca-file (a proxy of the user's in front of ModelMesh) the advice was "run the exporter
    with --modelmesh-insecure", which the settings refuse beside a CA file: the CA file, or the certificate, is
    what to change."""
    other_ca = generate_self_signed(tmp_path, "someone-else", ["127.0.0.1"]).cert_file
    clock = Clock()
    port = MetricsPort(ModelMeshContainer(clock), tls_context)
    await port.up()
    try:
        collector = ModelMeshCollector(CollectorHealth(clock=clock), port.url, clock=clock,
                                       ssl_context=ssl.create_default_context(cafile=str(other_ca)),
                                       ca_file=other_ca)
        line = await failed_read_line(collector, caplog)
    finally:
        await port.down()
    assert f"not signed by a CA in {other_ca}" in line and "--modelmesh-ca-file" in line, line
    assert "run the exporter with --modelmesh-insecure" not in line, line


async def test_a_redirect_loop_in_front_of_modelmesh_is_named_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    """A proxy in front of ModelMesh that redirects without end (here to `/login`, which redirects back) failed
    every read as reason `parse`, said as `0, message=''`: no body was read, and nothing named the redirects. It
    is an HTTP-level failure, reason `http`, and the line says where the redirects went."""

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound("/login" if request.path == "/metrics" else "/metrics")

    app = web.Application()
    app.router.add_get("/metrics", redirect)
    app.router.add_get("/login", redirect)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    clock = Clock()
    try:
        url = f"http://127.0.0.1:{runner.addresses[0][1]}/metrics"
        collector = ModelMeshCollector(CollectorHealth(clock=clock), url, ssl_context=False, clock=clock)
        line = await failed_read_line(collector, caplog)
    finally:
        await runner.cleanup()
    assert "(http)" in line and "too many redirects" in line, line
    assert "/login" in line, line
