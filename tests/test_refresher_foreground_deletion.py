"""A runtime deleted by foreground cascading deletion (`kubectl delete --cascade=foreground`, Argo CD, Flux) is
not a runtime failing. kube-apiserver marks the Deployment (`metadata.deletionTimestamp`, `finalizers:
[foregroundDeletion]`) and keeps it readable while the garbage collector deletes its pods; only then is it
removed. Meanwhile the adapter read a Deployment asking for replicas with no pod Ready: a WARNING "0/0 ready
pods fresh; no ready pods; values unknown (503), HPA holds" for every runtime deleted so, and
`modelmesh_autoscaler_runtime_values_known` 0 for an object on its way out. Now it says "being deleted" at INFO,
and has no `values_known` series, as a runtime scaled to zero; the HPA still gets a 503.

Real parts: the fake Kubernetes API (which marks a Deployment deleted in the foreground as kube-apiserver does),
pod discovery, the scrape source and the refresher, and an exporter on a real socket.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from kubernetes.aio.client import Configuration
from pytest_aiohttp import AiohttpServer

from autoscaler.model import RuntimeKey
from autoscaler.policies.config import PolicyBook
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.kube_pods import KubePodDiscovery
from autoscaler.sources.scrape import ScrapeSource
from tests.fakes.kube import FakeKubeApi
from tests.support.fresh_exporter import exporter_port
from tests.support.waiting import eventually

NS = "modelmesh-serving"
TRITON = RuntimeKey(NS, "modelmesh-serving-triton")
VALUES_KNOWN = "modelmesh_autoscaler_runtime_values_known"


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        yield server


async def test_a_runtime_deleted_in_the_foreground_is_said_as_being_deleted_not_as_failing(
    kube: FakeKubeApi, aiohttp_server: AiohttpServer, caplog: pytest.LogCaptureFixture
) -> None:
    names = kube.add_modelmesh_runtime(NS, TRITON.deployment, replicas=1)
    kube.set_pod_ip(NS, names[0], "127.0.0.1")
    settings = Configuration()
    settings.host = kube.url
    discovery = KubePodDiscovery(settings, runtimes=[], discover=True, namespaces=[NS], resync_interval_s=3600.0,
                                 request_timeout_s=2.0, backoff_initial_s=0.02, backoff_max_s=0.1,
                                 exporter_port=await exporter_port(aiohttp_server))
    await discovery.start()
    metrics = AdapterMetrics()
    refresher = Refresher(ScrapeSource(discovery), PolicyBook(), metrics)
    labels = {"namespace": NS, "deployment": TRITON.deployment}
    try:
        await eventually(lambda: TRITON in discovery.inventory())
        await refresher.refresh_once()
        assert refresher.views[TRITON].known  # served
        assert metrics.registry.get_sample_value(VALUES_KNOWN, labels) == 1.0

        kube.delete_deployment(NS, TRITON.deployment, propagation="Foreground")
        for name in names:  # the garbage collector, dependents first
            kube.delete_pod(NS, name)
        await eventually(lambda: TRITON in discovery.inventory() and not discovery.inventory()[TRITON].pods
                         and discovery.inventory()[TRITON].deleting)
        caplog.set_level(logging.INFO)
        caplog.clear()
        await refresher.refresh_once()

        view = refresher.views[TRITON]
        assert not view.known  # the HPA gets a 503, as before (it is being deleted too, or holds)
        said = [(r.levelname, r.getMessage()) for r in caplog.records if str(TRITON) in r.getMessage()]
        assert said and all(level == "INFO" for level, _ in said), said
        assert any("being deleted" in message for _, message in said), said
        assert metrics.registry.get_sample_value(VALUES_KNOWN, labels) is None
    finally:
        await refresher.source.close()
        await discovery.close()
