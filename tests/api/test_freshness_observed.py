"""The freshness histogram (`modelmesh_autoscaler_metric_freshness_seconds`): the age of the values behind every
answer that serves some, observed once per such answer (a guard for any change to how the serving path
counts: observing it with the request's count in one tally call was tried, docs/performance.md). Every value
of `runtime_view` was sampled 5 s before the refresh that decided it, so each answer served adds one
observation of 5 s; an answer that serves no value (a 404, the 503 of an unknown runtime, discovery) adds
none."""

from __future__ import annotations

from pytest_aiohttp import AiohttpClient

from autoscaler.api.app import build_api_app
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
    assert metrics.registry.get_sample_value(f"{FRESHNESS}_sum") == 5.0 * served
    assert metrics.registry.get_sample_value(f"{FRESHNESS}_bucket", {"le": "1.0"}) == 0
    assert metrics.registry.get_sample_value(f"{FRESHNESS}_bucket", {"le": "5.0"}) == served
