"""Each signal is read from its pod's newest scrape only, against a real Prometheus (`prometheus_current`).

An instant query finds any series with a sample in the lookback. A series the exporter dropped (the LRU age,
in the worst thrash) keeps its pre-restart sample visible for the whole lookback when Prometheus restarted in
between (no staleness marker), and a pod scraped by a slower second job, or by an HA replica that stopped, has
an older series beside the newest: neither may stand in for what the newest scrape says. The backfilled TSDB
has no staleness markers at all, as a restarted Prometheus has none for the series dropped while it was down.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.sources.prometheus import PrometheusSource
from tests.fakes.prometheus import Sample
from tests.sources.conftest import StartPrometheus
from tests.sources.static_discovery import StaticDiscovery
from tests.sources.test_prometheus_source import TRITON, by_pod, exporter_series, signals

pytestmark = pytest.mark.slow


def other_target(samples: list[Sample], **labels: str) -> list[Sample]:
    """The same scrape as another target stores it (another job, or an HA replica's label)."""
    return [replace(sample, labels={**sample.labels, **labels}) for sample in samples]


def one_runtime(*pods: str) -> StaticDiscovery:
    return StaticDiscovery.of({(TRITON.namespace, TRITON.deployment): list(pods)})


def made(sources: list[PrometheusSource], url: str, discovery: StaticDiscovery) -> PrometheusSource:
    source = PrometheusSource(discovery, url)
    sources.append(source)
    return source


async def test_an_lru_age_the_newest_scrape_dropped_is_not_read_from_before_a_restart(
    start_prometheus: StartPrometheus, sources: list[PrometheusSource], now: float
) -> None:
    """f-1's LRU copy was 900 s old, then just used: its exporter dropped the age series while Prometheus was
    down. The pod is fresh (its newest scrape is 10 s old); its LRU age was read as the 900 s from before the
    restart (less pressure) for the whole lookback, where the scrape source reads the newest exposition's
    (no age: just used, the most pressure)."""
    before, after = now - 40, now - 10
    samples = [*exporter_series("team-a", "f-1", before, signals(50, 0, 1, 0.95, 8, lru=900), last_success=before),
               *exporter_series("team-a", "f-1", after, signals(80, 0, 3, 0.95, 8), last_success=after)]
    prom = await start_prometheus(samples)
    source = made(sources, prom.url, one_runtime("f-1"))

    pod = by_pod(await source.collect(now))["team-a", "f-1"]

    assert pod.sampled_at == pytest.approx(after, abs=1e-3)
    assert (pod.lru_age_s, pod.requests_per_second, pod.cache_misses_per_second) == (None, 80, 3)


async def test_a_slow_second_job_does_not_keep_a_pod_at_its_older_values(
    start_prometheus: StartPrometheus, sources: list[PrometheusSource], now: float
) -> None:
    """Our PodMonitor scraped g-1 5 s ago (LRU age 60 s: thrashing, a load of 200), a user's ServiceMonitor
    25 s ago (900 s, 100). The larger of the two served the slow job's 900 s, holding a cache scale-up back
    until that job scraped again; every value is the newest scrape's, whichever way it moves."""
    fast, slow = now - 5, now - 25
    samples = [*exporter_series("team-a", "g-1", fast, signals(200, 0.1, 4, 0.95, 8, lru=60), gpus=[0.9],
                                last_success=fast),
               *other_target(exporter_series("team-a", "g-1", slow, signals(100, 0.4, 1, 0.95, 8, lru=900),
                                             gpus=[0.2], last_success=slow), job="user-servicemonitor")]
    prom = await start_prometheus(samples)
    source = made(sources, prom.url, one_runtime("g-1"))

    pod = by_pod(await source.collect(now))["team-a", "g-1"]

    assert (pod.lru_age_s, pod.requests_per_second, pod.queue_delay_s, pod.gpu_busy) == (60, 200, 0.1, 0.9)


async def test_a_stopped_ha_replicas_last_samples_do_not_stand_in_for_the_live_ones(
    start_prometheus: StartPrometheus, sources: list[PrometheusSource], now: float
) -> None:
    """Both replicas' series side by side (Thanos without deduplication): replica b stopped 100 s ago with h-1's
    LRU age at 900 s; replica a scraped it 5 s ago at 30 s. The live replica's value is read, not the larger."""
    live, stopped = now - 5, now - 100
    samples = [*other_target(exporter_series("team-a", "h-1", live, signals(10, 0, 2, 0.95, 8, lru=30),
                                             last_success=live), prometheus_replica="a"),
               *other_target(exporter_series("team-a", "h-1", stopped, signals(10, 0, 0, 0.95, 8, lru=900),
                                             last_success=stopped), prometheus_replica="b")]
    prom = await start_prometheus(samples)
    source = made(sources, prom.url, one_runtime("h-1"))

    pod = by_pod(await source.collect(now))["team-a", "h-1"]

    assert (pod.lru_age_s, pod.cache_misses_per_second) == (30, 2)


async def test_a_newer_job_that_keeps_only_the_exporters_own_series_does_not_blank_the_signals(
    start_prometheus: StartPrometheus, sources: list[PrometheusSource], now: float
) -> None:
    """Our PodMonitor scraped f-1 20 s ago with every signal; a user's ServiceMonitor whose metricRelabelings keep
    only `modelmesh_exporter_.*` scraped it 5 s ago. Every signal of the pod read None (the newest scrape had
    none), which held the runtime's values for as long as that job scraped last."""
    ours = exporter_series("team-a", "f-1", now - 20, signals(80, 0.2, 3, 0.95, 8, lru=900), gpus=[0.7],
                           last_success=now - 20)
    theirs = [sample for sample in other_target(
        exporter_series("team-a", "f-1", now - 5, signals(80, 0.2, 3, 0.95, 8, lru=900), gpus=[0.7],
                        last_success=now - 5), job="user-servicemonitor", instance="10.0.0.9:9187")
        if sample.name.startswith("modelmesh_exporter_")]
    prom = await start_prometheus([*ours, *theirs])
    source = made(sources, prom.url, one_runtime("f-1"))

    pod = by_pod(await source.collect(now))["team-a", "f-1"]

    assert (pod.requests_per_second, pod.queue_delay_s, pod.cache_misses_per_second, pod.lru_age_s,
            pod.cache_used_ratio, pod.models_loaded, pod.gpu_busy) == (80, 0.2, 3, 900, 0.95, 8, 0.7)


async def test_a_newer_job_that_keeps_only_the_exporters_own_series_does_not_make_old_signals_fresh(
    start_prometheus: StartPrometheus, sources: list[PrometheusSource], now: float
) -> None:
    """Our PodMonitor last scraped f-1 40 s ago (its interval is long, or it stopped); a user's ServiceMonitor
    that keeps only `modelmesh_exporter_.*` scraped it 2 s ago. The signals are the 40-s-old scrape's, but the pod
    read as fresh as the user's job's scrape (2 s, and its GPU 12 s): served past `max_staleness_s` instead of
    held. Each freshness is now the one the signal-carrying scrape reported."""
    ours = exporter_series("team-a", "f-1", now - 40, signals(80, 0.2, 3, 0.95, 8), gpus=[0.7], last_success=now - 40)
    theirs = [sample for sample in other_target(
        exporter_series("team-a", "f-1", now - 2, signals(80, 0.2, 3, 0.95, 8), gpus=[0.7], last_success=now - 2),
        job="user-servicemonitor", instance="10.0.0.9:9187") if sample.name.startswith("modelmesh_exporter_")]
    prom = await start_prometheus([*ours, *theirs])
    source = made(sources, prom.url, one_runtime("f-1"))

    pod = by_pod(await source.collect(now))["team-a", "f-1"]

    assert pod.sampled_at == pytest.approx(now - 40, abs=1e-3)
    assert pod.gpu_sampled_at == pytest.approx(now - 50, abs=1e-3)  # our scrape's GPU success time
    assert (pod.requests_per_second, pod.gpu_busy) == (80, 0.7)


Scrape = tuple[float, float | None, bool]
"""One target's last scrape of a pod: how long ago, the LRU age it had (None: the series was dropped), and whether
the target keeps the pod's signals (False: only the exporter's own `modelmesh_exporter_*` series)."""


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pods=st.lists(
    st.lists(st.tuples(st.integers(1, 200), st.one_of(st.none(), st.integers(0, 3600).map(float)), st.booleans()),
             min_size=1, max_size=3, unique_by=lambda scrape: scrape[0]).filter(
        lambda scrapes: any(keeps for _, _, keeps in scrapes)),
    min_size=1, max_size=6))
async def test_every_pod_reads_what_its_newest_scrape_said(
    start_prometheus: StartPrometheus, now: float, pods: list[list[Scrape]]
) -> None:
    """Whatever each target (job) last scraped, and however long ago within the lookback, a pod's LRU age is its
    newest scrape's among the targets that keep its signals, absent where that scrape had none, and the pod is as
    fresh as that scrape (not as a newer scrape of a job that keeps only the exporter's own series)."""
    samples: list[Sample] = []
    for index, scrapes in enumerate(pods):
        for job, (ago, lru, keeps) in enumerate(scrapes):
            at = now - ago
            scraped = other_target(exporter_series("team-a", f"p-{index}", at, signals(1, 0, 0, 1, 1, lru=lru),
                                                   last_success=at), job=f"job-{job}")
            samples += [sample for sample in scraped if keeps or sample.name.startswith("modelmesh_exporter_")]
    prom = await start_prometheus(samples)
    source = PrometheusSource(one_runtime(*(f"p-{index}" for index in range(len(pods)))), prom.url)
    try:
        read = by_pod(await source.collect(now))
    finally:
        await source.close()
        await prom.close()

    for index, scrapes in enumerate(pods):
        newest = min(scrape for scrape in scrapes if scrape[2])  # the fewest seconds ago of those keeping signals
        assert read["team-a", f"p-{index}"].lru_age_s == newest[1]
        assert read["team-a", f"p-{index}"].sampled_at == pytest.approx(now - newest[0], abs=1e-3)

