"""A Prometheus that names the exporters' namespace and pod otherwise (the classic `kubernetes_sd_configs`
relabelling's `kubernetes_namespace` and `kubernetes_pod_name`), read without the flags that say so.

Every query then collapses all pods into one series without those labels, which the reader dropped unseen, so
the outage line said "no ... series for any of 5 known pods (0 series with other namespace/pod labels): is
Prometheus scraping the exporters ...?": it sent the operator after the scraping, which works, when the fix is
the two label flags. The line must say the series are there without the labels.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from autoscaler import cli
from autoscaler.serve_args import settings_from_args
from autoscaler.server import build_source
from exporter import names
from tests.fakes.prometheus import PrometheusServer, Sample
from tests.sources.conftest import StartPrometheus
from tests.sources.test_prometheus_source import cluster_samples, discovery
from tests.support.exporter_texts import load_lines


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


@pytest.mark.slow
async def test_the_label_advice_reaches_the_log_once_when_series_come_after_an_empty_start(
    aiohttp_server: AiohttpServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The adapter started before Prometheus's first scrape: its one line said `failed (empty): ... (0 series with
    other namespace/pod labels)`, and once series came with the classic `kubernetes_pod_name` labels only /debug
    gave the fix (the two label flags); the log never did. It says it once when it becomes true, not at every
    refresh."""
    page: list[str] = []  # the exporter's page: nothing until Prometheus is to have series

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(text="\n".join(page) + "\n") if page else web.Response(status=503)

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    exporter = await aiohttp_server(app)
    target = f"127.0.0.1:{exporter.port}"
    labels = {target: {"kubernetes_namespace": "team-a", "kubernetes_pod_name": "a-1"}}
    async with PrometheusServer([target], scrape_interval="1s", target_labels=labels) as prom:
        args = cli.build_parser().parse_args(["serve", "--source", "prometheus", "--prometheus-url", prom.url])
        source = build_source(settings_from_args(args, {}), discovery())
        try:
            with caplog.at_level(logging.WARNING, logger="autoscaler.sources.prometheus"):
                await source.collect(time.time())
                page.extend(load_lines(time.time()))
                async with asyncio.timeout(30):
                    while not await prom.query(names.REQUESTS_PER_SECOND):
                        await asyncio.sleep(0.2)
                for _ in range(3):
                    await source.collect(time.time())
        finally:
            await source.close()

    empty, advice = caplog.messages
    assert "0 series with other namespace/pod labels" in empty, empty
    assert "without a namespace or pod label" in advice, advice
    assert "--prometheus-namespace-label" in advice and "--prometheus-pod-label" in advice, advice
