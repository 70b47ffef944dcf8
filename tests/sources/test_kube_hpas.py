"""HpaWatch against the fake Kubernetes API: which HPA scales which runtime, and its bounds kept current."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
from kubernetes.aio.client import ApiClient, Configuration

from autoscaler.model import RuntimeKey
from autoscaler.sources.kube_hpas import HpaWatch, parse_hpa
from tests.fakes.kube import FakeKubeApi

NS = "modelmesh-serving"
TRITON = RuntimeKey(NS, "modelmesh-serving-triton")
OVMS = RuntimeKey(NS, "modelmesh-serving-ovms")


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        yield server


@pytest.fixture
async def watch(kube: FakeKubeApi) -> AsyncIterator[HpaWatch]:
    settings = Configuration()
    settings.host = kube.url
    subject = HpaWatch(lambda: ApiClient(settings), [NS], watch_timeout_s=30,
                       backoff=lambda n: 0.02)
    await subject.start()
    yield subject
    await subject.close()


async def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


async def test_bounds_follow_the_hpa_that_targets_the_deployment(kube: FakeKubeApi, watch: HpaWatch) -> None:
    kube.add_hpa(NS, "triton", min_replicas=2, max_replicas=100, target=("Deployment", TRITON.deployment))
    await eventually(lambda: watch.bounds(TRITON) == (2, 100))
    assert watch.ok
    kube.set_hpa_bounds(NS, "triton", max_replicas=40)
    await eventually(lambda: watch.bounds(TRITON) == (2, 40))
    kube.delete_object("horizontalpodautoscalers", NS, "triton")
    await eventually(lambda: watch.bounds(TRITON) == (None, None))


async def test_an_hpa_is_matched_by_runtime_scale_or_by_metric_selector(kube: FakeKubeApi, watch: HpaWatch) -> None:
    kube.add_hpa(NS, "by-scale", max_replicas=8, target=("RuntimeScale", "triton"))
    kube.add_hpa(NS, "by-selector", max_replicas=12, target=("RuntimeScale", "other"),
                 metric_selector={"servingruntime": "ovms"})
    await eventually(lambda: watch.bounds(TRITON) == (1, 8) and watch.bounds(OVMS) == (1, 12))


async def test_an_hpa_listed_before_the_watch_started_is_found(kube: FakeKubeApi) -> None:
    kube.add_hpa(NS, "early", max_replicas=5, metric_selector={"deployment": TRITON.deployment})
    settings = Configuration()
    settings.host = kube.url
    subject = HpaWatch(lambda: ApiClient(settings), [NS])
    await subject.start()
    try:
        await eventually(lambda: subject.bounds(TRITON)[1] == 5)
    finally:
        await subject.close()


@pytest.mark.parametrize(
    ("spec", "bounds"),
    [
        ({"maxReplicas": 10, "scaleTargetRef": {"kind": "Deployment", "name": "d"}}, (1, 10)),
        ({"minReplicas": 3, "maxReplicas": 10, "scaleTargetRef": {"kind": "Deployment", "name": "d"}}, (3, 10)),
        ({"maxReplicas": 0, "scaleTargetRef": {"kind": "Deployment", "name": "d"}}, None),
        ({"maxReplicas": "10", "scaleTargetRef": {"kind": "Deployment", "name": "d"}}, None),
        ({"maxReplicas": 10, "scaleTargetRef": {"kind": "StatefulSet", "name": "d"}}, None),
    ],
    ids=["min_defaults_to_one", "both", "zero_max_is_malformed", "string_max_is_malformed", "not_a_runtime"],
)
def test_parse_hpa(spec: dict[str, object], bounds: tuple[int, int] | None) -> None:
    parsed = parse_hpa({"metadata": {"namespace": NS, "name": "h"}, "spec": spec})
    assert (None if parsed is None else (parsed.min_replicas, parsed.max_replicas)) == bounds
