"""A tenant allowed `runtimes/debug` only in its own namespace learns nothing of other namespaces from it.

A namespace's pod watch or Deployment read failing holds that namespace's runtimes (their values cannot fall on
stale knowledge), and their /debug says so in the Kubernetes API's words. It used to hold every namespace's, and
a tenant of team-a read `pod watch of namespace team-b failing: 403 ... in the namespace "team-b"`, another
tenant's namespace name and API error. Now team-a's runtime is not held for team-b's failure at all, so its /debug
and its answers name nothing of team-b; team-b's own /debug, and the log, keep the detail.

With `--source prometheus`, Prometheus's own error is the same for every runtime, and Prometheus writes the series
it is about into it: a 422 `found duplicate series for the match group {namespace="team-b", pod="..."} ...
[{model_id="..."}]` was copied word for word into every runtime's /debug, so team-a's tenant read team-b's pod and
model names there. A runtime is now told such an error with its label sets cut out; the log keeps it whole.

An IP goes to any namespace's next pod: the exporter that answers at a team-a pod's old address may be team-b's,
and says which pod it runs in. Its answer is refused (`other_pod`), and its words were in team-a's /debug and 503
(`answered for pod 'team-b/...'`), with either source. They now say the address answered for a pod of another
namespace, naming it only when it is of the runtime's own; the log names it."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from autoscaler.api.app import build_api_app
from autoscaler.api.auth import build_api_security
from autoscaler.model import RuntimeKey
from autoscaler.policies.config import PolicyBook
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.settings import ServeSettings
from autoscaler.sources.base import MetricSource
from autoscaler.sources.kube_pods import DEFAULT_EXPORTER_PORT, KubePodDiscovery
from autoscaler.sources.prometheus import PrometheusSource
from autoscaler.sources.scrape import ScrapeSource
from exporter import names
from exporter.pod_identity import PodIdentity
from tests.api.builders import Pki
from tests.api.conftest import guarded_site
from tests.fakes.kube import FakeKubeApi
from tests.fakes.prometheus import PrometheusServer, Sample, create_blocks, openmetrics_text
from tests.sources.test_prometheus_other_pod import pod_info
from tests.sources.test_prometheus_source import AGE_S, exporter_series, signals
from tests.sources.test_scrape_garbage import exposition
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


AiohttpServer = Callable[[web.Application], Awaitable[TestServer]]
SECRET_POD = f"{THEIRS.deployment}-5d9f7c-secretpod"
SECRET_MODEL = "confidential-model"
DUPLICATE_SERIES = {  # what Prometheus 2 answers a one-to-one match that finds two series of one pod
    "status": "error", "errorType": "execution",
    "error": f'found duplicate series for the match group {{namespace="{THEIRS.namespace}", pod="{SECRET_POD}"}} '
             f'on the right hand side of the operation: [{{model_id="{SECRET_MODEL}", namespace='
             f'"{THEIRS.namespace}", pod="{SECRET_POD}"}}, {{model_id="{SECRET_MODEL}-v2", namespace='
             f'"{THEIRS.namespace}", pod="{SECRET_POD}"}}];many-to-many matching not allowed: matching labels must '
             'be unique on one side'}


def runtimes(kube: FakeKubeApi) -> str:
    """Each tenant's runtime of one pod in the fake cluster, each tenant's token allowed in its namespace; the name
    of team-a's pod."""
    for token, (user, namespace) in TENANTS.items():
        kube.tokens[token] = (user, [])
        for verb in ("get", "list"):  # /debug is read as get, a metric as list (as kube-apiserver's RequestInfo)
            kube.allow(user=user, verb=verb, namespace=namespace)
    [pod] = kube.add_modelmesh_runtime(MINE.namespace, MINE.deployment, replicas=1)
    kube.add_modelmesh_runtime(THEIRS.namespace, THEIRS.deployment, replicas=1)
    return pod


@asynccontextmanager
async def serving(kube: FakeKubeApi, pki: Pki, settings: ServeSettings,
                  source_for: Callable[[KubePodDiscovery], MetricSource],
                  exporter_port: int = DEFAULT_EXPORTER_PORT) -> AsyncIterator[Tenants]:
    """The adapter over the fake cluster (`runtimes`) with the source `source_for` makes of its discovery."""
    discovery = KubePodDiscovery(kube.client_configuration(), namespaces=[MINE.namespace, THEIRS.namespace],
                                 request_timeout_s=2.0, watch_timeout_s=1, resync_interval_s=0.2,
                                 backoff_initial_s=0.02, backoff_max_s=0.1, exporter_port=exporter_port)
    source = source_for(discovery)
    metrics = AdapterMetrics()
    refresher = Refresher(source, PolicyBook(), metrics)
    tls = pki.server_context()
    security = await build_api_security(settings, tls, metrics)
    try:
        async with guarded_site(build_api_app(refresher, metrics, security.gate), tls) as site:
            await discovery.start()
            await eventually(lambda: discovery.healthy)
            yield Tenants(f"https://127.0.0.1:{site.port}", pki, discovery, refresher)
    finally:
        await security.close()
        await source.close()
        await discovery.close()


@pytest.fixture
async def tenants(kube: FakeKubeApi, pki: Pki, settings_for: Callable[..., ServeSettings]) -> AsyncIterator[Tenants]:
    runtimes(kube)
    async with serving(kube, pki, settings_for(), ScrapeSource) as served:
        yield served


@pytest.fixture
async def prometheus_tenants(kube: FakeKubeApi, pki: Pki, settings_for: Callable[..., ServeSettings],
                             aiohttp_server: AiohttpServer) -> AsyncIterator[Tenants]:
    """The adapter reading a Prometheus that answers every query with `DUPLICATE_SERIES`, an error about team-b's
    series."""
    async def refuse(request: web.Request) -> web.Response:
        return web.json_response(DUPLICATE_SERIES, status=422)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", refuse)
    prometheus = await aiohttp_server(app)
    url = f"http://127.0.0.1:{prometheus.port}"
    runtimes(kube)
    async with serving(kube, pki, settings_for(), lambda discovery: PrometheusSource(discovery, url)) as served:
        yield served


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


async def test_a_tenants_debug_names_nothing_of_other_namespaces_from_prometheus_s_error(
        prometheus_tenants: Tenants, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="autoscaler.sources.prometheus"):
        await prometheus_tenants.refresher.refresh_once()

    status, mine = await prometheus_tenants.get(debug(MINE), "alice-token")
    assert status == 200, mine
    [problem] = mine["source"]["problems"]
    assert problem["reason"] == "http" and problem["pod"] is None, problem
    assert "found duplicate series for the match group {…}" in problem["detail"], problem  # what failed, still
    assert "the adapter's log" in problem["detail"], problem
    for secret in (THEIRS.namespace, SECRET_POD, SECRET_MODEL):
        assert secret not in json.dumps(mine), (secret, mine)
    status, answer = await prometheus_tenants.get(metric(MINE), "alice-token")
    assert status == 503, answer
    assert all(secret not in answer["message"] for secret in (THEIRS.namespace, SECRET_POD, SECRET_MODEL)), answer
    assert SECRET_MODEL in caplog.text  # the operator's log keeps Prometheus's words whole


CLAIMED = {  # the pod the exporter at team-a's pod's address says it runs in, and whether team-a's /debug names it
    "another namespace's": (PodIdentity(THEIRS.namespace, SECRET_POD, "their-uid"), False),
    "one that gives no namespace": (PodIdentity(None, SECRET_POD, "their-uid"), False),
    "its own namespace's": (PodIdentity(MINE.namespace, f"{MINE.deployment}-7c4d9f-newpod", "new-uid"), True),
}


async def told_of_another_pod(tenants: Tenants, claimed: PodIdentity, named: bool, log: str) -> None:
    """team-a's tenant reads its runtime's `other_pod` problem (naming `claimed` only where `named`) and its 503
    (which quotes the problem, cut short), neither naming team-b's pod; the adapter's `log` names `claimed`."""
    status, mine = await tenants.get(debug(MINE), "alice-token")
    assert status == 200, mine
    [problem] = [p for p in mine["source"]["problems"] if p["reason"] == "other_pod"]
    status, answer = await tenants.get(metric(MINE), "alice-token")
    assert status == 503, answer
    shown = f"'{claimed}'"
    if named:
        assert f"pod {shown}" in problem["detail"], problem
    else:
        assert "the adapter's log names it" in problem["detail"], problem
        for secret in (THEIRS.namespace, SECRET_POD, "their-uid"):
            assert secret not in json.dumps(mine) and secret not in answer["message"], (secret, mine, answer)
    assert shown in log, log


@pytest.mark.parametrize("case", sorted(CLAIMED))
async def test_a_tenants_debug_names_the_pod_its_pods_address_answered_for_only_in_its_namespace(
        kube: FakeKubeApi, pki: Pki, settings_for: Callable[..., ServeSettings], aiohttp_server: AiohttpServer,
        caplog: pytest.LogCaptureFixture, case: str) -> None:
    claimed, named = CLAIMED[case]

    labels = ",".join(f'{label}="{value}"' for label, value in claimed.labels().items())

    async def exporter(request: web.Request) -> web.Response:
        return web.Response(text=exposition("40", 0.5) + f"{names.POD_INFO}{{{labels}}} 1\n")

    app = web.Application()
    app.router.add_get("/metrics", exporter)
    server = await aiohttp_server(app)
    assert server.port is not None
    kube.set_pod_ip(MINE.namespace, runtimes(kube), "127.0.0.1")  # its IP now another pod's, whose exporter answers
    async with serving(kube, pki, settings_for(), ScrapeSource, exporter_port=server.port) as tenants:
        with caplog.at_level(logging.WARNING, logger="autoscaler.sources.scrape"):
            await tenants.refresher.refresh_once()
        await told_of_another_pod(tenants, claimed, named, caplog.text)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CLAIMED))
async def test_a_tenants_debug_names_the_pod_prometheus_s_target_reached_only_in_its_namespace(
        kube: FakeKubeApi, pki: Pki, settings_for: Callable[..., ServeSettings], tmp_path: Path,
        caplog: pytest.LogCaptureFixture, case: str) -> None:
    """Prometheus's target for team-a's pod reached the exporter of the pod `claimed` (its `exported_namespace` and
    `exported_pod`, as the shipped scrape config keeps the exporter's labels)."""
    claimed, named = CLAIMED[case]
    pod, at = runtimes(kube), time.time() - AGE_S
    said = {f"exported_{label}": value for label, value in claimed.labels().items() if label != "uid"}
    samples: list[Sample] = [*exporter_series(MINE.namespace, pod, at, signals(40.0, 0.01, 0.1, 0.5, 2),
                                              last_success=at),
                             pod_info(pod, at, said, {"namespace": MINE.namespace, "pod": pod})]
    prometheus = PrometheusServer(tsdb_dir=create_blocks(openmetrics_text(samples), tmp_path / "tsdb"),
                                  workdir=tmp_path)
    await prometheus.start()
    try:
        async with serving(kube, pki, settings_for(),
                           lambda discovery: PrometheusSource(discovery, prometheus.url)) as tenants:
            with caplog.at_level(logging.WARNING, logger="autoscaler.sources.prometheus"):
                await tenants.refresher.refresh_once()
            await told_of_another_pod(tenants, PodIdentity(claimed.namespace, claimed.name), named, caplog.text)
    finally:
        await prometheus.close()
