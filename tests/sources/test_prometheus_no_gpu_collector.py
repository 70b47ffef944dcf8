"""Which pods `--source prometheus` reads as having no GPU collector (their GPU `absent` in /debug), told apart as
the scrape source tells them: an exporter that lists its ModelMesh collector's success and no GPU collector's ran
with `--no-gpu`; one whose GPU collector fails (`collector_success{collector="gpu"} 0`, a default exporter on a CPU
node) has one, and so may an older exporter that lists no collectors at all. The whole path, from exporters to
/debug, is tests/e2e/test_prometheus_no_gpu_collector_e2e.py."""

from __future__ import annotations

import pytest

from autoscaler.sources.prometheus import PrometheusSource
from exporter import names
from tests.fakes.prometheus import Sample
from tests.sources.conftest import StartPrometheus
from tests.sources.static_discovery import StaticDiscovery
from tests.sources.test_prometheus_source import AGE_S, TRITON, exporter_series, signals

pytestmark = pytest.mark.slow


def listed(pod: str, collector: str, success: float, at: float) -> Sample:
    labels = {"namespace": TRITON.namespace, "pod": pod, "job": "modelmesh-exporter", "instance": f"{pod}:9187",
              "collector": collector}
    return Sample(names.COLLECTOR_SUCCESS, labels, success, at)


async def test_only_an_exporter_listing_no_gpu_collector_has_none(
        start_prometheus: StartPrometheus, sources: list[PrometheusSource], now: float) -> None:
    at = now - AGE_S
    values = signals(10, 0.01, 0.1, 0.5, 2)
    prom = await start_prometheus([
        *exporter_series(TRITON.namespace, "no-gpu", at, values, last_success=at),
        listed("no-gpu", names.COLLECTOR_MODELMESH, 1, at),
        *exporter_series(TRITON.namespace, "failing-gpu", at, values, last_success=at),
        listed("failing-gpu", names.COLLECTOR_MODELMESH, 1, at), listed("failing-gpu", names.COLLECTOR_GPU, 0, at),
        *exporter_series(TRITON.namespace, "older", at, values, last_success=at),
    ])
    source = PrometheusSource(StaticDiscovery.of(
        {(TRITON.namespace, TRITON.deployment): ["no-gpu", "failing-gpu", "older"]}), prom.url)
    sources.append(source)

    [snapshot] = await source.collect(now)

    assert {pod.name: pod.no_gpu_collector for pod in snapshot.pods} == {
        "no-gpu": True, "failing-gpu": False, "older": False}
    assert all(pod.requests_per_second == 10 for pod in snapshot.pods)  # their load read as ever
