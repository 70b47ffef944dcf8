"""What the handlers serve from the refresh loop's cache: external metrics, KEDA values, the explanation."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from autoscaler.api.app import build_api_app
from autoscaler.api.debug_document import explanation, jsonable
from autoscaler.api.runtimes import keda_values
from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot, ServedValue
from autoscaler.names import ServedMetric
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from tests.api.builders import KEY, NOW, refresher_with, runtime_view

STALE = RuntimeKey(KEY.namespace, "modelmesh-serving-stale")
Client = TestClient[Any, Any]
ClientFactory = Callable[..., Awaitable[Client]]


@pytest.fixture
async def client(aiohttp_client: ClientFactory) -> Client:
    refresher = refresher_with(runtime_view(KEY), runtime_view(STALE, fresh=False))
    return await aiohttp_client(build_api_app(refresher, refresher.metrics))


async def get(client: Client, path: str) -> tuple[int, Any]:
    async with client.get(path) as response:
        return response.status, await response.json()


def metric_url(metric: str, deployment: str = KEY.deployment, namespace: str = KEY.namespace) -> str:
    return (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric}"
            f"?labelSelector=deployment={deployment}")


@pytest.mark.parametrize("metric", list(ServedMetric))
async def test_every_metric_is_served_as_a_milli_quantity(client: Client, metric: ServedMetric) -> None:
    status, body = await get(client, metric_url(metric.value.upper()))
    assert status == 200
    [item] = body["items"]
    assert item["metricName"] == metric.value
    assert item["value"].endswith("m") and int(item["value"][:-1]) >= 0
    assert item["metricLabels"] == {"deployment": KEY.deployment, "servingruntime": "triton"}
    assert item["window"] == 30


@pytest.mark.parametrize(
    ("path", "code", "reason"),
    [
        (metric_url("modelmesh_gpu_busy", STALE.deployment), 503, "ServiceUnavailable"),
        (metric_url("nope"), 404, "NotFound"),
        (metric_url("modelmesh_gpu_busy", "unknown"), 404, "NotFound"),
        (metric_url("modelmesh_gpu_busy").split("?")[0], 400, "BadRequest"),
        (f"/keda/v1/namespaces/{STALE.namespace}/runtimes/{STALE.deployment}", 503, "ServiceUnavailable"),
        (f"/keda/v1/namespaces/{KEY.namespace}/runtimes/unknown", 404, "NotFound"),
        ("/debug/runtimes/ml/unknown", 404, "NotFound"),
        ("/no/such/path", 404, "NotFound"),
    ],
    ids=["stale", "unknown metric", "unknown runtime", "no selector", "keda stale", "keda unknown",
         "debug unknown", "no route"],
)
async def test_errors_are_statuses(client: Client, path: str, code: int, reason: str) -> None:
    status, body = await get(client, path)
    assert status == code
    assert (body["kind"], body["code"], body["reason"]) == ("Status", code, reason)


async def test_before_the_first_refresh_every_runtime_is_503(aiohttp_client: ClientFactory) -> None:
    refresher = refresher_with(ready=False)
    client = await aiohttp_client(build_api_app(refresher, refresher.metrics))
    assert (await get(client, metric_url("modelmesh_gpu_busy")))[0] == 503
    assert (await client.get("/readyz")).status == 503


async def test_keda_gets_the_same_numbers_as_the_hpa(client: Client) -> None:
    status, body = await get(client, f"/keda/v1/namespaces/{KEY.namespace}/runtimes/{KEY.deployment}")
    assert status == 200
    for metric in ServedMetric:
        _, hpa = await get(client, metric_url(metric.value))
        assert body[metric.value] == int(hpa["items"][0]["value"][:-1]) / 1000
    assert body["namespace"] == KEY.namespace and body["deployment"] == KEY.deployment
    assert body["timestamp"].endswith("Z")
    assert body["window"] == 30


def test_keda_values_are_null_where_one_metric_is_unknown() -> None:
    view = runtime_view()
    view = dataclasses.replace(view, values={**view.values, ServedMetric.GPU_BUSY: ServedValue(None, None, None)})
    document, oldest = keda_values(view)
    assert document["modelmesh_gpu_busy"] is None
    assert document["modelmesh_desired_replicas"] is not None
    assert oldest is not None


async def test_the_explanation_shows_pods_proposals_and_winner(client: Client) -> None:
    status, body = await get(client, f"/debug/runtimes/{KEY.namespace}/{KEY.deployment}")
    assert status == 200
    assert body["key"] == {"namespace": KEY.namespace, "deployment": KEY.deployment}
    assert body["known"] is True and body["ready_pods"] == 3 and body["fresh_pods"] == 3
    assert set(body["values"]) == {m.value for m in ServedMetric}
    assert body["winner"] in body["proposals"]
    hottest = max(body["pods"], key=lambda pod: pod["gpu_busy"])
    assert set(hottest) >= {"name", "ready", "fresh", "age_s", "weight", "need", "deletion_cost"}
    assert body["refreshed"].endswith("Z")


def test_the_explanation_shows_per_pod_signals_holds_and_the_no_capacity_warning() -> None:
    def cpu_pods(now: float, hot_rate: float | None) -> tuple[PodSample, ...]:
        return (
            PodSample("cpu-0", sampled_at=now - 1, requests_per_second=hot_rate, queue_delay_s=0.3),
            PodSample("cpu-1", sampled_at=now - 1, requests_per_second=5.0, queue_delay_s=0.0),
        )

    _, memory = decide(RuntimeSnapshot(KEY, cpu_pods(NOW, 50.0), NOW), RuntimePolicy(), None, NOW, 30.0)
    view, _ = decide(RuntimeSnapshot(KEY, cpu_pods(NOW + 15, None), NOW + 15), RuntimePolicy(), memory,
                     NOW + 15, 30.0)
    body = explanation(view)
    assert body["pods"][0]["signals"] == {"gpu": "none", "requests": "missing", "queue": "fresh", "cache": "none"}
    assert body["signal_coverage"] == {"requests": 0.5, "queue": 1.0}
    assert any("target_rps_per_pod" in warning for warning in body["warnings"])
    assert body["proposals"]["ready_pods"] == 2  # the CPU runtime keeps its Ready pods


async def test_the_explanation_is_served_while_values_are_unknown(client: Client) -> None:
    status, body = await get(client, f"/debug/runtimes/{STALE.namespace}/{STALE.deployment}")
    assert status == 200
    assert body["known"] is False and body["reason"]


def test_non_finite_numbers_become_null() -> None:
    assert jsonable({"a": float("nan"), "b": (1.0, float("inf"))}) == {"a": None, "b": [1.0, None]}
    assert explanation(runtime_view(now=NOW))["refreshed"] == "2023-11-14T22:13:20Z"


async def test_a_new_refresh_is_served_at_once_not_a_cached_answer(aiohttp_client: ClientFactory) -> None:
    refresher = refresher_with(runtime_view(KEY))
    client = await aiohttp_client(build_api_app(refresher, refresher.metrics))
    _, before = await get(client, metric_url(ServedMetric.REQUEST_LOAD.value))
    old = refresher.views[KEY]
    served = old.values[ServedMetric.REQUEST_LOAD]
    refresher.views = {KEY: dataclasses.replace(old, values={
        **old.values, ServedMetric.REQUEST_LOAD: dataclasses.replace(served, value=(served.value or 0) + 1)})}
    _, after = await get(client, metric_url(ServedMetric.REQUEST_LOAD.value))
    assert int(after["items"][0]["value"][:-1]) == int(before["items"][0]["value"][:-1]) + 1000


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
@pytest.mark.parametrize("path", [metric_url("modelmesh_gpu_busy"), "/apis", "/metrics"])
async def test_a_method_not_allowed_is_a_405_status_that_names_the_allowed_ones(
        client: Client, method: str, path: str) -> None:
    """RFC 9110 (15.5.6): a 405 must carry `Allow`, as go-restful's does."""
    async with client.request(method, path) as response:
        assert response.status == 405
        assert set(response.headers["Allow"].split(",")) == {"GET", "HEAD"}
        body = await response.json()
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "MethodNotAllowed", 405)
