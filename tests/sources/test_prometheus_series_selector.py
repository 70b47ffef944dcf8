"""`--prometheus-series-selector`: only the jobs it names may write a pod's values, against a real Prometheus.

Every query read the exporters' metric names from any job (`max by (namespace, pod)`, no job matcher). A job that
keeps the labels its targets write (a Pushgateway, a tenant's PodMonitor with `honorLabels: true`) stored a
tenant's `modelmesh_pod_requests_per_second{namespace="team-a",pod="a-1"}` as written: the newest scrape, so its
value was team-a's, and a fresh success time there made team-a's hung exporter read as fresh.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoscaler import cli
from autoscaler.serve_args import settings_from_args
from autoscaler.server import build_source
from tests.fakes.prometheus import Sample
from tests.sources.conftest import StartPrometheus
from tests.sources.static_discovery import StaticDiscovery
from tests.sources.test_prometheus_source import TRITON, by_pod, exporter_series, signals

pytestmark = pytest.mark.slow

SELECTOR = 'job="modelmesh-exporter"'
"""What the shipped Deployment sets: the job the shipped scrape config and PodMonitor create."""


def pushed(samples: list[Sample]) -> list[Sample]:
    """Series a tenant pushed for another namespace's pod, as a Pushgateway job with honor_labels stores them."""
    return [replace(sample, labels={**sample.labels, "job": "pushgateway", "instance": "pushgateway:9091"})
            for sample in samples]


async def read_pod(url: str, now: float, *flags: str) -> tuple[float | None, float | None]:
    """team-a's a-1 as `serve --source prometheus` with `flags` reads it: its request rate and freshness."""
    args = cli.build_parser().parse_args(["serve", "--source", "prometheus", "--prometheus-url", url, *flags])
    discovery = StaticDiscovery.of({(TRITON.namespace, TRITON.deployment): ["a-1"]})
    source = build_source(settings_from_args(args, {}), discovery)
    try:
        pod = by_pod(await source.collect(now))["team-a", "a-1"]
    finally:
        await source.close()
    return pod.requests_per_second, pod.sampled_at


async def test_a_value_another_job_writes_for_a_pod_is_not_served(
    start_prometheus: StartPrometheus, now: float
) -> None:
    """Our job scraped a-1 5 s ago (10 requests/s); a tenant pushed 5,000 requests/s for it 2 s ago."""
    ours, forged = now - 5, now - 2
    prom = await start_prometheus([
        *exporter_series("team-a", "a-1", ours, signals(10, 0, 0, 0.5, 2), last_success=ours),
        *pushed(exporter_series("team-a", "a-1", forged, signals(5000, 0, 0, 0.5, 2), last_success=forged)),
    ])

    rps, sampled_at = await read_pod(prom.url, now, "--prometheus-series-selector", SELECTOR)

    assert rps == 10
    assert sampled_at == pytest.approx(ours, abs=1e-3)


async def test_a_success_time_another_job_writes_does_not_make_a_hung_exporter_fresh(
    start_prometheus: StartPrometheus, now: float
) -> None:
    """a-1's exporter last read ModelMesh 300 s ago (it hangs; Prometheus still scrapes it); a tenant pushed a
    success time of 2 s ago for it. The pod must read as 300 s old, so that its runtime is held, not fed."""
    scraped, hung, forged = now - 5, now - 300, now - 2
    prom = await start_prometheus([
        *exporter_series("team-a", "a-1", scraped, signals(10, 0, 0, 0.5, 2), last_success=hung),
        *pushed(exporter_series("team-a", "a-1", forged, {}, last_success=forged)),
    ])

    _, sampled_at = await read_pod(prom.url, now, "--prometheus-series-selector", SELECTOR)

    assert sampled_at == pytest.approx(hung, abs=1e-3)


async def test_the_selector_may_name_several_labels_and_a_regular_expression(
    start_prometheus: StartPrometheus, now: float
) -> None:
    """Matchers as PromQL writes them, braces optional: here the job by regex and a cluster label, which only
    the series of one of the two clusters remote-writing into this Prometheus carry."""
    at = now - 5
    prom = await start_prometheus([
        *[replace(s, labels={**s.labels, "cluster": "east"})
          for s in exporter_series("team-a", "a-1", at, signals(10, 0, 0, 0.5, 2), last_success=at)],
        *[replace(s, labels={**s.labels, "cluster": "west"})
          for s in exporter_series("team-a", "a-1", at + 1, signals(70, 0, 0, 0.5, 2), last_success=at + 1)],
    ])

    rps, _ = await read_pod(prom.url, now, "--prometheus-series-selector", '{job=~"modelmesh-.*", cluster="east"}')

    assert rps == 10
