"""The Kubernetes calls of the acting side, against the fake API server: what goes on the wire, and how every
failure comes back as one `KubeApiError` with the status, message and `Retry-After` the writer decides on."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscaler.kube.client import KubeClient, in_cluster
from autoscaler.kube.errors import KubeApiError, KubeConfigError
from autoscaler.names import DELETION_COST_ANNOTATION
from tests.fakes.kube import FakeKubeApi
from tests.support.processes import free_port


async def test_pod_annotations_are_merge_patched_as_strings(kube: FakeKubeApi, kube_client: KubeClient) -> None:
    kube.add_pod("ml", "pod-a", annotations={"keep": "me"})

    await kube_client.patch_pod_annotations("ml", "pod-a", {DELETION_COST_ANNOTATION: "300"})

    [patch] = kube.patches
    assert patch.content_type == "application/merge-patch+json"
    assert patch.body == {"metadata": {"annotations": {DELETION_COST_ANNOTATION: "300"}}}
    assert kube.pod_annotations("ml", "pod-a") == {"keep": "me", DELETION_COST_ANNOTATION: "300"}
    assert kube.requests[-1].headers["User-Agent"] == "modelmesh-autoscaler/test"


@pytest.mark.parametrize(
    ("status", "retryable"),
    [(404, False), (403, False), (422, False), (409, True), (429, True), (500, True), (503, True)],
)
async def test_failures_carry_their_status(
    kube: FakeKubeApi, kube_client: KubeClient, status: int, retryable: bool
) -> None:
    kube.add_pod("ml", "pod-a")
    kube.fail("/pods/pod-a$", status)

    with pytest.raises(KubeApiError) as caught:
        await kube_client.patch_pod_annotations("ml", "pod-a", {DELETION_COST_ANNOTATION: "0"})

    assert caught.value.status == status
    assert caught.value.retryable is retryable


async def test_missing_pod_is_a_404_with_the_server_message(kube_client: KubeClient) -> None:
    with pytest.raises(KubeApiError) as caught:
        await kube_client.patch_pod_annotations("ml", "gone", {DELETION_COST_ANNOTATION: "0"})

    assert caught.value.status == 404
    assert 'pods "gone" not found' in str(caught.value)


async def test_throttling_reports_retry_after(kube: FakeKubeApi, kube_client: KubeClient) -> None:
    kube.add_pod("ml", "pod-a")
    kube.fail("/pods/", 429, retry_after=7)

    with pytest.raises(KubeApiError) as caught:
        await kube_client.patch_pod_annotations("ml", "pod-a", {DELETION_COST_ANNOTATION: "0"})

    assert caught.value.retry_after_s == 7.0


async def test_slow_server_times_out_as_no_answer(kube: FakeKubeApi, kubeconfig: Path) -> None:
    kube.add_pod("ml", "pod-a")
    kube.delay("/pods/", 2.0)
    client = await KubeClient.connect(kubeconfig, user_agent="t", timeout_s=0.2)
    try:
        with pytest.raises(KubeApiError) as caught:
            await client.patch_pod_annotations("ml", "pod-a", {DELETION_COST_ANNOTATION: "0"})
    finally:
        await client.close()

    assert caught.value.status is None
    assert caught.value.retryable


async def test_unreachable_server_is_no_answer(tmp_path: Path) -> None:
    dead = FakeKubeApi(port=free_port())
    client = await KubeClient.connect(dead.write_kubeconfig(tmp_path / "kubeconfig"), user_agent="t")
    try:
        with pytest.raises(KubeApiError) as caught:
            await client.get_lease("ml", "x")
    finally:
        await client.close()

    assert caught.value.status is None


async def test_lease_round_trip_keeps_the_exact_json(kube: FakeKubeApi, kube_client: KubeClient) -> None:
    assert await kube_client.get_lease("ml", "lock") is None
    spec = {"holderIdentity": "a", "leaseDurationSeconds": 15, "acquireTime": "2024-01-02T03:04:05.000000Z",
            "renewTime": "2024-01-02T03:04:05.000000Z", "leaseTransitions": 0}
    created = await kube_client.create_lease("ml", {"metadata": {"name": "lock"}, "spec": spec})
    assert created["spec"] == spec

    renewed = {**spec, "renewTime": "2024-01-02T03:04:06.500000Z"}
    replaced = await kube_client.replace_lease("ml", "lock", {**created, "spec": renewed})
    assert replaced["spec"]["renewTime"] == "2024-01-02T03:04:06.500000Z"

    with pytest.raises(KubeApiError) as caught:  # the old resourceVersion is stale now
        await kube_client.replace_lease("ml", "lock", {**created, "spec": spec})
    assert caught.value.status == 409


async def test_default_namespace_is_the_kubeconfig_context_namespace(kube_client: KubeClient) -> None:
    assert kube_client.default_namespace == "ml"


async def test_unreadable_kubeconfig_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError, match="missing"):
        await KubeClient.connect(tmp_path / "missing", user_agent="t")


def test_in_cluster_is_told_by_the_service_host_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert not in_cluster()
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    assert in_cluster()
