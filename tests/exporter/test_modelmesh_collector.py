"""The ModelMesh collector against the ModelMesh stand-in served over https, with a stepped clock.

The fake and the collector share one fake monotonic clock, so the fake's counters grow by exactly
rate times step between scrapes and every rate below is exact. Faults are the fake's own (`set_fault`), a
server that is gone, and a certificate that does not verify; each must keep the last good values, report
success 0 with the timestamp where it was, count the reason, and heal on the next good scrape.
"""

from __future__ import annotations

import asyncio
import logging
import math
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field

import aiohttp
import pytest
from aiohttp import web
from hypothesis import example, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest

from autoscaler.api.certs import CertificateFiles, generate_self_signed, server_context
from autoscaler.demo.fake_modelmesh import serve
from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from exporter import names
from exporter.collectors.health import CollectorHealth
from exporter.collectors.modelmesh import ModelMeshCollector
from exporter.counters import CounterWindow
from exporter.modelmesh_text import QUEUE_COUNT, QUEUE_SUM_MS, REQUESTS, ScrapeFailure, parse_modelmesh
from tests.exporter.conftest import failed_read_line
from tests.support.clock import SteppedClock

INTERVAL_S = 5.0
WINDOW_S = 30.0
EPOCH = 1_800_000_000.0
TIMEOUT_S = 120.0
"""The collector's timeout here, far beyond any answer but the slow fault's: each broken answer must be told by what
it is, never by the clock. With the exporter's 2 s default, on a loaded CI machine (the fake and the collector share
one event loop, and TLS costs both) the body that never ends was cut by the timeout before the 32 MiB cap, and a
TLS handshake could outlast it too: `timeout` was counted where `parse` or `tls` was right."""
MODELMESH_FAMILIES = (
    names.REQUESTS_TOTAL, names.REQUESTS_PER_SECOND, names.QUEUE_DELAY_SECONDS, names.CACHE_MISSES_PER_SECOND,
    names.LRU_AGE_SECONDS, names.CACHE_USED_RATIO, names.CACHE_CAPACITY_BYTES, names.MODELS_LOADED,
)


@dataclass(frozen=True)
class Certificates:
    modelmesh: CertificateFiles
    stranger: CertificateFiles
    """Another self-signed certificate: one the exporter was not told to trust."""


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    root = tmp_path_factory.mktemp("certs")
    hosts = ["127.0.0.1", "localhost"]
    return Certificates(
        generate_self_signed(root / "modelmesh", "fake-modelmesh", hosts),
        generate_self_signed(root / "stranger", "someone-else", hosts),
    )


@dataclass
class Rig:
    """A fake ModelMesh on https, a collector that trusts its CA, and the registry both publish to."""

    clock: SteppedClock
    fake: FakeModelMesh
    certificates: Certificates
    session: aiohttp.ClientSession
    timeout_s: float = TIMEOUT_S
    port: int = 0
    runner: web.AppRunner | None = None
    health: CollectorHealth = field(init=False)
    collector: ModelMeshCollector = field(init=False)
    registry: CollectorRegistry = field(init=False)
    snapshot: dict[str, float | None] = field(default_factory=dict)
    """What was served after the last good scrape of `prime`."""
    snapshot_last_success: float | None = None

    async def start(self) -> None:
        """Serve the fake on a free port, then build the collector that reads it."""
        await self.start_server()
        clock = self.clock
        self.health = CollectorHealth(clock=lambda: EPOCH + clock.now)
        context = ssl.create_default_context(cafile=str(self.certificates.modelmesh.cert_file))
        self.collector = ModelMeshCollector(
            self.health, f"https://127.0.0.1:{self.port}/metrics", ssl_context=context,
            timeout_s=self.timeout_s, load_window_s=WINDOW_S, clock=clock, wall_clock=lambda: EPOCH + clock.now,
        )
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)
        self.registry.register(self.health)

    async def start_server(self, cert: CertificateFiles | None = None) -> None:
        """(Re)start the fake's server on the same port, with the given certificate (default: trusted)."""
        files = cert or self.certificates.modelmesh
        self.runner = await serve(
            self.fake, "127.0.0.1", self.port, ssl_context=server_context(files.cert_file, files.key_file)
        )
        self.port = self.runner.addresses[0][1]

    async def stop_server(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None

    async def step(self, seconds: float = INTERVAL_S) -> bool:
        """Let `seconds` pass, then scrape once."""
        self.clock.advance(seconds)
        return await self.collector.scrape_once(self.session)

    def value(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, labels)

    def modelmesh_values(self) -> dict[str, float | None]:
        return {name: self.value(name) for name in MODELMESH_FAMILIES}

    def success(self) -> float | None:
        return self.value(names.COLLECTOR_SUCCESS, collector=names.COLLECTOR_MODELMESH)

    def last_success(self) -> float | None:
        return self.value(names.LAST_SUCCESS_TIMESTAMP, collector=names.COLLECTOR_MODELMESH)

    def errors(self, reason: str) -> float:
        return self.value(names.SCRAPE_ERRORS_TOTAL, collector=names.COLLECTOR_MODELMESH, reason=reason) or 0.0


RigFactory = Callable[..., Awaitable[Rig]]


@pytest.fixture
async def rig_factory(certificates: Certificates) -> AsyncIterator[RigFactory]:
    """Builds rigs (a fake at 40 requests/s by default); stops their servers afterwards."""
    rigs: list[Rig] = []
    async with aiohttp.ClientSession() as session:

        async def build(*, timeout_s: float = TIMEOUT_S, load: ModelMeshLoad | None = None) -> Rig:
            clock = SteppedClock(100.0)
            fake = FakeModelMesh(load or ModelMeshLoad(requests_per_second=40.0), clock=clock,
                                 wall=lambda: EPOCH + clock.now)
            rig = Rig(clock, fake, certificates, session, timeout_s=timeout_s)
            rigs.append(rig)
            await rig.start()
            return rig

        yield build
        for rig in rigs:
            await rig.stop_server()


@pytest.fixture
async def rig(rig_factory: RigFactory) -> Rig:
    return await rig_factory()


# ---- the §3 metrics ----


async def test_first_scrape_publishes_totals_and_gauges_but_no_rate_yet(rig: Rig) -> None:
    assert rig.modelmesh_values() == dict.fromkeys(MODELMESH_FAMILIES)  # nothing before the first scrape
    assert rig.success() == 0.0

    assert await rig.step()

    assert rig.value(names.REQUESTS_TOTAL) == 0.0  # the baseline: ModelMesh's count before we read is not ours
    assert rig.value(names.REQUESTS_PER_SECOND) is None  # a rate needs two readings
    assert rig.value(names.MODELS_LOADED) == 8.0
    assert rig.success() == 1.0
    assert rig.last_success() == EPOCH + rig.clock.now


async def test_rates_follow_the_modelmesh_load(rig: Rig) -> None:
    rig.fake.update(requests_per_second=40.0, queue_delay_ms=30.0, cache_misses_per_second=2.0)
    for _ in range(4):
        await rig.step()

    assert rig.value(names.REQUESTS_PER_SECOND) == pytest.approx(40.0)
    assert rig.value(names.QUEUE_DELAY_SECONDS) == pytest.approx(0.030)
    assert rig.value(names.CACHE_MISSES_PER_SECOND) == pytest.approx(2.0)


async def test_rates_cover_only_the_load_window(rig: Rig) -> None:
    for _ in range(12):  # 60 s at 40/s
        await rig.step()
    rig.fake.update(requests_per_second=100.0, queue_delay_ms=50.0)
    for _ in range(3):
        await rig.step()
    assert 40.0 < (rig.value(names.REQUESTS_PER_SECOND) or 0.0) < 100.0  # 15 s of each in the window

    for _ in range(3):
        await rig.step()
    assert rig.value(names.REQUESTS_PER_SECOND) == pytest.approx(100.0)  # the old load has left the window
    assert rig.value(names.QUEUE_DELAY_SECONDS) == pytest.approx(0.050)


async def test_no_requests_in_the_window_reads_zero_load_and_zero_queue_delay(rig: Rig) -> None:
    rig.fake.update(requests_per_second=0.0, queue_delay_ms=80.0)
    for _ in range(3):
        await rig.step()
    assert rig.value(names.REQUESTS_PER_SECOND) == 0.0
    assert rig.value(names.QUEUE_DELAY_SECONDS) == 0.0


async def test_requests_total_keeps_counting_across_a_modelmesh_restart(rig: Rig) -> None:
    for _ in range(3):
        await rig.step()
    before = rig.value(names.REQUESTS_TOTAL)
    assert before == 400.0  # 10 s at 40/s since the first reading

    rig.clock.advance(2.0)
    rig.fake.reset_counters()  # the mm container restarts: its counters start again from 0
    await rig.step(3.0)

    assert rig.value(names.REQUESTS_TOTAL) == 400.0 + 120.0  # 3 s at 40/s since the restart
    # The window starts again at the restart: no rate until a second reading (never negative, never a
    # rate mixing two containers' counts), so the adapter holds instead of reading an odd load.
    assert rig.value(names.REQUESTS_PER_SECOND) is None
    assert rig.value(names.QUEUE_DELAY_SECONDS) is None
    assert rig.collector.window.resets == 1
    await rig.step()
    assert rig.value(names.REQUESTS_PER_SECOND) == pytest.approx(40.0)

    for _ in range(6):
        await rig.step()
    assert rig.value(names.REQUESTS_PER_SECOND) == pytest.approx(40.0)
    assert rig.collector.window.resets == 1


async def test_lru_age_is_absent_when_no_model_is_loaded(rig: Rig) -> None:
    await rig.step()
    assert rig.value(names.LRU_AGE_SECONDS) == 900.0

    rig.fake.update(models_loaded=0)  # ModelMesh then reports an LRU age of 0
    await rig.step()

    assert rig.value(names.LRU_AGE_SECONDS) is None
    assert rig.value(names.MODELS_LOADED) == 0.0
    assert rig.value(names.CACHE_USED_RATIO) == 0.0


async def test_cache_ratio_capacity_and_models_loaded_are_modelmesh_s(rig: Rig) -> None:
    rig.fake.update(capacity_bytes=8 * 2**30, cache_used_ratio=0.75, models_loaded=12, lru_age_s=321.0)
    await rig.step()

    assert rig.value(names.CACHE_USED_RATIO) == pytest.approx(0.75)
    assert rig.value(names.CACHE_CAPACITY_BYTES) == 8 * 2**30
    assert rig.value(names.MODELS_LOADED) == 12.0
    assert rig.value(names.LRU_AGE_SECONDS) == 321.0


async def test_the_lru_age_is_told_from_the_last_use_time_modelmesh_publishes(rig: Rig) -> None:
    """The fake publishes the LRU model's last-use time as ModelMesh does, in whole seconds since the epoch, and
    the exporter tells the age from it (at a whole second, a use 60.5 s ago was published as 61 s ago), not
    from ModelMesh's age gauge (60.5 here), which stands still between ModelMesh's publishes."""
    rig.fake.update(lru_age_s=60.5)
    await rig.step()
    assert rig.value(names.LRU_AGE_SECONDS) == 61.0


# ---- faults keep the last good data ----


async def prime(rig: Rig) -> None:
    """Three good scrapes, then remember what is served."""
    for _ in range(3):
        assert await rig.step()
    rig.snapshot = rig.modelmesh_values()
    rig.snapshot_last_success = rig.last_success()
    assert rig.snapshot[names.REQUESTS_PER_SECOND] == pytest.approx(40.0)


async def assert_fault_keeps_last_good_values(rig: Rig, reason: str, fault_steps: int = 2) -> None:
    """After `rig` was broken: values as before, success 0, timestamp kept, `reason` counted."""
    for _ in range(fault_steps):
        assert not await rig.step()
    assert rig.success() == 0.0
    assert rig.errors(reason) == fault_steps
    assert rig.modelmesh_values() == rig.snapshot
    assert rig.last_success() == rig.snapshot_last_success


async def assert_recovers(rig: Rig) -> None:
    assert await rig.step()
    assert rig.success() == 1.0
    assert rig.last_success() == EPOCH + rig.clock.now
    total = rig.value(names.REQUESTS_TOTAL)
    assert total is not None and total > (rig.snapshot[names.REQUESTS_TOTAL] or 0.0)
    # The requests made during the outage were counted, not lost: the rate over the window is still 40/s.
    assert rig.value(names.REQUESTS_PER_SECOND) == pytest.approx(40.0)


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        pytest.param("garbage", names.REASON_PARSE, id="garbage-body"),
        pytest.param("truncated", names.REASON_PARSE, id="body-cut-mid-line"),
        pytest.param("cut", names.REASON_PARSE, id="connection-dropped-mid-body"),
        pytest.param("error", names.REASON_HTTP, id="http-500"),
        pytest.param("endless", names.REASON_PARSE, id="body-that-never-ends"),
    ],
)
async def test_broken_modelmesh_answer_keeps_the_last_good_values(rig: Rig, fault: str, reason: str) -> None:
    await prime(rig)
    rig.fake.set_fault(fault)
    await assert_fault_keeps_last_good_values(rig, reason)
    rig.fake.set_fault(None)
    await assert_recovers(rig)


async def test_a_web_page_instead_of_metrics_is_said_to_be_one(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    """A proxy's error page, or a URL that names the wrong port, answered 200 with HTML: the log said "ModelMesh
    output lacks modelmesh_instance_capacity_bytes, ..." as though ModelMesh's metrics were incomplete."""
    rig.fake.set_fault("garbage")
    with caplog.at_level(logging.WARNING, logger="exporter"):
        assert not await rig.collector.scrape_once(rig.session)
    [line] = [r.getMessage() for r in caplog.records if "modelmesh collector failed" in r.getMessage()]
    assert "text/html" in line and "not metrics" in line and "EXPORTER_MODELMESH_URL" in line, line


async def test_slow_modelmesh_times_out_and_keeps_the_last_good_values(rig_factory: RigFactory) -> None:
    rig = await rig_factory(timeout_s=0.2)
    await prime(rig)
    rig.fake.set_fault("slow", delay_s=600.0)
    await assert_fault_keeps_last_good_values(rig, names.REASON_TIMEOUT, fault_steps=1)
    duration = rig.value(names.COLLECTOR_DURATION_SECONDS, collector=names.COLLECTOR_MODELMESH)
    # At least the timeout, and not the answer's 600 s: the collector gave up (no bound on how fast it did).
    assert duration is not None and 0.2 <= duration < 600.0
    rig.fake.set_fault(None)
    await assert_recovers(rig)


async def test_unreachable_modelmesh_keeps_the_last_good_values(rig: Rig) -> None:
    await prime(rig)
    await rig.stop_server()  # the mm container is gone; its port refuses connections
    await assert_fault_keeps_last_good_values(rig, names.REASON_CONNECT)
    await rig.start_server()  # same port, same counters: the container is back
    await assert_recovers(rig)


async def test_certificate_that_does_not_verify_keeps_the_last_good_values(rig: Rig) -> None:
    await prime(rig)
    await rig.stop_server()
    await rig.start_server(cert=rig.certificates.stranger)  # a certificate our CA file did not sign
    await assert_fault_keeps_last_good_values(rig, names.REASON_TLS)
    await rig.stop_server()
    await rig.start_server()
    await assert_recovers(rig)


async def test_modelmeshs_own_certificate_is_said_with_the_setting_a_manifest_sets(
    certificates: Certificates, caplog: pytest.LogCaptureFixture,
) -> None:
    """The exporter verifying ModelMesh's self-signed certificate: the log said to run it with
    --modelmesh-insecure, which a sidecar's manifest spells EXPORTER_MODELMESH_INSECURE=true."""
    fake = FakeModelMesh(clock=SteppedClock(100.0))
    files = certificates.modelmesh
    runner = await serve(fake, "127.0.0.1", 0, ssl_context=server_context(files.cert_file, files.key_file))
    try:
        collector = ModelMeshCollector(CollectorHealth(), f"https://127.0.0.1:{runner.addresses[0][1]}/metrics",
                                       timeout_s=TIMEOUT_S)
        line = await failed_read_line(collector, caplog)
    finally:
        await runner.cleanup()
    assert "--modelmesh-insecure" in line and "EXPORTER_MODELMESH_INSECURE=true" in line, line


async def test_wrong_ca_file_is_a_tls_error_from_the_first_scrape(certificates: Certificates) -> None:
    clock = SteppedClock(100.0)
    fake = FakeModelMesh(clock=clock)
    files = certificates.modelmesh
    runner = await serve(fake, "127.0.0.1", 0, ssl_context=server_context(files.cert_file, files.key_file))
    try:
        health = CollectorHealth()
        collector = ModelMeshCollector(
            health, f"https://127.0.0.1:{runner.addresses[0][1]}/metrics",
            ssl_context=ssl.create_default_context(cafile=str(certificates.stranger.cert_file)), clock=clock,
            timeout_s=TIMEOUT_S,
        )
        async with aiohttp.ClientSession() as session:
            assert not await collector.scrape_once(session)
        assert list(collector.collect()) == []  # no data yet, and none invented
        assert not health.is_healthy(names.COLLECTOR_MODELMESH)
        assert health.last_success(names.COLLECTOR_MODELMESH) is None
    finally:
        await runner.cleanup()


async def test_an_outage_is_logged_once_not_at_every_scrape(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    await prime(rig)
    rig.fake.set_fault("garbage")
    with caplog.at_level("WARNING", logger="exporter.collectors.health"):
        for _ in range(4):
            await rig.step()
    assert len([r for r in caplog.records if "modelmesh collector failed" in r.getMessage()]) == 1


async def test_a_flapping_modelmesh_is_logged_once_a_minute_not_at_every_flap(
    rig: Rig, caplog: pytest.LogCaptureFixture,
) -> None:
    """A ModelMesh that fails every other read (answering near the timeout, a proxy restarting) wrote a warning
    and a "recovered" line at every flap: at the 5 s default some 17,000 lines a day a pod. An outage that
    starts again within a minute of the last logged one is counted, not logged; the next line says how many."""
    await prime(rig)
    with caplog.at_level("INFO", logger="exporter.collectors.health"):
        for _ in range(60):  # two minutes: a failed read, then a good one, every second
            rig.fake.set_fault("error")
            assert not await rig.step(1.0)
            rig.fake.set_fault(None)
            assert await rig.step(1.0)
    failed = [r.getMessage() for r in caplog.records if "modelmesh collector failed" in r.getMessage()]
    recovered = [r.getMessage() for r in caplog.records if "modelmesh collector recovered" in r.getMessage()]
    assert len(failed) == 2, failed  # at the start and a minute later
    assert "29 more times" in failed[1], failed[1]  # the outages between the two lines, each over at the next read
    assert len(recovered) == 2, recovered
    assert rig.errors(names.REASON_HTTP) == 60.0  # every one counted


async def test_an_outage_quiet_at_its_start_that_lasts_is_not_counted_among_the_flaps_before_its_line(
    rig: Rig, caplog: pytest.LogCaptureFixture,
) -> None:
    """A flap within the minute, then an outage that starts quietly and lasts past the minute: its line said
    "it failed 2 more times since the last line ..., recovering in between", counting itself, though it had not
    recovered and the line is its own. Only the flap before it failed and recovered without a line."""
    await prime(rig)
    with caplog.at_level("INFO", logger="exporter.collectors.health"):
        for fault in ["error", None, "error", None]:  # a logged outage, then a flap, each over at the next read
            rig.fake.set_fault(fault)
            await rig.step(1.0)
        rig.fake.set_fault("error")
        for _ in range(70):  # an outage that starts 4 s after the last line and lasts
            assert not await rig.step(1.0)
    failed = [r.getMessage() for r in caplog.records if "modelmesh collector failed" in r.getMessage()]
    assert len(failed) == 2, failed
    assert "(it failed 1 more times since the last line 60 s ago, recovering in between)" in failed[1], failed[1]


async def test_an_unexpected_error_is_counted_and_the_loop_goes_on(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(text: str, at: float) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(rig.collector, "ingest", broken)
    with caplog.at_level("ERROR", logger="exporter.collectors.modelmesh"):
        task = asyncio.create_task(rig.collector.run(0.01))
        try:
            while rig.errors(names.REASON_INTERNAL) < 2:
                await asyncio.sleep(0.01)
            assert not task.done()
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
    assert rig.success() == 0.0


# ---- parsing ----

GOOD_GAUGES = (
    f"{names.MM_LRU_AGE_S} 10.0\n{names.MM_CAPACITY_BYTES} 100.0\n"
    f"{names.MM_USED_BYTES} 50.0\n{names.MM_MODELS_TOTAL} 2.0\n"
)


def invoke_series(**counts: float) -> str:
    """The invoke histogram's `_count` per `code` label (a labelled histogram, as in ModelMesh)."""
    lines = [f"# TYPE {names.MM_INVOKE_MODEL_MS} histogram"]
    for code, count in counts.items():
        labels = f'method="ModelInfer",code="{code}"'
        lines.append(f'{names.MM_INVOKE_MODEL_MS}_bucket{{{labels},le="+Inf"}} {count}')
        lines.append(f"{names.MM_INVOKE_MODEL_MS}_count{{{labels}}} {count}")
        lines.append(f"{names.MM_INVOKE_MODEL_MS}_sum{{{labels}}} {count * 20}")
    return "\n".join(lines) + "\n" + GOOD_GAUGES


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("<html><body>502 Bad Gateway</body></html>\n", id="html"),
        pytest.param('{"status": "ok"}\n', id="json"),
        pytest.param("\x00\x01\x02binary\n", id="binary"),
        pytest.param("", id="empty"),
        pytest.param(invoke_series(OK=5.0)[:-30], id="cut-mid-line"),
        pytest.param(invoke_series(OK=5.0).replace(f"{names.MM_MODELS_TOTAL} 2.0\n", ""), id="cut-at-a-line"),
        pytest.param(invoke_series(OK=-5.0), id="negative-counter"),
        pytest.param(invoke_series(OK=float("nan")), id="nan-counter"),
        pytest.param(GOOD_GAUGES.replace("10.0", "+Inf"), id="infinite-gauge"),
        # An integer past a double's range: prometheus_client's float() of it raised OverflowError, which the
        # collector's loop logged as an internal error with a traceback instead of a garbled scrape.
        pytest.param(invoke_series(OK=5.0).replace("_count{method=\"ModelInfer\",code=\"OK\"} 5.0",
                                                   "_count{method=\"ModelInfer\",code=\"OK\"} 1" + "0" * 310),
                     id="integer-past-a-double"),
    ],
)
def test_unusable_bodies_are_parse_failures(body: str) -> None:
    with pytest.raises(ScrapeFailure) as failure:
        parse_modelmesh(body)
    assert failure.value.reason == names.REASON_PARSE


def test_a_modelmesh_that_never_served_a_request_reads_zero_requests() -> None:
    reading = parse_modelmesh(GOOD_GAUGES)  # the labelled invoke histogram has no series yet
    assert reading.total(REQUESTS) == 0.0
    assert reading.models_loaded == 2.0


def test_a_negative_lru_age_is_a_fresh_copy_not_a_broken_body() -> None:
    """ModelMesh stamps the copies it adds for a hot model 20 s in the future (`newCopiesTimestamp` in
    ModelMesh.java), so a pod holding only such copies, typically one just scaled up, reports a negative LRU
    age. That is ModelMesh's own reading, not garbage: the scrape must count, its LRU read as just used."""
    body = invoke_series(OK=5.0).replace(f"{names.MM_LRU_AGE_S} 10.0", f"{names.MM_LRU_AGE_S} -20.0")
    reading = parse_modelmesh(body)
    assert reading.total(REQUESTS) == 5.0
    assert reading.lru_age_s == 0.0


async def published_text(body: str) -> str:
    """The exporter's /metrics text after one scrape of a ModelMesh that answers `body`."""
    async def metrics(_: web.Request) -> web.Response:
        return web.Response(text=body, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        health = CollectorHealth()
        collector = ModelMeshCollector(health, f"http://127.0.0.1:{port}/metrics")
        registry = CollectorRegistry(auto_describe=False)
        registry.register(collector)
        registry.register(health)
        async with aiohttp.ClientSession() as session:
            assert await collector.scrape_once(session)
        return generate_latest(registry).decode()
    finally:
        await runner.cleanup()


def published_line(text: str, name: str) -> str | None:
    """The sample line of an unlabelled series in exposition text, or None when it is not published."""
    return next((line for line in text.splitlines() if line.split(" ")[0] == name), None)


@pytest.mark.parametrize(
    ("gauges", "lru_age"),
    [
        # ModelMesh's age as it is: 120 s
        ((f"{names.MM_MODELS_TOTAL} 2.0", f"{names.MM_LRU_AGE_S} 120.0"), "120.0"),
        # no model loaded: no LRU model to age, whatever the age gauge still says
        ((f"{names.MM_MODELS_TOTAL} 0.0", f"{names.MM_LRU_AGE_S} 120.0"), None),
        # a last-use time of 0: ModelMesh has not published one yet, which is no age (not 56 years)
        ((f"{names.MM_MODELS_TOTAL} 5.0", f"{names.MM_LRU_S} 0.0"), None),
        # ModelMesh's own age 0 (no last-use time): the copy was just used, left out as just used
        ((f"{names.MM_MODELS_TOTAL} 2.0", f"{names.MM_LRU_AGE_S} 0.0"), None),
    ],
    ids=["age", "no-model", "last-use-not-published-yet", "age-zero"],
)
async def test_the_lru_age_is_published_only_for_a_pod_holding_a_model_with_a_known_last_use(
    gauges: tuple[str, str], lru_age: str | None,
) -> None:
    models, lru = gauges
    body = GOOD_GAUGES.replace(f"{names.MM_MODELS_TOTAL} 2.0", models)
    body = body.replace(f"{names.MM_LRU_AGE_S} 10.0", lru) if names.MM_LRU_AGE_S in lru else body + lru + "\n"
    text = await published_text(body)
    assert published_line(text, names.MODELS_LOADED) == f"{names.MODELS_LOADED} {models.split()[1]}"
    expected = None if lru_age is None else f"{names.LRU_AGE_SECONDS} {lru_age}"
    assert published_line(text, names.LRU_AGE_SECONDS) == expected


def per_model_body(models: int) -> str:
    """ModelMesh's output with per-model metrics on: every histogram labelled by model, with its buckets, and
    families the exporter does not read, one of them garbled."""
    lines = [f"# HELP {names.MM_INVOKE_MODEL_MS} Latency of model invocations",
             f"# TYPE {names.MM_INVOKE_MODEL_MS} histogram"]
    for model in range(models):
        labels = f'method="ModelInfer",code="OK",modelId="model-{model}",vModelId=""'
        lines.extend(f'{names.MM_INVOKE_MODEL_MS}_bucket{{{labels},le="{le}"}} 3' for le in (
            "1.0", "2.0", "5.0", "10.0", "20.0", "50.0", "100.0", "200.0", "500.0", "1000.0", "+Inf"))
        lines.append(f"{names.MM_INVOKE_MODEL_MS}_count{{{labels}}} 3")
        lines.append(f"{names.MM_INVOKE_MODEL_MS}_sum{{{labels}}} 42.5")
    lines.append("# TYPE modelmesh_loading_queue_delay_milliseconds histogram")
    lines.extend(f'modelmesh_loading_queue_delay_milliseconds_count{{modelId="model-{model}"}} 1'
                 for model in range(models))
    lines.append("# TYPE modelmesh_model_sizing_milliseconds gauge")
    lines.append('modelmesh_model_sizing_milliseconds{modelId="model-0"} not-a-number')
    return "\n".join(lines) + "\n" + GOOD_GAUGES


def test_per_model_metrics_read_only_the_series_the_exporter_uses() -> None:
    """With ModelMesh's per-model metrics on, a pod keeps series for every model it ever served (2,000 models:
    megabytes of text). The exporter reads the request counts of every model and the instance gauges; the
    buckets and the families it does not use are not its to judge, so a garbled line among them does not
    throw away the read."""
    reading = parse_modelmesh(per_model_body(2000))
    assert reading.total(REQUESTS) == 6000.0  # 3 requests for each of 2,000 models
    assert len(reading.counters[REQUESTS]) == 2000
    assert (reading.lru_age_s, reading.models_loaded) == (10.0, 2.0)


def test_a_garbled_line_in_a_series_the_exporter_reads_still_fails_the_read() -> None:
    body = per_model_body(3).replace('modelId="model-1",vModelId=""} 3\n', 'modelId="model-1",vModelId=""} x\n')
    with pytest.raises(ScrapeFailure) as failure:
        parse_modelmesh(body)
    assert failure.value.reason == names.REASON_PARSE


def test_the_fakes_own_output_parses_as_modelmesh_output() -> None:
    clock = SteppedClock(100.0)
    fake = FakeModelMesh(ModelMeshLoad(requests_per_second=10.0, queue_delay_ms=4.0), clock=clock)
    clock.advance(10.0)
    reading = parse_modelmesh(fake_output(fake))
    assert reading.total(REQUESTS) == 100.0
    assert reading.total(QUEUE_SUM_MS) == 400.0


def fake_output(fake: FakeModelMesh) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(fake)
    return generate_latest(registry).decode()


def test_the_fake_labels_its_histograms_by_model_as_modelmesh_with_per_model_metrics() -> None:
    clock = SteppedClock(100.0)
    fake = FakeModelMesh(ModelMeshLoad(requests_per_second=10.0, models_loaded=3), clock=clock)
    assert parse_modelmesh(fake_output(fake)).counters[QUEUE_COUNT] == {}  # no series before a model's first use
    clock.advance(1.0)
    reading = parse_modelmesh(fake_output(fake))
    assert reading.counters[REQUESTS] == {  # 10 requests spread over the 3 models in turn
        (("code", "OK"), ("method", "ModelInfer"), ("modelId", model), ("vModelId", "")): count
        for model, count in zip(fake.model_ids, (4.0, 3.0, 3.0), strict=True)}
    assert {dict(labels)["modelId"] for labels in reading.counters[QUEUE_COUNT]} == set(fake.model_ids)
    assert not set(fake.model_ids) & set(FakeModelMesh(clock=clock).model_ids)  # each pod its own copies

    plain = FakeModelMesh(ModelMeshLoad(requests_per_second=10.0), clock=clock, per_model=False)
    assert parse_modelmesh(fake_output(plain)).counters[QUEUE_COUNT] == {(): 0.0}  # ModelMesh's default: at 0
    clock.advance(1.0)
    assert parse_modelmesh(fake_output(plain)).counters[REQUESTS] == {
        (("code", "OK"), ("method", "ModelInfer")): 10.0}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 30.0), st.floats(0.0, 500.0), st.integers(0, 12)), min_size=1,
                max_size=8))
@example(steps=[(1.9999999999999964, 1.0, 0)])
def test_the_fakes_per_model_counts_never_fall_and_add_up_to_the_whole_requests(
    steps: list[tuple[float, float, int]],
) -> None:
    """Whatever the caller does to the rate and to the models the pod holds, no model's count falls (the
    exporter would read a restart) and the models' counts add up to the requests of the set rates."""
    clock = SteppedClock(100.0)
    fake = FakeModelMesh(clock=clock)
    before: dict[tuple[tuple[str, str], ...], float] = {}
    integrated = 0.0
    for seconds, rate, models in steps:
        fake.update(requests_per_second=rate, models_loaded=models)
        started = clock.now
        clock.advance(seconds)
        integrated += rate * (clock.now - started)  # the time the fake saw pass (100 + 1.9999999999999964 is 102)
        counts = parse_modelmesh(fake_output(fake)).counters[REQUESTS]
        assert all(counts.get(labels, 0.0) >= count for labels, count in before.items())
        assert sum(counts.values()) == math.floor(integrated)
        before = dict(counts)


# ---- counter arithmetic ----


def window_after(*bodies: str, window_s: float = WINDOW_S) -> Iterator[CounterWindow]:
    window = CounterWindow(window_s)
    for index, body in enumerate(bodies):
        window.add(parse_modelmesh(body), at=10.0 * index)
        yield window


def test_a_series_that_vanishes_and_returns_is_not_a_restart() -> None:
    *_, window = window_after(
        invoke_series(OK=100.0, NOT_FOUND=50.0),
        invoke_series(OK=110.0),  # NOT_FOUND missing from this body
        invoke_series(OK=120.0, NOT_FOUND=55.0),
    )
    assert window.resets == 0
    assert window.latest is not None
    assert window.latest[REQUESTS] == 25.0  # +10, +10 +5 since the first reading: nothing counted twice


def test_a_new_series_counts_in_full() -> None:
    *_, window = window_after(invoke_series(OK=100.0), invoke_series(OK=110.0, UNAVAILABLE=3.0))
    assert window.latest is not None
    assert window.latest[REQUESTS] == 13.0


def test_a_counter_that_goes_down_was_reset() -> None:
    states = list(window_after(invoke_series(OK=100.0), invoke_series(OK=130.0), invoke_series(OK=4.0),
                               invoke_series(OK=24.0)))
    assert states[-1].resets == 1
    assert states[-1].latest is not None
    assert states[-1].latest[REQUESTS] == 54.0  # 30 + 4 (counted from zero) + 20 since the first reading
    # At the reset the window starts again: no rate from that reading, then 20 requests in 10 s.
    window = CounterWindow(WINDOW_S)
    for index, body in enumerate((invoke_series(OK=100.0), invoke_series(OK=130.0), invoke_series(OK=4.0))):
        window.add(parse_modelmesh(body), at=10.0 * index)
    assert window.rates() is None
    window.add(parse_modelmesh(invoke_series(OK=24.0)), at=30.0)
    rates = window.rates()
    assert rates is not None and rates.requests_per_second == pytest.approx(2.0)


def test_after_a_gap_longer_than_the_window_rates_start_again() -> None:
    """Saturated (50/s), then 120 s without a reading (an exporter stall), then 50/s again: the first rate
    after the gap must not average the gap in (it would read (6000 + 500) / 130 = 50/s only by luck of a
    steady load; with the load dropping during the gap it reads low on a 'complete' view)."""
    window = CounterWindow(30.0)
    window.add(parse_modelmesh(invoke_series(OK=0.0)), at=0.0)
    window.add(parse_modelmesh(invoke_series(OK=500.0)), at=10.0)
    assert window.rates() is not None
    window.add(parse_modelmesh(invoke_series(OK=520.0)), at=130.0)  # 20 requests in the 120 s gap
    assert window.rates() is None  # not 20/120 s = 0.17/s: that would read as idle
    assert window.restarts == 1
    window.add(parse_modelmesh(invoke_series(OK=1020.0)), at=140.0)
    rates = window.rates()
    assert rates is not None and rates.requests_per_second == pytest.approx(50.0)


def test_reads_on_time_are_no_gap_even_with_a_window_as_short_as_the_interval() -> None:
    """A window of 5 s read every 5 s with a 2 s timeout: a read that answers 1.9 s into its timeout, after one
    that answered at once, comes 6.9 s after it, on time. Past the window plus the timeout a read was missed:
    the window starts again, and the log says how long there was no good reading, not that none came."""
    window = CounterWindow(5.0, late_s=2.0)
    window.add(parse_modelmesh(invoke_series(OK=0.0)), at=0.0)
    window.add(parse_modelmesh(invoke_series(OK=276.0)), at=6.9)
    rates = window.rates()
    assert rates is not None and rates.requests_per_second == pytest.approx(40.0)
    assert window.news is None
    window.add(parse_modelmesh(invoke_series(OK=560.0)), at=14.0)  # 7.1 s: the read between failed
    assert window.rates() is None
    assert window.restarts == 1
    # what the collector says at this read (tests/exporter/test_modelmesh_restart_log.py)
    assert window.news == ("no good ModelMesh reading for 7.1 s, more than the load window (5 s) plus the read "
                           "timeout (2 s): rates start again from this reading")


def test_a_gap_inside_the_window_keeps_the_rate_over_the_gap() -> None:
    window = CounterWindow(30.0)
    window.add(parse_modelmesh(invoke_series(OK=0.0)), at=0.0)
    window.add(parse_modelmesh(invoke_series(OK=1000.0)), at=25.0)  # a 25 s gap, inside the 30 s window
    rates = window.rates()
    assert rates is not None and rates.requests_per_second == pytest.approx(40.0)
    assert window.restarts == 0
