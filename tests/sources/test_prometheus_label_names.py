"""A Prometheus that names the exporters' namespace and pod otherwise (the classic `kubernetes_sd_configs`
relabelling's `kubernetes_namespace` and `kubernetes_pod_name`), read without the flags that say so.

Every query then collapses all pods into one series without those labels, which the reader dropped unseen, so
the outage line said "no ... series for any of 5 known pods (0 series with other namespace/pod labels): is
Prometheus scraping the exporters ...?": it sent the operator after the scraping, which works, when the fix is
the two label flags. The line must say the series are there without the labels.
"""

from __future__ import annotations

import logging

import pytest

from autoscaler import cli
from autoscaler.server import build_source
from autoscaler.settings import settings_from_args
from tests.fakes.prometheus import Sample
from tests.sources.conftest import StartPrometheus
from tests.sources.test_prometheus_source import cluster_samples, discovery


async def test_series_without_the_namespace_and_pod_labels_are_said_to_lack_them(
    start_prometheus: StartPrometheus, now: float, caplog: pytest.LogCaptureFixture
) -> None:
    renamed = {"namespace": "kubernetes_namespace", "pod": "kubernetes_pod_name"}
    prom = await start_prometheus([
        Sample(sample.name, {renamed.get(key, key): value for key, value in sample.labels.items()}, sample.value,
               sample.timestamp)
        for sample in cluster_samples(now)
    ])
    args = cli.build_parser().parse_args(["serve", "--source", "prometheus", "--prometheus-url", prom.url])
    source = build_source(settings_from_args(args, {}), discovery())
    try:
        with caplog.at_level(logging.WARNING, logger="autoscaler.sources.prometheus"):
            snapshots = await source.collect(now)
    finally:
        await source.close()

    assert all(not s.source_ok for s in snapshots)
    (line,) = caplog.messages
    assert "without a namespace or pod label" in line, line
    assert "--prometheus-namespace-label" in line and "--prometheus-pod-label" in line, line
    assert "0 series" not in line, line
