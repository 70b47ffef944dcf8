"""What the platform engineer sees of a fleet-sized adapter: log lines that stay short and say once what
happened, however many runtimes there are. Fleets here are a few hundred runtimes, enough to show a line or a
count that grows with the fleet; the 5,000-runtime figures are `bench/bench_fleet_ops.py`'s."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Gauge, generate_latest

from autoscaler import cli
from autoscaler.actuation.bridge import ReplicaBridge
from autoscaler.api.selfmetrics_split import (
    SERVING_ATTRIBUTES,
    FamilyFilter,
    _family_names,
    refresh_families,
    render_refresh_metrics,
)
from autoscaler.kube.client import KubeClient
from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot
from autoscaler.policies.config import PolicyBook
from autoscaler.refresher import Refresher
from autoscaler.runtime_gauges import RuntimeGauge
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.serve_args import settings_from_args
from autoscaler.sources.base import PodTarget, RuntimeInventory, SourceDefaults
from autoscaler.sources.kube_pods import KubePodDiscovery
from autoscaler.sources.scrape import ScrapeSource
from bench.fake_exporter import exporter_text
from tests.fakes.kube import FakeKubeApi
from tests.sources.static_discovery import StaticDiscovery

FLEET = 200
LONGEST_LINE = 2_000
"""A log line longer than this is one no person reads (and shippers cut lines at 16 KiB or so)."""


def fleet_of(kube: FakeKubeApi, namespace: str = "fleet") -> list[RuntimeKey]:
    keys = [RuntimeKey(namespace, f"modelmesh-serving-rt{number}") for number in range(FLEET)]
    for key in keys:
        kube.add_modelmesh_runtime(key.namespace, key.deployment, replicas=2)
    return keys


async def test_discovering_a_fleet_logs_one_short_line(kube: FakeKubeApi, caplog: pytest.LogCaptureFixture) -> None:
    keys = fleet_of(kube)
    caplog.set_level(logging.INFO, logger="autoscaler.sources")
    subject = KubePodDiscovery(kube.client_configuration(), runtimes=[], discover=True, namespaces=["fleet"],
                               resync_interval_s=30, request_timeout_s=5.0)
    await subject.start()
    try:
        assert sorted(subject.inventory()) == sorted(keys)
    finally:
        await subject.close()
    added = [record.getMessage() for record in caplog.records if "added" in record.getMessage()]
    assert len(added) == 1
    assert f"{FLEET} runtimes added" in added[0]
    assert max(len(record.getMessage()) for record in caplog.records) < LONGEST_LINE


class FleetSource(SourceDefaults):
    """`FLEET` runtimes of two pods, all fresh but those named in `stale`."""

    name = "test"
    errors: dict[str, int] = {}

    def __init__(self) -> None:
        self.keys = [RuntimeKey("fleet", f"modelmesh-serving-rt{number}") for number in range(FLEET)]
        self.stale: set[RuntimeKey] = set()
        self.down = False  # the backend unreachable: the last good samples kept, as the sources keep them
        self.reads = 0

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        self.reads += 2 * len(self.keys)
        return [RuntimeSnapshot(key, tuple(PodSample(f"{key.deployment}-{pod}", requests_per_second=20.0, gpu_busy=0.5,
                                                     sampled_at=now - (600 if key in self.stale and pod else 1))
                                           for pod in range(2)), taken_at=now, replicas=2, source_ok=not self.down)
                for key in self.keys]

    async def close(self) -> None:
        return None


def runtime_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    lines = [record.getMessage() for record in caplog.records if record.name == "autoscaler.refresher"]
    caplog.clear()
    return lines


async def test_a_fleet_that_starts_or_turns_stale_together_is_logged_in_a_few_lines(
        caplog: pytest.LogCaptureFixture) -> None:
    source = FleetSource()
    metrics = AdapterMetrics()
    refresher = Refresher(source, PolicyBook(), metrics)
    caplog.set_level(logging.INFO, logger="autoscaler.refresher")

    await refresher.refresh_once()  # the first refresh after a start: every runtime is new
    started = runtime_lines(caplog)
    assert len(started) <= 3, started[:5]
    assert any(f"{FLEET} runtimes now serving" in line for line in started)
    await refresher.refresh_once()
    assert runtime_lines(caplog) == []  # nothing changed: nothing said

    source.stale = set(source.keys[:150])  # a node lost: one pod of 150 runtimes stops reporting
    await refresher.refresh_once()
    stale = runtime_lines(caplog)
    assert len(stale) <= 3, stale[:5]
    assert any("150 runtimes now holding values" in line and "1/2 ready pods fresh" in line for line in stale)

    source.stale = set()  # the node is back
    await refresher.refresh_once()
    recovered = runtime_lines(caplog)
    assert len(recovered) == 1 and "150 runtimes now serving" in recovered[0], recovered[:5]

    # One runtime alone: its own line, as ever (one that was not stale just now: one of those stale again would
    # be flapping, said as such: tests/test_refresher_missing_signals_log.py).
    source.stale = {source.keys[-1]}
    await refresher.refresh_once()
    [alone] = runtime_lines(caplog)
    assert alone.startswith(f"runtime {source.keys[-1]}: 1/2 ready pods fresh; ")

    source.stale, source.down = set(), True  # Prometheus down: the kept samples are no fresh read
    await refresher.refresh_once()
    down = runtime_lines(caplog)
    assert any(f"runtime {source.keys[0]}: 2 ready pods, none read; metric source down" in line for line in down), down
    assert not any("ready pods fresh" in line for line in down), down
    assert max(len(line) for line in started + stale + recovered) < LONGEST_LINE
    # What the source errors are judged against (the shipped alert: tests/manifests/test_monitoring_fleet.py).
    assert metrics.registry.get_sample_value("modelmesh_autoscaler_source_reads_total", {"source": "test"}) == \
        refresher.refreshes * 2 * FLEET


@contextlib.asynccontextmanager
async def fleet_scrape(exporter: Callable[[web.Request], Awaitable[web.Response]],
                       runtimes: int) -> AsyncIterator[ScrapeSource]:
    """A scrape source over `runtimes` runtimes of two pods whose exporters `exporter` answers (its `pod` is the
    pod's number), each at its own URL of one local server."""
    app = web.Application()
    app.router.add_get("/pod/{pod}/metrics", exporter)
    async with TestServer(app, host="127.0.0.1") as server:
        discovery = StaticDiscovery(RuntimeInventory(
            key=key, pods=tuple(PodTarget(f"{key.deployment}-{pod}", ready=True,
                                          url=str(server.make_url(f"/pod/{number * 2 + pod}/metrics")))
                                for pod in range(2)))
            for number, key in enumerate(FleetSource().keys[:runtimes]))
        # Timeouts far past the local server's answers: a loaded CI machine once timed out 9 of 120 connects at the
        # default, and the line under test counts what the exporters answered, not the machine's speed
        scrape = ScrapeSource(discovery, concurrency=32, timeout_s=60.0, connect_timeout_s=30.0)
        try:
            yield scrape
        finally:
            await scrape.close()


async def test_a_fleet_of_exporters_failing_together_is_logged_in_a_few_lines(
        caplog: pytest.LogCaptureFixture) -> None:
    """A lost node or a NetworkPolicy dropping the exporter port fails hundreds of pods in one refresh: one line
    per reason, and one when they recover, not one per pod."""
    failing = True

    async def exporter(request: web.Request) -> web.Response:
        if failing:
            return web.Response(status=500)
        return web.Response(body=exporter_text(int(request.match_info["pod"]), gpus=1, modelmesh_stamp=time.time()),
                            content_type="text/plain")

    async with fleet_scrape(exporter, 60) as scrape:
        caplog.set_level(logging.INFO, logger="autoscaler.sources")
        await scrape.collect(time.time())
        failed = [record.getMessage() for record in caplog.records]
        caplog.clear()
        failing = False
        await scrape.collect(time.time() + 3600)  # past every pod's backoff
        recovered = [record.getMessage() for record in caplog.records]
    assert scrape.reads == 2 * 120
    assert len(failed) == 1 and failed[0].startswith("scrapes of 120 pods failed (http): "), failed[:3]
    assert len(recovered) == 1 and recovered[0].startswith("scrapes of 120 pods recovered: "), recovered[:3]
    assert max(len(line) for line in failed + recovered) < LONGEST_LINE


async def test_a_node_whose_clock_is_off_is_one_line_for_all_its_pods(caplog: pytest.LogCaptureFixture) -> None:
    """Every pod on a node with broken time sync (or a fleet whose adapter's own node drifts) finds its clock
    off in one refresh: one line with the range of the offsets, and one when they agree again."""
    offset_s = -120.0

    async def exporter(request: web.Request) -> web.Response:
        clock = time.time() + offset_s
        return web.Response(body=exporter_text(int(request.match_info["pod"]), gpus=1, modelmesh_stamp=clock,
                                               clock=clock), content_type="text/plain")

    async with fleet_scrape(exporter, 30) as scrape:
        caplog.set_level(logging.INFO, logger="autoscaler.sources")
        await scrape.collect(time.time())
        off = [record.getMessage() for record in caplog.records]
        caplog.clear()
        offset_s = 0.0
        await scrape.collect(time.time())
        agreed = [record.getMessage() for record in caplog.records]
    assert len(off) == 1 and off[0].startswith("the exporters of 60 pods have clocks -120."), off[:3]
    assert "Check those nodes' time sync" in off[0] and len(off[0]) < LONGEST_LINE
    assert len(agreed) == 1 and agreed[0].startswith("the exporters of 60 pods have clocks that agree"), agreed[:3]


async def test_the_per_runtime_series_can_be_turned_off() -> None:
    """Ten series a runtime of two pods (50,000 at 5,000 runtimes, 5.5 MB a scrape) is more than a
    Prometheus operator takes without a way to reduce it: `--per-runtime-metrics off` keeps the adapter-wide
    series only, whatever the fleet's size."""
    pages = {}
    for flag in ("on", "off"):
        settings = settings_from_args(cli.build_parser().parse_args(["serve", "--per-runtime-metrics", flag]), {})
        metrics = AdapterMetrics(per_runtime=settings.per_runtime_metrics)
        await Refresher(FleetSource(), PolicyBook(), metrics).refresh_once()
        for key in FleetSource().keys:  # what the leader sets as it writes deletion costs and bridges
            for pod in range(2):
                metrics.pod_deletion_cost.labels(key.namespace, f"{key.deployment}-{pod}").set(pod)
            metrics.runtime_scale_ready.labels(key.namespace, key.deployment).set(1)
        pages[flag] = (render_refresh_metrics(metrics), generate_latest(metrics.registry))
    for page in pages["on"]:
        assert series_count(page) > 9 * FLEET
    for page in pages["off"]:
        assert series_count(page) < 100
        assert b"modelmesh_autoscaler_refresh_duration_seconds_count 1.0" in page


def series_count(page: bytes) -> int:
    return sum(1 for line in page.decode().splitlines() if line and not line.startswith("#"))


async def test_the_leaders_per_pod_series_are_not_written_again_at_every_refresh() -> None:
    """The leader sets a deletion cost per pod and a readiness per RuntimeScale (15,000 series at 5,000
    runtimes). Rendered by `generate_latest` with every snapshot they cost the refresh process 0.5 s a refresh
    (`bench/bench_fleet_ops.py`); kept as text like the per-runtime series, the families rendered afresh at
    each refresh are the same few whatever the fleet's size, and the page is what prometheus_client writes."""
    metrics = AdapterMetrics()
    await Refresher(FleetSource(), PolicyBook(), metrics).refresh_once()
    for key in FleetSource().keys:
        for pod in range(2):
            metrics.pod_deletion_cost.labels(key.namespace, f"{key.deployment}-{pod}").set(pod)
        metrics.runtime_scale_ready.labels(key.namespace, key.deployment).set(1)
    rendered_afresh = [sample for family in refresh_families(metrics).collect() for sample in family.samples]
    assert len(rendered_afresh) < 100
    assert set(render_refresh_metrics(metrics).splitlines()) == set(generate_latest(
        FamilyFilter(metrics.registry, _family_names(metrics, SERVING_ATTRIBUTES), keep=False)).splitlines())


label = st.text(max_size=6)
change = st.tuples(st.sampled_from(["set", "remove"]), st.tuples(label, label),
                   st.one_of(st.integers(-3, 3), st.floats(allow_nan=True, allow_infinity=True)))


@settings(max_examples=100, deadline=None)
@given(changes=st.lists(change, max_size=12))
def test_series_set_one_at_a_time_read_as_a_prometheus_client_gauge(
        changes: list[tuple[str, tuple[str, str], float]]) -> None:
    kept = RuntimeGauge("mm_pod_cost", "Cost.", ("namespace", "pod"))
    plain = Gauge("mm_pod_cost", "Cost.", ["namespace", "pod"], registry=None)
    registry, reference = CollectorRegistry(), CollectorRegistry()
    registry.register(kept)
    reference.register(plain)
    for action, labels, value in changes:
        if action == "set":
            kept.labels(*labels).set(value)
            plain.labels(*labels).set(value)
            continue
        kept.remove(*labels)
        plain.remove(*labels)
        assert set(kept.exposition().splitlines()) == set(generate_latest(reference).splitlines())
    assert set(generate_latest(registry).splitlines()) == set(generate_latest(reference).splitlines())


async def test_a_new_leader_bridging_a_fleet_logs_a_few_lines(
        kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture) -> None:
    """Every new leader's first pass finds every RuntimeScale's `Ready` reason anew: one line per reason, not
    one per RuntimeScale (5,000 lines at each leader change)."""
    scales = 30
    for number in range(scales):
        kube.add_serving_runtime("ml", f"rt{number}", replicas=2)
        kube.add_modelmesh_runtime("ml", f"modelmesh-serving-rt{number}", replicas=2)
        kube.add_runtime_scale("ml", f"rt{number}", replicas=2)
    kube.add_runtime_scale("ml", "orphan", replicas=1)  # its ServingRuntime does not exist
    caplog.set_level(logging.INFO, logger="autoscaler.actuation.bridge")
    await ReplicaBridge(kube_client, namespaces=["ml"], metrics=AdapterMetrics()).sync()
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 2, lines[:5]
    assert any(line.startswith(f"{scales} RuntimeScales now Bridged: ml/rt0, ") for line in lines), lines
    assert any(line.startswith("RuntimeScale ml/orphan: ServingRuntimeNotFound: ") for line in lines), lines
