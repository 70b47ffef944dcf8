"""The freshness histogram (`modelmesh_autoscaler_metric_freshness_seconds`): the age of the values behind every
answer that serves some, observed once per such answer (a guard for any change to how the serving path
counts: observing it with the request's count in one tally call was tried, docs/performance.md). Every value
of `runtime_view` was sampled 5 s before the refresh that decided it, so each answer served adds one
observation of 5 s, plus the time since that refresh; an answer that serves no value (a 404, the 503 of an
unknown runtime, discovery) adds none."""

from __future__ import annotations

import time

import pytest
from pytest_aiohttp import AiohttpClient

from autoscaler.api.app import build_api_app
from autoscaler.api.render import render_snapshot
from autoscaler.api.snapshot import SnapshotHolder
from autoscaler.model import RuntimeKey
from autoscaler.names import ServedMetric
from autoscaler.selfmetrics import AdapterMetrics
from tests.api.builders import KEY, refresher_with, runtime_view

FRESHNESS = "modelmesh_autoscaler_metric_freshness_seconds"
STALE = RuntimeKey(KEY.namespace, "modelmesh-serving-stale")


def metric_path(metric: ServedMetric, deployment: str = KEY.deployment) -> str:
    return (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{KEY.namespace}/{metric.value}"
            f"?labelSelector=deployment%3D{deployment}")


async def test_each_answer_that_serves_values_observes_their_age_once(aiohttp_client: AiohttpClient) -> None:
    metrics = AdapterMetrics()
    app = build_api_app(refresher_with(runtime_view(), runtime_view(STALE, fresh=False), metrics=metrics), metrics)
    client = await aiohttp_client(app)
    statuses = []
    for metric in ServedMetric:
        statuses.append((await client.get(metric_path(metric))).status)
    statuses.append((await client.get(f"/keda/v1/namespaces/{KEY.namespace}/runtimes/{KEY.deployment}")).status)
    served = len(statuses)
    statuses.append((await client.get(metric_path(ServedMetric.DESIRED_REPLICAS, "not-there"))).status)
    statuses.append((await client.get(metric_path(ServedMetric.DESIRED_REPLICAS, STALE.deployment))).status)
    statuses.append((await client.get("/apis")).status)
    assert statuses == [200] * served + [404, 503, 200]
    metrics.tally.flush()
    assert metrics.registry.get_sample_value(f"{FRESHNESS}_count") == served
    assert (metrics.registry.get_sample_value(f"{FRESHNESS}_sum") or 0.0) >= 5.0 * served
    assert metrics.registry.get_sample_value(f"{FRESHNESS}_bucket", {"le": "1.0"}) == 0
    assert metrics.registry.get_sample_value(f"{FRESHNESS}_bucket", {"le": "10.0"}) == served


@pytest.mark.parametrize("mode", ["one process", "serving worker"])
async def test_the_age_observed_is_the_age_when_served_not_at_the_refresh(aiohttp_client: AiohttpClient,
                                                                          mode: str) -> None:
    """Values 5 s old at the refresh that decided them, served 20 s after it (late in a long refresh interval,
    or with refreshes stalled): the HPA acts on values 25 s old. The histogram said 5 s, so the freshness panel
    and ModelMeshAutoscalerStaleValues read a whole refresh interval (or a stall) younger than what was served."""
    metrics = AdapterMetrics()
    refresher = refresher_with(runtime_view(), metrics=metrics)
    if mode == "one process":
        app = build_api_app(refresher, metrics)
        refresher.refreshed_monotonic = time.monotonic() - 20.0  # the refresh ended 20 s ago
    else:
        holder = SnapshotHolder(render_snapshot(refresher.views, True))
        object.__setattr__(holder, "updated_at", time.monotonic() - 20.0)  # it arrived 20 s ago
        app = build_api_app(holder, metrics)
    client = await aiohttp_client(app)
    for path in (metric_path(ServedMetric.GPU_BUSY), f"/keda/v1/namespaces/{KEY.namespace}/runtimes/{KEY.deployment}"):
        assert (await client.get(path)).status == 200
    metrics.tally.flush()
    assert metrics.registry.get_sample_value(f"{FRESHNESS}_count") == 2
    assert metrics.registry.get_sample_value(f"{FRESHNESS}_bucket", {"le": "15.0"}) == 0
    assert (metrics.registry.get_sample_value(f"{FRESHNESS}_sum") or 0.0) >= 2 * 25.0
