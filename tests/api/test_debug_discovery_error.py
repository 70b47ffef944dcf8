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


async def test_debug_names_the_deployment_read_that_rbac_refuses(kube: FakeKubeApi,
                                                                 aiohttp_client: ClientFactory) -> None:
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
        kube.fail("/deployments", 403, times=None, message='deployments.apps "modelmesh-serving-triton" is '
                  'forbidden: User "system:serviceaccount:x:y" cannot get resource "deployments"')
        await eventually(lambda: not discovery.healthy)
        await refresher.refresh_once()
        async with client.get(f"/debug/runtimes/{NS}/{KEY.deployment}") as response:
            document = await response.json()
        [problem] = [p for p in document["source"]["problems"] if p["reason"] == "discovery"]
        assert "cannot read runtime Deployments" in problem["detail"], problem
        assert 'cannot get resource "deployments"' in problem["detail"], problem
    finally:
        await source.close()
        await discovery.close()
