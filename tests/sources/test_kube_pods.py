"""KubePodDiscovery against the fake Kubernetes API: list + watch keeps the inventory, failures mark it unhealthy.

Each test runs a real `kubernetes.aio` client against `FakeKubeApi` on port 0, with backoffs and resync
intervals shrunk so a whole outage-and-recovery fits in well under a second. Tests wait for conditions by
polling the inventory (`eventually`), never by sleeping a fixed time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.aio.client import ApiClient, Configuration

from autoscaler.model import RuntimeKey
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.kube_pods import (
    KubeApiError,
    KubePodDiscovery,
    kube_configuration,
    load_configuration,
)
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

NS = "modelmesh-serving"
TRITON = RuntimeKey(NS, "modelmesh-serving-triton")
LABELS = {"modelmesh-service": "modelmesh-serving", "name": TRITON.deployment}


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        yield server


def discovery(kube: FakeKubeApi, **options: Any) -> KubePodDiscovery:
    """Discovery tuned for tests: fast backoff and resync, short server-side watch timeout."""
    defaults: dict[str, Any] = {
        "runtimes": [TRITON],
        "discover": False,
        "resync_interval_s": 0.1,
        "request_timeout_s": 2.0,
        "watch_timeout_s": 30,
        "backoff_initial_s": 0.02,
        "backoff_max_s": 0.1,
    }
    return KubePodDiscovery(kube.client_configuration(), **{**defaults, **options})


@pytest.fixture
async def running(kube: FakeKubeApi) -> AsyncIterator[KubePodDiscovery]:
    subject = discovery(kube)
    await subject.start()
    await kube.wait_for_watches(1, "pods")
    yield subject
    await subject.close()


def pods(subject: KubePodDiscovery, key: RuntimeKey = TRITON) -> dict[str, PodTarget]:
    runtime = subject.inventory().get(key)
    return {} if runtime is None else {pod.name: pod for pod in runtime.pods}


def runtime(subject: KubePodDiscovery, key: RuntimeKey = TRITON) -> RuntimeInventory:
    return subject.inventory()[key]


async def test_first_inventory_has_ready_pods_exporter_urls_replicas_and_annotations(kube: FakeKubeApi) -> None:
    names = kube.add_modelmesh_runtime(
        NS,
        TRITON.deployment,
        replicas=3,
        ready_pods=2,
        annotations={"autoscaler.modelmesh.io/target-rps-per-pod": "120"},
    )
    kube.add_pod(NS, "not-modelmesh", labels={"app": "web"})
    subject = discovery(kube, exporter_port=9999)

    await subject.start()
    try:
        inventory = runtime(subject)
        assert subject.healthy
        assert sorted(pod.name for pod in inventory.pods) == sorted(names)
        assert sorted(pod.ready for pod in inventory.pods) == [False, True, True]
        pod = kube.get("pods", NS, names[0])
        assert pod is not None
        assert pods(subject)[names[0]].url == f"http://{pod['status']['podIP']}:9999/metrics"
        assert all(target.created_at is not None for target in inventory.pods)
        assert inventory.replicas == 3
        assert inventory.annotations["autoscaler.modelmesh.io/target-rps-per-pod"] == "120"
    finally:
        await subject.close()


async def test_the_inventory_follows_pods_being_added_readied_and_deleted(
    kube: FakeKubeApi, running: KubePodDiscovery
) -> None:
    kube.add_pod(NS, "p1", labels=LABELS, phase="Pending", ready=False)
    await eventually(lambda: "p1" in pods(running))
    assert (pods(running)["p1"].ready, pods(running)["p1"].url) == (False, None)

    kube.set_pod_ip(NS, "p1", "10.9.8.7")
    kube.set_pod_phase(NS, "p1", "Running")
    kube.set_ready(NS, "p1", True)
    await eventually(lambda: pods(running)["p1"].ready)
    assert pods(running)["p1"].url == "http://10.9.8.7:9187/metrics"

    kube.delete_pod(NS, "p1", graceful=True)  # terminating: the ReplicaSet already counts it as gone
    await eventually(lambda: not pods(running)["p1"].ready)
    kube.delete_pod(NS, "p1")
    await eventually(lambda: "p1" not in pods(running))
    assert running.healthy


async def test_one_watch_per_namespace_with_the_modelmesh_selector(kube: FakeKubeApi) -> None:
    other = RuntimeKey(NS, "modelmesh-serving-ovms")
    elsewhere = RuntimeKey("team-b", "modelmesh-serving-triton")
    subject = discovery(kube, runtimes=[TRITON, other, elsewhere])

    await subject.start()
    try:
        await kube.wait_for_watches(2, "pods")
        watches = [r for r in kube.requests if r.resource == "pods" and r.query.get("watch")]
        assert kube.watch_count("pods") == 2
        assert sorted(r.namespace or "" for r in watches) == [NS, "team-b"]
        assert {r.query["labelSelector"] for r in watches} == {"modelmesh-service"}
        assert all(r.query["allowWatchBookmarks"] == "true" for r in watches)
    finally:
        await subject.close()


async def test_pods_are_assigned_by_the_deployment_selector(kube: FakeKubeApi) -> None:
    kube.add_modelmesh_runtime(NS, TRITON.deployment, replicas=1)
    ovms = RuntimeKey(NS, "modelmesh-serving-ovms")
    kube.add_modelmesh_runtime(NS, ovms.deployment, replicas=2)
    subject = discovery(kube, runtimes=[TRITON, ovms])

    await subject.start()
    try:
        assert (len(runtime(subject).pods), len(runtime(subject, ovms).pods)) == (1, 2)
        assert all(pod.name.startswith(ovms.deployment) for pod in runtime(subject, ovms).pods)
    finally:
        await subject.close()


async def test_a_pod_another_controller_runs_is_not_the_runtimes_though_its_labels_match(kube: FakeKubeApi) -> None:
    """A canary Deployment whose pods carry the runtime's labels: its ReplicaSet, not the runtime's, controls
    them, and a ReplicaSet only ever counts (and removes) the pods it controls. Counted as the runtime's, the
    canary's load went into the runtime's values and the adapter wrote its own deletion cost over the
    canary's. A pod with no controller stays: the runtime's ReplicaSet adopts an orphan its selector matches."""
    names = kube.add_modelmesh_runtime(NS, TRITON.deployment, replicas=2)
    kube.add_pod(NS, "canary-6f7d8-abcde", labels={**LABELS, "pod-template-hash": "6f7d8"},
                 owner_replica_set="canary-6f7d8")
    kube.add_pod(NS, "triton-by-hand", labels={**LABELS, "pod-template-hash": "5d9c8b7f6"},
                 owner_replica_set=f"{TRITON.deployment}-5d9c8b7f6")
    kube.add_pod(NS, "orphan", labels=LABELS)
    subject = discovery(kube)

    await subject.start()
    try:
        assert sorted(pods(subject)) == sorted([*names, "triton-by-hand", "orphan"])
    finally:
        await subject.close()


async def test_a_watch_expired_with_410_is_replaced_by_a_fresh_list(
    kube: FakeKubeApi, running: KubePodDiscovery
) -> None:
    kube.add_pod(NS, "before", labels=LABELS)
    await eventually(lambda: "before" in pods(running))
    lists_before = _pod_lists(kube)

    kube.end_watches()  # the stream ends; while the client reconnects, history it needs is compacted away
    kube.add_pod(NS, "during", labels=LABELS)
    kube.delete_pod(NS, "before")
    kube.compact()

    await eventually(lambda: "during" in pods(running) and "before" not in pods(running))
    assert _pod_lists(kube) == lists_before + 1
    expired = [r for r in kube.requests if r.query.get("watch") and r.status == 200]
    assert len(expired) >= 2
    assert running.healthy


def _pod_lists(kube: FakeKubeApi) -> int:
    return sum(1 for r in kube.requests if r.resource == "pods" and not r.query.get("watch"))


async def test_a_watch_that_ends_is_resumed_without_listing_again(kube: FakeKubeApi, running: KubePodDiscovery) -> None:
    kube.end_watches()
    kube.add_pod(NS, "while-reconnecting", labels=LABELS)

    await eventually(lambda: "while-reconnecting" in pods(running))
    assert _pod_lists(kube) == 1
    resumed = [r for r in kube.requests if r.query.get("watch")][-1]
    assert int(resumed.query["resourceVersion"]) < int(kube.resource_version)


async def test_api_down_marks_unhealthy_keeps_the_inventory_and_recovers(
    kube: FakeKubeApi, running: KubePodDiscovery
) -> None:
    kube.add_pod(NS, "kept", labels=LABELS)
    await eventually(lambda: "kept" in pods(running))

    await kube.pause()
    await eventually(lambda: not running.healthy)
    assert "kept" in pods(running)  # last known pods stay; the source marks its snapshots source_ok=False

    kube.add_pod(NS, "new", labels=LABELS)
    kube.set_ready(NS, "kept", False)
    await kube.resume()
    await eventually(lambda: running.healthy and "new" in pods(running) and not pods(running)["kept"].ready)


async def test_error_answers_mark_unhealthy_until_the_api_answers_again(
    kube: FakeKubeApi, running: KubePodDiscovery
) -> None:
    kube.fail(r"/pods$", status=503, times=None)
    kube.end_watches()

    await eventually(lambda: not running.healthy)
    failed = [r for r in kube.requests if r.status == 503]
    assert failed and all(r.query.get("watch") for r in failed)

    kube.clear_faults()
    await eventually(lambda: running.healthy)


async def test_a_failing_deployment_read_marks_unhealthy(kube: FakeKubeApi, running: KubePodDiscovery) -> None:
    kube.fail(r"/deployments/", status=403, times=None)

    await eventually(lambda: not running.healthy)
    kube.clear_faults()
    await eventually(lambda: running.healthy)


async def test_deployments_are_read_again_for_replicas_and_annotations(
    kube: FakeKubeApi, running: KubePodDiscovery
) -> None:
    assert runtime(running).replicas is None  # configured runtime, Deployment not created yet
    kube.add_modelmesh_runtime(NS, TRITON.deployment, replicas=2)
    await eventually(lambda: runtime(running).replicas == 2 and len(runtime(running).pods) == 2)

    kube.set_replicas(NS, TRITON.deployment, 4)
    kube.set_deployment_annotations(NS, TRITON.deployment, {"autoscaler.modelmesh.io/max-replicas": "6"})
    await eventually(lambda: runtime(running).replicas == 4)
    assert runtime(running).annotations["autoscaler.modelmesh.io/max-replicas"] == "6"


async def test_discovers_labelled_deployments_in_the_given_namespaces(kube: FakeKubeApi) -> None:
    kube.add_modelmesh_runtime(NS, TRITON.deployment, replicas=1)
    kube.add_modelmesh_runtime("team-b", "modelmesh-serving-mlserver", replicas=2)
    kube.add_modelmesh_runtime("ignored", "modelmesh-serving-x", replicas=1)
    kube.add_deployment(NS, "web", replicas=1)
    subject = discovery(kube, runtimes=[], discover=True, namespaces=[NS, "team-b"])

    await subject.start()
    try:
        found = subject.inventory()
        assert sorted(found) == [TRITON, RuntimeKey("team-b", "modelmesh-serving-mlserver")]
        assert [len(found[key].pods) for key in sorted(found)] == [1, 2]
        kube.delete_deployment("team-b", "modelmesh-serving-mlserver")
        await eventually(lambda: sorted(subject.inventory()) == [TRITON])
    finally:
        await subject.close()


async def test_discovery_in_all_namespaces_uses_one_cluster_wide_watch(kube: FakeKubeApi) -> None:
    kube.add_modelmesh_runtime("a", "modelmesh-serving-one", replicas=1)
    kube.add_modelmesh_runtime("b", "modelmesh-serving-two", replicas=1)
    subject = discovery(kube, runtimes=[], discover=True)

    await subject.start()
    try:
        await kube.wait_for_watches(1, "pods")
        assert sorted(str(key) for key in subject.inventory()) == ["a/modelmesh-serving-one", "b/modelmesh-serving-two"]
        assert [r.path for r in kube.requests if r.query.get("watch")] == ["/api/v1/pods"]
        kube.add_pod("b", "late", labels={"modelmesh-service": "modelmesh-serving", "name": "modelmesh-serving-two"})
        await eventually(lambda: "late" in pods(subject, RuntimeKey("b", "modelmesh-serving-two")))
    finally:
        await subject.close()


async def test_ipv6_pod_addresses_are_bracketed(kube: FakeKubeApi, running: KubePodDiscovery) -> None:
    kube.add_pod(NS, "v6", labels=LABELS, ip="fd00::17")

    await eventually(lambda: "v6" in pods(running))

    assert pods(running)["v6"].url == "http://[fd00::17]:9187/metrics"


async def test_start_with_the_api_unreachable_returns_unhealthy_and_recovers(tmp_path: Path) -> None:
    kube = FakeKubeApi()
    await kube.start()
    await kube.pause()
    subject = discovery(kube, start_timeout_s=1.0)
    try:
        await subject.start()
        assert not subject.healthy and subject.inventory()[TRITON].pods == ()
        await kube.resume()
        await eventually(lambda: subject.healthy)
    finally:
        await subject.close()
        await kube.close()


async def test_close_stops_every_task_and_is_idempotent(kube: FakeKubeApi) -> None:
    subject = discovery(kube, runtimes=[TRITON, RuntimeKey("other", "x")])
    await subject.start()

    await subject.close()
    await subject.close()

    assert not subject.healthy
    assert [t for t in asyncio.all_tasks() if t.get_name().startswith("kube-discovery")] == []
    await eventually(lambda: kube.watch_count() == 0)  # the server saw the connection go


async def test_kube_configuration_loads_a_kubeconfig_and_sends_its_token(kube: FakeKubeApi, tmp_path: Path) -> None:
    kube.require_token = "s3cret"
    kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig", token="s3cret")
    subject = KubePodDiscovery(kube_configuration(kubeconfig), runtimes=[TRITON], discover=False)

    await subject.start()
    try:
        assert subject.healthy
        assert {r.headers.get("Authorization") for r in kube.requests} == {"Bearer s3cret"}
    finally:
        await subject.close()


async def test_a_broken_kubeconfig_is_a_discovery_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing"

    with pytest.raises(KubeApiError) as raised:
        await load_configuration(missing)
    assert raised.value.__cause__ is not None
    subject = KubePodDiscovery(kube_configuration(missing), runtimes=[TRITON])
    with pytest.raises(KubeApiError):
        await subject.start()
    await subject.close()


async def test_an_api_client_factory_is_accepted(kube: FakeKubeApi) -> None:
    made: list[ApiClient] = []

    def factory() -> ApiClient:
        made.append(ApiClient(kube.client_configuration()))
        return made[-1]

    subject = KubePodDiscovery(factory, runtimes=[TRITON], discover=False)
    await subject.start()
    await subject.close()

    assert len(made) == 1


async def test_a_lost_watch_is_logged_once_not_per_retry(
    kube: FakeKubeApi, running: KubePodDiscovery, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="autoscaler.sources.kube_pods")
    kube.fail(r"/pods$", status=500, times=None)
    kube.end_watches()

    def warnings() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.levelno == logging.WARNING and "broken" in r.getMessage()]

    await eventually(lambda: bool(warnings()))  # said once the watches are quiet (`autoscaler.kube.watch_news`)
    retried = sum(1 for r in kube.requests if r.status == 500)
    await eventually(lambda: sum(1 for r in kube.requests if r.status == 500) >= retried + 4)
    assert len(warnings()) == 1
    assert "500" in warnings()[0].getMessage()


def test_nothing_to_discover_is_refused() -> None:
    with pytest.raises(ValueError, match="nothing to discover"):
        KubePodDiscovery(Configuration(), runtimes=[], discover=False)
