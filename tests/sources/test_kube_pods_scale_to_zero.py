"""A runtime scaled to zero, or back from zero, is seen within seconds, not at the next Deployment resync.

modelmesh-serving scales a runtime's Deployment to 0 when no InferenceService uses it, and back up when one
arrives. Deployments are re-read only every `resync_interval_s` (30 s by default), so until then discovery
would pair the pods the watch shows with the old `spec.replicas`: no pods with replicas 2 is "no ready pods"
(a WARNING and data misses), pods with replicas 0 is a runtime whose Deployment seems to want none. So when a
runtime's pods go to none, or appear while its replicas is 0, its one Deployment is read again at once
(rate-limited). Here the resync interval is an hour: only that targeted read can make these tests pass.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes.aio.client import Configuration

from autoscaler.model import RuntimeKey
from autoscaler.sources.kube_pods import KubePodDiscovery
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

NS = "modelmesh-serving"
TRITON = RuntimeKey(NS, "modelmesh-serving-triton")
MLSERVER = RuntimeKey(NS, "modelmesh-serving-mlserver")
LABELS = {"modelmesh-service": "modelmesh-serving", "name": TRITON.deployment}
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{NS}/deployments"


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        yield server


async def started(kube: FakeKubeApi, **options: Any) -> KubePodDiscovery:
    settings = Configuration()
    settings.host = kube.url
    defaults: dict[str, Any] = {"runtimes": [TRITON], "discover": False, "resync_interval_s": 3600.0,
                                "request_timeout_s": 2.0, "backoff_initial_s": 0.02, "backoff_max_s": 0.1}
    subject = KubePodDiscovery(settings, **{**defaults, **options})
    await subject.start()
    await kube.wait_for_watches(1, "pods")
    return subject


def replicas(subject: KubePodDiscovery, key: RuntimeKey = TRITON) -> int | None:
    runtime = subject.inventory().get(key)
    return None if runtime is None else runtime.replicas


def reads_by_name(kube: FakeKubeApi) -> int:
    """Deployments read by name (`DeploymentResync.reread`, `discover_soon`), not by the resync's list."""
    return sum(1 for r in kube.requests if r.resource == "deployments" and r.method == "GET"
               and (r.path != DEPLOYMENTS or "fieldSelector" in r.query))


def deployment_reads(kube: FakeKubeApi) -> list[str]:
    return [r.path for r in kube.requests if r.resource == "deployments" and r.method == "GET"]


async def test_a_runtime_scaled_to_zero_shows_zero_replicas_within_seconds(kube: FakeKubeApi) -> None:
    names = kube.add_modelmesh_runtime(NS, TRITON.deployment, replicas=2)
    subject = await started(kube)
    try:
        assert replicas(subject) == 2
        kube.requests.clear()

        kube.set_replicas(NS, TRITON.deployment, 0)  # modelmesh-serving first, then the ReplicaSet's deletions
        for name in names:
            kube.delete_pod(NS, name)

        await eventually(lambda: replicas(subject) == 0)
        assert deployment_reads(kube) == [f"{DEPLOYMENTS}/{TRITON.deployment}"]  # one GET of that one, no list
    finally:
        await subject.close()


async def test_terminating_pods_count_as_gone(kube: FakeKubeApi) -> None:
    """modelmesh pods take a while to terminate: their deletion, not their removal, is what scaling to zero is."""
    names = kube.add_modelmesh_runtime(NS, TRITON.deployment, replicas=1)
    subject = await started(kube)
    try:
        kube.set_replicas(NS, TRITON.deployment, 0)
        kube.delete_pod(NS, names[0], graceful=True)

        await eventually(lambda: replicas(subject) == 0)
    finally:
        await subject.close()


async def test_a_runtime_back_from_zero_shows_its_new_replicas_within_seconds(kube: FakeKubeApi) -> None:
    kube.add_modelmesh_runtime(NS, TRITON.deployment, replicas=0)
    subject = await started(kube)
    try:
        assert replicas(subject) == 0

        kube.set_replicas(NS, TRITON.deployment, 2)  # an InferenceService arrives
        kube.add_pod(NS, "triton-a", labels=LABELS, ready=False)

        await eventually(lambda: replicas(subject) == 2)
    finally:
        await subject.close()


async def test_discovered_runtimes_are_read_again_by_name_too(kube: FakeKubeApi) -> None:
    """Discovery's list finds both runtimes before their pods come: pods of a runtime it did not know yet are
    looked up (a list by field selector) whenever the pod watch outruns that list, and such a lookup answered
    after the requests were cleared was counted as the re-read's (CI, 5 December)."""
    for deployment in (TRITON.deployment, MLSERVER.deployment):
        for name in kube.add_modelmesh_runtime(NS, deployment, replicas=1):
            kube.delete_pod(NS, name)  # the Deployments as discovery lists them; their pods come after
    subject = await started(kube, runtimes=[], discover=True, namespaces=[NS])
    try:
        assert replicas(subject, TRITON) == 1 and replicas(subject, MLSERVER) == 1
        kube.add_pod(NS, "triton-pod", labels=LABELS)
        kube.add_pod(NS, "mlserver-pod", labels={**LABELS, "name": MLSERVER.deployment})
        await eventually(lambda: all(subject.inventory()[key].pods for key in (TRITON, MLSERVER)))
        assert deployment_reads(kube)[-1] == DEPLOYMENTS  # discovery's one list; the pods read nothing more
        kube.requests.clear()
        kube.set_replicas(NS, MLSERVER.deployment, 0)
        kube.delete_pod(NS, "mlserver-pod")

        await eventually(lambda: replicas(subject, MLSERVER) == 0)
        assert replicas(subject, TRITON) == 1
        assert deployment_reads(kube) == [f"{DEPLOYMENTS}/{MLSERVER.deployment}"]
    finally:
        await subject.close()


async def test_pod_churn_reads_a_deployment_at_most_once_per_interval(kube: FakeKubeApi) -> None:
    """A crash-looping last pod (gone, back, gone...) while the Deployment still asks for 1: each "gone" asks
    for a read, but one runtime is read at most once per `reread_interval_s`, and never in a burst."""
    names = kube.add_modelmesh_runtime(NS, TRITON.deployment, replicas=1)
    subject = await started(kube, reread_interval_s=0.5)
    try:
        kube.requests.clear()
        began = time.monotonic()
        for round_ in range(30):
            kube.delete_pod(NS, names[-1])
            await eventually(lambda: not subject.inventory()[TRITON].pods)
            names.append(f"triton-{round_}")
            kube.add_pod(NS, names[-1], labels=LABELS)
            await eventually(lambda: bool(subject.inventory()[TRITON].pods))
        elapsed = time.monotonic() - began
        reads = len(deployment_reads(kube))
        assert 1 <= reads <= 2 + elapsed / 0.5, (reads, elapsed)
        assert replicas(subject) == 1
    finally:
        await subject.close()


@pytest.mark.parametrize("name_label", [None, "triton-relabelled"], ids=["no name label", "relabelled"])
async def test_a_runtime_whose_pods_lack_modelmeshs_name_label_is_seen_scaled_to_zero_within_seconds(
    kube: FakeKubeApi, name_label: str | None
) -> None:
    """A runtime Deployment of one's own (`--runtime`), whose pods carry `modelmesh-service` but select on other
    labels, or whose `name` label was changed: its pods' owner, the Deployment's ReplicaSet, says which runtime
    they run. Counted by the `name` label only, its scale to zero waited for the resync (an hour here, 30 s by
    default), with "no ready pods" warnings and misses meanwhile."""
    custom = RuntimeKey(NS, "custom-runtime")
    selector = {"modelmesh-service": "modelmesh-serving", "app": "custom"}
    labels = {**selector, "pod-template-hash": "7c9f8d6b5"}
    if name_label is not None:
        labels["name"] = name_label
    kube.add_deployment(NS, custom.deployment, replicas=2, labels=selector, selector=selector)
    names = [f"{custom.deployment}-7c9f8d6b5-{suffix}" for suffix in ("abcde", "fghij")]
    for name in names:
        kube.add_pod(NS, name, labels=labels, owner_replica_set=f"{custom.deployment}-7c9f8d6b5")
    subject = await started(kube, runtimes=[custom])
    try:
        assert replicas(subject, custom) == 2
        kube.set_replicas(NS, custom.deployment, 0)
        for name in names:
            kube.delete_pod(NS, name)

        await eventually(lambda: replicas(subject, custom) == 0)
    finally:
        await subject.close()


def deployment_uid(kube: FakeKubeApi, key: RuntimeKey) -> str:
    deployment = kube.get("deployments", key.namespace, key.deployment)
    assert deployment is not None
    return str(deployment["metadata"]["uid"])


async def test_a_deleted_runtime_is_gone_within_seconds_not_at_the_resync(kube: FakeKubeApi) -> None:
    """Its Deployment and pods deleted: the read by name its pods' going asks for answers 404, and the runtime was
    left to the resync (30 s by default) as a runtime with replicas and no pods: 503 "no ready pods" and a WARNING
    at every deletion, and its memory kept for a Deployment created again under its name."""
    names = kube.add_modelmesh_runtime(NS, MLSERVER.deployment, replicas=1)
    kube.add_modelmesh_runtime(NS, TRITON.deployment, replicas=1)
    subject = await started(kube, runtimes=[], discover=True, namespaces=[NS])
    try:
        assert MLSERVER in subject.inventory()
        kube.delete_deployment(NS, MLSERVER.deployment)
        kube.delete_pod(NS, names[0])

        await eventually(lambda: MLSERVER not in subject.inventory())
        assert TRITON in subject.inventory()
    finally:
        await subject.close()


async def test_a_deleted_runtime_waiting_for_its_paced_read_is_being_deleted_not_without_pods(
    kube: FakeKubeApi,
) -> None:
    """Its Deployment deleted (in the background), its pods terminating, then gone, while the read by name they
    ask for waits its turn (8 Deployments per `reread_interval_s`): a refresh in between saw a runtime with
    replicas and no pods, "no ready pods, values unknown (503)" with a WARNING and a `runtime_values_known 0`
    series (an outside review: 8 of some 90 deleted runtimes). Until that read says, it is being deleted:
    nothing to judge, an INFO line."""
    triton = kube.add_modelmesh_runtime(NS, TRITON.deployment, replicas=1)
    names = kube.add_modelmesh_runtime(NS, MLSERVER.deployment, replicas=1)
    subject = await started(kube, runtimes=[], discover=True, namespaces=[NS], reread_interval_s=3600.0)
    try:
        kube.delete_pod(NS, triton[0])  # another runtime's read (or one at the start) takes this interval's turn
        await eventually(lambda: reads_by_name(kube) > 0)

        kube.delete_deployment(NS, MLSERVER.deployment)
        kube.delete_pod(NS, names[0], graceful=True)
        await eventually(lambda: not any(pod.ready for pod in subject.inventory()[MLSERVER].pods))
        assert subject.inventory()[MLSERVER].deleting
        kube.delete_pod(NS, names[0])
        await eventually(lambda: subject.inventory()[MLSERVER].pods == ())

        assert subject.inventory()[MLSERVER].deleting
    finally:
        await subject.close()


async def test_a_runtime_whose_pods_went_but_whose_deployment_stays_is_not_said_being_deleted(
    kube: FakeKubeApi,
) -> None:
    """Its pods deleted while its Deployment still asks for one: once the read by name says so, it is a runtime
    without Ready pods (the WARNING an operator must see), not one being deleted."""
    names = kube.add_modelmesh_runtime(NS, MLSERVER.deployment, replicas=1)
    subject = await started(kube, runtimes=[], discover=True, namespaces=[NS])
    try:
        reads = len(deployment_reads(kube))
        kube.delete_pod(NS, names[0])
        await eventually(lambda: len(deployment_reads(kube)) > reads and not subject.inventory()[MLSERVER].deleting)

        assert subject.inventory()[MLSERVER].pods == () and replicas(subject, MLSERVER) == 1
    finally:
        await subject.close()


async def test_a_runtime_created_again_under_its_name_carries_its_new_deployments_uid(kube: FakeKubeApi) -> None:
    """`kubectl delete` then `apply` at once: the read by name finds the new Deployment, which is another runtime
    (its memory starts again, `Refresher`): the inventory says so by the Deployment's uid."""
    names = kube.add_modelmesh_runtime(NS, MLSERVER.deployment, replicas=1)
    subject = await started(kube, runtimes=[], discover=True, namespaces=[NS])
    try:
        assert subject.inventory()[MLSERVER].uid == deployment_uid(kube, MLSERVER)
        kube.delete_deployment(NS, MLSERVER.deployment)
        kube.delete_pod(NS, names[0])
        kube.add_modelmesh_runtime(NS, MLSERVER.deployment, replicas=1)
        new_uid = deployment_uid(kube, MLSERVER)

        await eventually(lambda: MLSERVER in subject.inventory() and subject.inventory()[MLSERVER].uid == new_uid)
    finally:
        await subject.close()


async def test_a_runtime_deleted_and_applied_again_is_back_within_seconds_not_at_the_resync(kube: FakeKubeApi) -> None:
    """`kubectl delete -f` then `apply -f` (a GitOps tool replacing the runtime): its going is seen at once, but
    its coming back waited for the Deployment resync (30 s by default, an hour here), its values answering 404
    meanwhile. Its pods appearing, for a runtime discovery does not know, ask for its Deployment by name, among
    the Deployments discovery lists (its labels), so a Deployment of some other kind is not taken for one."""
    names = kube.add_modelmesh_runtime(NS, MLSERVER.deployment, replicas=1)
    subject = await started(kube, runtimes=[], discover=True, namespaces=[NS])
    try:
        kube.delete_deployment(NS, MLSERVER.deployment)
        kube.delete_pod(NS, names[0])
        await eventually(lambda: MLSERVER not in subject.inventory())

        kube.add_modelmesh_runtime(NS, MLSERVER.deployment, replicas=1)
        await eventually(lambda: MLSERVER in subject.inventory())
        assert replicas(subject, MLSERVER) == 1 and len(subject.inventory()[MLSERVER].pods) == 1
    finally:
        await subject.close()


async def test_pods_whose_deployment_is_not_a_runtime_add_no_runtime(kube: FakeKubeApi) -> None:
    other = RuntimeKey(NS, "not-a-runtime")
    selector = {"app": "other"}
    kube.add_deployment(NS, other.deployment, replicas=1, labels=selector, selector=selector)
    subject = await started(kube, runtimes=[], discover=True, namespaces=[NS])
    try:
        kube.add_pod(NS, "not-a-runtime-7c9f8d6b5-abcde",
                     labels={"modelmesh-service": "modelmesh-serving", "name": other.deployment})
        kube.add_modelmesh_runtime(NS, TRITON.deployment, replicas=1)  # found within seconds, after the other
        await eventually(lambda: TRITON in subject.inventory())
        assert other not in subject.inventory()
    finally:
        await subject.close()
