"""/debug names what keeps pod discovery out of date, in the Kubernetes API's words: a ClusterRole without
`list` on Deployments, a pod watch refused. Before, the `discovery` problem said only "the adapter's log has
its error", and the one WARNING that had it was logged when the outage began."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from kubernetes.aio.client import Configuration

from autoscaler.api.app import build_api_app
from autoscaler.model import RuntimeKey
from autoscaler.policies.config import PolicyBook
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.kube_pods import KubePodDiscovery
from autoscaler.sources.scrape import ScrapeSource
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

NS = "modelmesh-serving"
KEY = RuntimeKey(NS, "modelmesh-serving-triton")
ClientFactory = Callable[..., Awaitable[TestClient[Any, Any]]]


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        yield server


async def discovery_problem(kube: FakeKubeApi, aiohttp_client: ClientFactory, status: int, message: str) -> str:
    """The `discovery` problem /debug shows once the runtime's Deployment read is answered `status`, `message`."""
    kube.add_modelmesh_runtime(NS, KEY.deployment, replicas=1)
    settings = Configuration()
    settings.host = kube.url
    discovery = KubePodDiscovery(settings, runtimes=[KEY], discover=False, request_timeout_s=2.0,
                                 resync_interval_s=0.2, backoff_initial_s=0.02, backoff_max_s=0.1)
    source = ScrapeSource(discovery)
    refresher = Refresher(source, PolicyBook(), AdapterMetrics())
    client = await aiohttp_client(build_api_app(refresher, refresher.metrics))
    try:
        await discovery.start()
        await eventually(lambda: discovery.healthy)
        kube.fail("/deployments", status, times=None, message=message)
        await eventually(lambda: not discovery.healthy)
        await refresher.refresh_once()
        async with client.get(f"/debug/runtimes/{NS}/{KEY.deployment}") as response:
            document = await response.json()
        [problem] = [p for p in document["source"]["problems"] if p["reason"] == "discovery"]
        detail: str = problem["detail"]
        return detail
    finally:
        await source.close()
        await discovery.close()


async def test_debug_names_the_deployment_read_that_rbac_refuses(kube: FakeKubeApi,
                                                                 aiohttp_client: ClientFactory) -> None:
    detail = await discovery_problem(kube, aiohttp_client, 403, 'deployments.apps "modelmesh-serving-triton" is '
                                     'forbidden: User "system:serviceaccount:x:y" cannot get resource "deployments"')
    assert "cannot read runtime Deployments" in detail, detail
    assert 'cannot get resource "deployments"' in detail, detail


async def test_debug_tells_a_kubernetes_error_message_bounded_and_readable(kube: FakeKubeApi,
                                                                           aiohttp_client: ClientFactory) -> None:
    """What answers for the Kubernetes API (an aggregated API, a proxy, a webhook's words) may say anything in a
    Status's message: /debug said 100 KB of it whole, terminal escapes and line breaks included."""
    hostile = "\x1b[31mred\x1b[0m\r\nFAKE adapter LOG LINE\x00" + "m" * 100_000
    detail = await discovery_problem(kube, aiohttp_client, 500, hostile)
    assert "cannot read runtime Deployments" in detail, detail[:300]
    assert len(detail) < 2000 and detail.isprintable(), detail[:300]
    assert "\\x1b[31mred" in detail, detail[:300]  # said, escaped
