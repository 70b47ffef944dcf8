"""A tenant allowed `runtimes/debug` only in its own namespace learns nothing of other namespaces from it.

A namespace's pod watch or Deployment read failing holds that namespace's runtimes (their values cannot fall on
stale knowledge), and their /debug says so in the Kubernetes API's words. It used to hold every namespace's, and
a tenant of team-a read `pod watch of namespace team-b failing: 403 ... in the namespace "team-b"`, another
tenant's namespace name and API error. Now team-a's runtime is not held for team-b's failure at all, so its /debug
and its answers name nothing of team-b; team-b's own /debug, and the log, keep the detail."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from kubernetes.aio.client import Configuration

from autoscaler.api.app import build_api_app
from autoscaler.api.auth import build_api_security
from autoscaler.model import RuntimeKey
from autoscaler.policies.config import PolicyBook
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.settings import ServeSettings
from autoscaler.sources.kube_pods import KubePodDiscovery
from autoscaler.sources.scrape import ScrapeSource
from tests.api.builders import Pki
from tests.api.conftest import guarded_site
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

MINE = RuntimeKey("team-a", "modelmesh-serving-triton")
THEIRS = RuntimeKey("team-b", "modelmesh-serving-secret")
TENANTS = {"alice-token": ("alice", MINE.namespace), "bob-token": ("bob", THEIRS.namespace)}


class Tenants:
    """The adapter's real API, discovery and scrape source over the fake cluster; each tenant's token is
    granted `get` (values, /debug) in its own namespace only."""

    def __init__(self, url: str, pki: Pki, discovery: KubePodDiscovery, refresher: Refresher) -> None:
        self.url, self.pki, self.discovery, self.refresher = url, pki, discovery, refresher

    async def get(self, path: str, token: str) -> tuple[int, Any]:
        connector = aiohttp.TCPConnector(ssl=self.pki.client_context())
        async with aiohttp.ClientSession(connector=connector) as session, \
                session.get(self.url + path, headers={"Authorization": f"Bearer {token}"}) as response:
            return response.status, json.loads(await response.read())


@pytest.fixture
async def tenants(kube: FakeKubeApi, pki: Pki, settings_for: Callable[..., ServeSettings]) -> AsyncIterator[Tenants]:
    for token, (user, namespace) in TENANTS.items():
        kube.tokens[token] = (user, [])
        kube.allow(user=user, verb="get", namespace=namespace)
    kube.add_modelmesh_runtime(MINE.namespace, MINE.deployment, replicas=1)
    kube.add_modelmesh_runtime(THEIRS.namespace, THEIRS.deployment, replicas=1)
    configuration = Configuration()
    configuration.host = kube.url
    configuration.api_key = {"BearerToken": "Bearer test-token"}  # the kubeconfig's: the fake refuses none
    discovery = KubePodDiscovery(configuration, namespaces=[MINE.namespace, THEIRS.namespace],
                                 request_timeout_s=2.0, watch_timeout_s=1, resync_interval_s=0.2,
                                 backoff_initial_s=0.02, backoff_max_s=0.1)
    source = ScrapeSource(discovery)
    metrics = AdapterMetrics()
    refresher = Refresher(source, PolicyBook(), metrics)
    tls = pki.server_context()
    security = await build_api_security(settings_for(), tls, metrics)
    try:
        async with guarded_site(build_api_app(refresher, metrics, security.gate), tls) as site:
            await discovery.start()
            await eventually(lambda: discovery.healthy)
            yield Tenants(f"https://127.0.0.1:{site.port}", pki, discovery, refresher)
    finally:
        await security.close()
        await source.close()
        await discovery.close()


def debug(key: RuntimeKey) -> str:
    return f"/debug/runtimes/{key.namespace}/{key.deployment}"


def metric(key: RuntimeKey) -> str:
    return (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{key.namespace}/modelmesh_desired_replicas"
            f"?labelSelector=deployment%3D{key.deployment}")


@pytest.mark.parametrize("resource", ["pods", "deployments"])
async def test_a_tenants_debug_names_no_other_namespaces_discovery_error(
        kube: FakeKubeApi, tenants: Tenants, resource: str) -> None:
    kube.forbid("get", resource, THEIRS.namespace)  # team-b's pod watch, or its Deployment list, refused
    await eventually(lambda: not tenants.discovery.healthy)
    await tenants.refresher.refresh_once()

    status, mine = await tenants.get(debug(MINE), "alice-token")
    assert status == 200, mine
    assert [p for p in mine["source"]["problems"] if p["reason"] == "discovery"] == [], mine["source"]
    assert THEIRS.namespace not in json.dumps(mine), mine
    status, answer = await tenants.get(metric(MINE), "alice-token")  # 503: its pod runs no exporter here
    assert "metric source down" not in answer["message"] and THEIRS.namespace not in answer["message"], answer

    status, theirs = await tenants.get(debug(THEIRS), "bob-token")  # team-b's own /debug keeps the detail
    [problem] = [p for p in theirs["source"]["problems"] if p["reason"] == "discovery"]
    assert f'in the namespace \\"{THEIRS.namespace}\\"' in json.dumps(problem), problem
    assert (await tenants.get(debug(THEIRS), "alice-token"))[0] == 403
