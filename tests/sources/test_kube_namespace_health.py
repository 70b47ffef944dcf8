"""Discovery's health per namespace: one namespace's reads refused holds that namespace's runtimes, not the fleet's.

With `--namespaces a,b`, namespace b's RoleBinding missing (RBAC's 403 on its pods or its Deployments) made
`healthy` False for the whole inventory, and every runtime of every namespace was served `source_ok=False`: no
scale-down anywhere. Now `healthy_for(namespace)` is False only for the namespace whose reads fail, or for all
of them when a read of all namespaces fails; both sources (scrape, Prometheus) hold exactly those runtimes, and
say why in their /debug problems. The real `kubernetes.aio` client runs against the fake Kubernetes API.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from kubernetes.aio.client import Configuration
from pytest_aiohttp import AiohttpServer

from autoscaler.model import RuntimeKey
from autoscaler.names import DELETION_COST_ANNOTATION
from autoscaler.source_problems import REASON_DISCOVERY
from autoscaler.sources.kube_pods import KubePodDiscovery
from autoscaler.sources.prometheus import PrometheusSource
from autoscaler.sources.scrape import ScrapeSource
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

MINE = RuntimeKey("team-a", "modelmesh-serving-triton")
THEIRS = RuntimeKey("team-b", "modelmesh-serving-triton")


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        for key in (MINE, THEIRS):
            server.add_modelmesh_runtime(key.namespace, key.deployment, replicas=1, ready_pods=0)  # nothing to scrape
        yield server


def discovery(kube: FakeKubeApi, **options: Any) -> KubePodDiscovery:
    settings = Configuration()
    settings.host = kube.url
    defaults: dict[str, Any] = {"namespaces": [MINE.namespace, THEIRS.namespace], "resync_interval_s": 0.1,
                                "request_timeout_s": 2.0, "watch_timeout_s": 30, "backoff_initial_s": 0.02,
                                "backoff_max_s": 0.1}
    return KubePodDiscovery(settings, **{**defaults, **options})


@pytest.fixture
async def running(kube: FakeKubeApi) -> AsyncIterator[KubePodDiscovery]:
    subject = discovery(kube)
    await subject.start()
    await eventually(lambda: subject.healthy)
    yield subject
    await subject.close()


def refuse_pods(kube: FakeKubeApi, namespace: str | None) -> None:
    """RBAC refuses the pods' list and watch in `namespace` (None: across all) from now on, as when its
    RoleBinding is deleted; the open watches end, as they do at their timeout, and are asked for again."""
    kube.forbid("list", "pods", namespace)
    kube.forbid("watch", "pods", namespace)
    kube.end_watches()


async def source_ok(subject: KubePodDiscovery) -> dict[RuntimeKey, bool]:
    """What the scrape source serves each runtime as: held (False) or not."""
    source = ScrapeSource(subject, timeout_s=0.5)
    try:
        return {snapshot.key: snapshot.source_ok for snapshot in await source.collect(0.0)}
    finally:
        await source.close()


async def test_a_namespace_whose_pods_are_refused_holds_only_its_runtimes(
        kube: FakeKubeApi, running: KubePodDiscovery) -> None:
    refuse_pods(kube, THEIRS.namespace)
    await eventually(lambda: not running.healthy_for(THEIRS.namespace))

    assert running.healthy_for(MINE.namespace) and not running.healthy
    assert await source_ok(running) == {MINE: True, THEIRS: False}
    assert running.scope_health() == {MINE.namespace: True, THEIRS.namespace: False}
    [(namespace, error)] = running.problems
    assert namespace == THEIRS.namespace and 'cannot watch resource "pods"' in error, error

    kube.clear_faults()  # the RoleBinding applied: b is watched again
    await eventually(lambda: running.healthy)
    assert await source_ok(running) == {MINE: True, THEIRS: True}


async def test_a_namespace_whose_deployments_are_refused_holds_only_its_runtimes_as_last_read(
        kube: FakeKubeApi, running: KubePodDiscovery, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="autoscaler.sources.kube_pods")
    kube.forbid("list", "deployments", THEIRS.namespace)
    await eventually(lambda: not running.healthy_for(THEIRS.namespace))
    # What its runtimes get said as it is: every value 503, the HPA holding (it said they held their values).
    [line] = [said for record in caplog.records if "cannot read runtime Deployments" in (said := record.getMessage())]
    assert line.startswith(f"Kubernetes discovery: cannot read runtime Deployments in namespace {THEIRS.namespace}, "
                           "keeping its runtimes as last read; they are unknown (503) until it recovers, the HPA "
                           "holding their replicas (no scale-up, no scale-down): "), line
    kube.set_replicas(MINE.namespace, MINE.deployment, 3)
    kube.set_replicas(THEIRS.namespace, THEIRS.deployment, 3)

    # team-a's Deployment is read as before; team-b's runtime stays as last read, held.
    await eventually(lambda: running.inventory()[MINE].replicas == 3)
    assert running.inventory()[THEIRS].replicas == 1
    assert running.healthy_for(MINE.namespace)
    assert await source_ok(running) == {MINE: True, THEIRS: False}
    [(namespace, error)] = running.problems
    assert namespace == THEIRS.namespace and 'cannot list resource "deployments"' in error, error

    kube.clear_faults()
    await eventually(lambda: running.healthy and running.inventory()[THEIRS].replicas == 3)


async def test_a_refused_namespace_is_in_its_runtimes_debug_and_no_other(
        kube: FakeKubeApi, running: KubePodDiscovery) -> None:
    refuse_pods(kube, THEIRS.namespace)
    await eventually(lambda: not running.healthy_for(THEIRS.namespace))
    source = ScrapeSource(running, timeout_s=0.5)
    try:
        await source.collect(0.0)
        mine, theirs = source.problems(MINE), source.problems(THEIRS)
    finally:
        await source.close()

    assert [p for p in mine if p.reason == REASON_DISCOVERY] == []
    [problem] = [p for p in theirs if p.reason == REASON_DISCOVERY]
    assert f'resource "pods" in API group "" in the namespace "{THEIRS.namespace}"' in problem.detail, problem
    assert problem.since == 0.0, problem


async def test_a_failing_watch_of_all_namespaces_holds_every_runtime(kube: FakeKubeApi) -> None:
    subject = discovery(kube, namespaces=None)
    await subject.start()
    try:
        await eventually(lambda: subject.healthy)
        refuse_pods(kube, None)
        await eventually(lambda: not subject.healthy_for(MINE.namespace))

        assert not subject.healthy_for(THEIRS.namespace)
        assert await source_ok(subject) == {MINE: False, THEIRS: False}
        assert subject.scope_health() == {"*": False}  # modelmesh_autoscaler_discovery_healthy{namespace="*"}
    finally:
        await subject.close()


async def test_the_prometheus_source_holds_only_the_refused_namespaces_runtimes(
        kube: FakeKubeApi, running: KubePodDiscovery, aiohttp_server: AiohttpServer) -> None:
    async def empty(request: web.Request) -> web.Response:  # no Ready pod anywhere: nothing to answer, no outage
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": []}})

    prometheus = web.Application()
    prometheus.router.add_get("/api/v1/query", empty)
    server = await aiohttp_server(prometheus)
    refuse_pods(kube, THEIRS.namespace)
    await eventually(lambda: not running.healthy_for(THEIRS.namespace))
    source = PrometheusSource(running, str(server.make_url("")))
    try:
        held = {snapshot.key: snapshot.source_ok for snapshot in await source.collect(0.0)}
        problems = {key: [p.reason for p in source.problems(key)] for key in (MINE, THEIRS)}
    finally:
        await source.close()

    assert held == {MINE: True, THEIRS: False}
    assert problems == {MINE: [], THEIRS: [REASON_DISCOVERY]}


@pytest.mark.parametrize("namespaces", [[MINE.namespace, THEIRS.namespace], None], ids=["listed", "all"])
async def test_each_pod_is_looked_up_in_the_watch_that_sees_its_namespace(
        kube: FakeKubeApi, namespaces: list[str] | None) -> None:
    """The deletion-cost writer reads each pod's cost and uid through discovery: with one watch per namespace
    each pod is found in its own namespace's, with a watch of all namespaces in that one; a pod of a namespace
    not listed is not watched, and reads as nothing."""
    labels = {"modelmesh-service": "modelmesh-serving", "name": MINE.deployment}
    for namespace, cost in ((MINE.namespace, "10"), (THEIRS.namespace, "20"), ("team-c", "30")):
        kube.add_pod(namespace, "costed", labels=labels, annotations={DELETION_COST_ANNOTATION: cost})
    subject = discovery(kube, namespaces=namespaces)
    await subject.start()
    try:
        await eventually(lambda: subject.healthy and subject.pod_uid(THEIRS.namespace, "costed") is not None)
        seen = {namespace: (subject.deletion_cost(namespace, "costed"), subject.pod_uid(namespace, "costed"))
                for namespace in (MINE.namespace, THEIRS.namespace, "team-c")}
        missing = subject.deletion_cost(MINE.namespace, "no-such-pod"), subject.pod_uid(MINE.namespace, "no-such-pod")
    finally:
        await subject.close()

    def cluster(namespace: str) -> tuple[str, str]:
        pod: dict[str, Any] = kube.get("pods", namespace, "costed") or {}
        return pod["metadata"]["annotations"][DELETION_COST_ANNOTATION], pod["metadata"]["uid"]

    watched = (MINE.namespace, THEIRS.namespace) if namespaces else (MINE.namespace, THEIRS.namespace, "team-c")
    assert seen == {namespace: cluster(namespace) if namespace in watched else (None, None) for namespace in seen}
    assert missing == (None, None)
