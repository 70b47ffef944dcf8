"""The fake Kubernetes API against real clients: the `kubernetes` Python client and `kubectl`.

If the real client can read what the fake writes, other tests can trust the fake to stand in for a cluster.
The synchronous client runs in a thread (`asyncio.to_thread`) while the fake serves on the test's loop.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

NS = "default"
RUNTIME = "modelmesh-serving-triton"
SELECTOR = f"modelmesh-service=modelmesh-serving,name={RUNTIME}"


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        yield server


@pytest.fixture
def api(kube: FakeKubeApi) -> Iterator[client.ApiClient]:
    configuration = client.Configuration()
    configuration.host = kube.url
    configuration.retries = 0  # the fake's injected failures must reach the test, not be retried away
    with client.ApiClient(configuration) as api_client:
        yield api_client


async def call(function: Callable[..., object], *args: Any, **kwargs: Any) -> Any:
    """Run a blocking client call off the loop the fake serves on, with a tight timeout.

    The answer is typed `Any`: the generated models make every field Optional, and these tests assert on
    the fields' presence anyway."""
    kwargs.setdefault("_request_timeout", 5)
    return await asyncio.to_thread(function, *args, **kwargs)


def status_of(error: ApiException) -> Any:
    """The Status object an error answer carried."""
    return json.loads(error.body or "null")


async def raw(kube: FakeKubeApi, method: str, path: str, **kwargs: Any) -> tuple[int, Any, dict[str, str]]:
    async with aiohttp.ClientSession() as session, session.request(method, kube.url + path, **kwargs) as response:
        return response.status, await response.json(content_type=None), dict(response.headers)


async def test_lists_pods_by_label_selector_with_the_real_client(kube: FakeKubeApi, api: client.ApiClient) -> None:
    names = kube.add_modelmesh_runtime(NS, RUNTIME, replicas=3, ready_pods=2)
    kube.add_pod(NS, "unrelated", labels={"app": "other"})
    kube.add_pod("other-ns", "elsewhere", labels={"modelmesh-service": "modelmesh-serving", "name": RUNTIME})

    pods = await call(client.CoreV1Api(api).list_namespaced_pod, NS, label_selector=SELECTOR)

    assert sorted(pod.metadata.name for pod in pods.items) == sorted(names)
    assert pods.metadata.resource_version == kube.resource_version
    ready = [any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions) for pod in pods.items]
    assert sorted(ready) == [False, True, True]
    assert all(pod.status.pod_ip.startswith("10.244.") for pod in pods.items)
    assert all(pod.metadata.creation_timestamp is not None for pod in pods.items)
    everywhere = await call(client.CoreV1Api(api).list_pod_for_all_namespaces, label_selector="modelmesh-service")
    assert len(everywhere.items) == 4
    one = await call(client.CoreV1Api(api).read_namespaced_pod, names[0], NS)
    assert one.metadata.labels["name"] == RUNTIME


async def test_list_items_carry_no_kind_and_empty_maps_are_omitted(kube: FakeKubeApi) -> None:
    kube.add_pod(NS, "bare")

    status, body, _ = await raw(kube, "GET", f"/api/v1/namespaces/{NS}/pods")

    assert status == 200
    assert body["kind"] == "PodList" and body["apiVersion"] == "v1"
    item = body["items"][0]
    assert "kind" not in item and "apiVersion" not in item
    assert "labels" not in item["metadata"] and "annotations" not in item["metadata"]


async def test_set_based_and_negative_label_selectors(kube: FakeKubeApi) -> None:
    kube.add_pod(NS, "a", labels={"tier": "gpu"})
    kube.add_pod(NS, "b", labels={"tier": "cpu"})
    kube.add_pod(NS, "c")

    async def names(selector: str) -> list[str]:
        _, body, _ = await raw(kube, "GET", f"/api/v1/namespaces/{NS}/pods", params={"labelSelector": selector})
        return [item["metadata"]["name"] for item in body["items"]]

    assert await names("tier in (gpu, tpu)") == ["a"]
    assert await names("tier notin (gpu)") == ["b", "c"]
    assert await names("tier!=cpu") == ["a", "c"]
    assert await names("!tier") == ["c"]
    assert await names("tier") == ["a", "b"]


async def test_field_selectors_on_indexed_fields_and_400_on_others(kube: FakeKubeApi) -> None:
    kube.add_pod(NS, "a")
    kube.add_pod(NS, "b", phase="Pending", ready=False)
    path = f"/api/v1/namespaces/{NS}/pods"

    _, by_name, _ = await raw(kube, "GET", path, params={"fieldSelector": "metadata.name=b"})
    _, running, _ = await raw(kube, "GET", path, params={"fieldSelector": "status.phase!=Pending"})
    status, error, _ = await raw(kube, "GET", path, params={"fieldSelector": "spec.foo=x"})

    assert [item["metadata"]["name"] for item in by_name["items"]] == ["b"]
    assert [item["metadata"]["name"] for item in running["items"]] == ["a"]
    assert (status, error["reason"], error["message"]) == (400, "BadRequest", "field label not supported: spec.foo")


def _collect_events(
    api: client.ApiClient, resource_version: str | None, count: int, selector: str = SELECTOR
) -> list[tuple[str, str, dict[str, Any]]]:
    """Blocking: watch pods with the real client's Watch until `count` events arrived."""
    events: list[tuple[str, str, dict[str, Any]]] = []
    stream = watch.Watch()  # type: ignore[no-untyped-call]
    options: dict[str, Any] = {"label_selector": selector, "timeout_seconds": 5, "_request_timeout": 10}
    if resource_version is not None:
        options["resource_version"] = resource_version
    for event in stream.stream(client.CoreV1Api(api).list_namespaced_pod, NS, **options):  # type: ignore[no-untyped-call]
        events.append((event["type"], event["object"].metadata.name, event["raw_object"]))
        if len(events) >= count:
            stream.stop()  # type: ignore[no-untyped-call]
    return events


async def test_watch_streams_added_modified_deleted_to_the_real_client(
    kube: FakeKubeApi, api: client.ApiClient
) -> None:
    labels = {"modelmesh-service": "modelmesh-serving", "name": RUNTIME}
    watching = asyncio.create_task(asyncio.to_thread(_collect_events, api, kube.resource_version, 4))
    await kube.wait_for_watches(1, "pods")

    kube.add_pod(NS, "p1", labels=labels, ready=False)
    kube.set_ready(NS, "p1", True)
    kube.set_pod_ip(NS, "p1", "10.1.2.3")
    kube.delete_pod(NS, "p1")
    open_watch = [r for r in kube.requests if r.query.get("watch")][-1]
    assert open_watch.status == 200  # recorded as soon as the stream started
    events = await asyncio.wait_for(watching, 10)

    assert [(kind, name) for kind, name, _ in events] == [
        ("ADDED", "p1"),
        ("MODIFIED", "p1"),
        ("MODIFIED", "p1"),
        ("DELETED", "p1"),
    ]
    versions = [int(obj["metadata"]["resourceVersion"]) for _, _, obj in events]
    assert versions == sorted(versions) and len(set(versions)) == 4
    assert events[2][2]["status"]["podIP"] == "10.1.2.3"
    assert events[0][2]["kind"] == "Pod"


async def test_watch_without_resource_version_starts_with_the_current_state(
    kube: FakeKubeApi, api: client.ApiClient
) -> None:
    names = kube.add_modelmesh_runtime(NS, RUNTIME, replicas=2)

    events = await asyncio.to_thread(_collect_events, api, None, 2)

    assert sorted((kind, name) for kind, name, _ in events) == sorted(("ADDED", name) for name in names)


async def test_watch_resumes_after_a_resource_version_and_replays_later_events(
    kube: FakeKubeApi, api: client.ApiClient
) -> None:
    labels = {"modelmesh-service": "modelmesh-serving", "name": RUNTIME}
    kube.add_pod(NS, "old", labels=labels)
    since = kube.resource_version
    kube.add_pod(NS, "new", labels=labels)
    kube.set_ready(NS, "old", False)

    events = await asyncio.to_thread(_collect_events, api, since, 2)

    assert [(kind, name) for kind, name, _ in events] == [("ADDED", "new"), ("MODIFIED", "old")]


async def test_watch_from_a_compacted_version_gets_a_410_expired_error_event(
    kube: FakeKubeApi, api: client.ApiClient
) -> None:
    kube.add_pod(NS, "p", labels={"modelmesh-service": "modelmesh-serving", "name": RUNTIME})
    stale = kube.resource_version
    kube.set_ready(NS, "p", False)
    kube.compact()

    with pytest.raises(ApiException) as raised:
        await asyncio.to_thread(_collect_events, api, stale, 1)
    assert raised.value.status == 410

    async with (
        aiohttp.ClientSession() as session,
        session.get(
            f"{kube.url}/api/v1/namespaces/{NS}/pods", params={"watch": "true", "resourceVersion": stale}
        ) as response,
    ):
        lines = [json.loads(line) async for line in response.content]
    assert response.status == 200
    assert lines == [
        {
            "type": "ERROR",
            "object": {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": f"too old resource version: {stale} ({kube.resource_version})",
                "reason": "Expired",
                "code": 410,
            },
        }
    ]


async def test_a_pod_leaving_the_selector_is_deleted_for_that_watcher(kube: FakeKubeApi) -> None:
    kube.add_pod(NS, "p", labels={"tier": "gpu"})
    since = kube.resource_version
    async with aiohttp.ClientSession() as session:
        params = {"watch": "True", "resourceVersion": since, "labelSelector": "tier=gpu", "timeoutSeconds": "2"}
        async with session.get(f"{kube.url}/api/v1/namespaces/{NS}/pods", params=params) as response:
            await kube.wait_for_watches(1)
            kube.update_object("pods", NS, "p", lambda pod: pod["metadata"]["labels"].update(tier="cpu"))
            kube.update_object("pods", NS, "p", lambda pod: pod["metadata"]["labels"].update(tier="gpu"))
            kube.end_watches()
            kinds = [json.loads(line)["type"] async for line in response.content]
    assert kinds == ["DELETED", "ADDED"]


async def test_watch_honours_timeout_seconds_and_bookmarks(kube: FakeKubeApi) -> None:
    async with aiohttp.ClientSession() as session:
        params = {
            "watch": "1",
            "resourceVersion": kube.resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": "1",
        }
        started = asyncio.get_running_loop().time()
        async with session.get(f"{kube.url}/api/v1/pods", params=params) as response:
            await kube.wait_for_watches(1)
            kube.send_bookmarks()
            lines = [json.loads(line) async for line in response.content]
        elapsed = asyncio.get_running_loop().time() - started
    assert [line["type"] for line in lines] == ["BOOKMARK"]
    assert lines[0]["object"]["metadata"]["resourceVersion"] == kube.resource_version
    assert 0.9 <= elapsed < 5


async def test_merge_patch_sets_and_removes_annotations_and_emits_modified(
    kube: FakeKubeApi, api: client.ApiClient
) -> None:
    kube.add_pod(NS, "p", annotations={"keep": "1", "drop": "x"})
    before = kube.resource_version
    core = client.CoreV1Api(api)
    body = {"metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "-5", "drop": None}}}

    patched = await call(core.patch_namespaced_pod, "p", NS, body, _content_type="application/merge-patch+json")

    assert patched.metadata.annotations == {"keep": "1", "controller.kubernetes.io/pod-deletion-cost": "-5"}
    assert int(patched.metadata.resource_version) > int(before)
    assert kube.pod_annotations(NS, "p")["controller.kubernetes.io/pod-deletion-cost"] == "-5"
    assert [(p.name, p.content_type, p.status) for p in kube.patches] == [("p", "application/merge-patch+json", 200)]
    events = await asyncio.to_thread(_collect_events, api, before, 1, "")
    assert [(kind, name) for kind, name, _ in events] == [("MODIFIED", "p")]


async def test_a_no_op_patch_keeps_the_resource_version(kube: FakeKubeApi, api: client.ApiClient) -> None:
    kube.add_pod(NS, "p", annotations={"a": "1"})
    before = kube.resource_version

    patched = await call(
        client.CoreV1Api(api).patch_namespaced_pod,
        "p",
        NS,
        {"metadata": {"annotations": {"a": "1"}}},
        _content_type="application/merge-patch+json",
    )

    assert patched.metadata.resource_version == before == kube.resource_version


async def test_strategic_and_json_patches_are_applied_like_the_server(kube: FakeKubeApi, api: client.ApiClient) -> None:
    kube.add_pod(NS, "p")
    core = client.CoreV1Api(api)

    await call(core.patch_namespaced_pod, "p", NS, {"metadata": {"labels": {"x": "1"}}})
    add_cost = {"op": "add", "path": "/metadata/annotations/controller.kubernetes.io~1pod-deletion-cost", "value": "3"}
    # As on a real server, a pod without annotations has no /metadata/annotations to add a key to.
    with pytest.raises(ApiException) as missing:
        await call(core.patch_namespaced_pod, "p", NS, [add_cost], _content_type="application/json-patch+json")
    assert missing.value.status == 422
    operations = [
        {"op": "add", "path": "/metadata/annotations", "value": {}},
        add_cost,
        {"op": "replace", "path": "/metadata/labels/x", "value": "2"},
    ]
    await call(core.patch_namespaced_pod, "p", NS, operations, _content_type="application/json-patch+json")

    pod = kube.get("pods", NS, "p")
    assert pod is not None
    assert pod["metadata"]["labels"] == {"x": "2"}
    assert pod["metadata"]["annotations"] == {"controller.kubernetes.io/pod-deletion-cost": "3"}
    assert kube.patches[0].content_type == "application/strategic-merge-patch+json"
    assert [p.content_type for p in kube.patches[1:]] == ["application/json-patch+json"] * 2


async def test_patch_errors_are_real_status_objects(kube: FakeKubeApi) -> None:
    kube.add_pod(NS, "p")
    merge = {"Content-Type": "application/merge-patch+json"}

    status, body, _ = await raw(kube, "PATCH", f"/api/v1/namespaces/{NS}/pods/gone", data=b"{}", headers=merge)
    assert (status, body) == (
        404,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": 'pods "gone" not found',
            "reason": "NotFound",
            "code": 404,
            "details": {"name": "gone", "kind": "pods"},
        },
    )
    status, body, _ = await raw(
        kube, "PATCH", f"/api/v1/namespaces/{NS}/pods/p", data=b"{}", headers={"Content-Type": "text/plain"}
    )
    assert (status, body["reason"]) == (415, "UnsupportedMediaType")
    assert body["message"].startswith("the body of the request was in an unknown format - accepted media types")
    bad_cost = json.dumps({"metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "1.5"}}})
    status, body, _ = await raw(kube, "PATCH", f"/api/v1/namespaces/{NS}/pods/p", data=bad_cost, headers=merge)
    assert (status, body["reason"]) == (422, "Invalid")
    assert "must be a 32bit integer" in body["message"]
    number = json.dumps({"metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": 3}}})
    status, body, _ = await raw(kube, "PATCH", f"/api/v1/namespaces/{NS}/pods/p", data=number, headers=merge)
    assert (status, body["reason"]) == (400, "BadRequest")


async def test_subject_access_reviews_follow_the_rules_and_are_recorded(
    kube: FakeKubeApi, api: client.ApiClient
) -> None:
    kube.allow(groups=["system:serviceaccounts:kube-system"], verb="get", group="external.metrics.k8s.io")
    authz = client.AuthorizationV1Api(api)

    def review(user: str, groups: list[str], namespace: str) -> client.V1SubjectAccessReview:
        attributes = client.V1ResourceAttributes(
            namespace=namespace, verb="get", group="external.metrics.k8s.io", resource="modelmesh_gpu_busy"
        )
        spec = client.V1SubjectAccessReviewSpec(user=user, groups=groups, resource_attributes=attributes)
        return client.V1SubjectAccessReview(spec=spec)

    hpa = ["system:serviceaccounts", "system:serviceaccounts:kube-system"]
    allowed = await call(authz.create_subject_access_review, review("system:serviceaccount:kube-system:hpa", hpa, NS))
    denied = await call(authz.create_subject_access_review, review("alice", ["dev"], NS))

    assert allowed.status.allowed is True and "RBAC: allowed by" in allowed.status.reason
    assert denied.status.allowed is False and denied.status.reason is None
    assert [spec["user"] for spec in kube.access_reviews] == ["system:serviceaccount:kube-system:hpa", "alice"]
    assert kube.access_reviews[0]["resourceAttributes"]["resource"] == "modelmesh_gpu_busy"


async def test_a_subject_access_review_without_subject_is_invalid(kube: FakeKubeApi) -> None:
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {}}

    status, answer, _ = await raw(kube, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", json=body)

    assert (status, answer["reason"]) == (422, "Invalid")
    assert answer["message"] == (
        'SubjectAccessReview.authorization.k8s.io "" is invalid: [spec.resourceAttributes: Invalid value: null: '
        "exactly one of nonResourceAttributes or resourceAttributes must be specified, "
        'spec.user: Invalid value: "": at least one of user or group must be specified]'
    )


async def test_an_authorizer_callable_decides_instead_of_rules(kube: FakeKubeApi, api: client.ApiClient) -> None:
    kube.authorizer = lambda spec: (spec["resourceAttributes"]["namespace"] == "team-a", "namespace policy")
    spec = client.V1SubjectAccessReviewSpec(
        user="bob", resource_attributes=client.V1ResourceAttributes(namespace="team-b", verb="get")
    )

    answer = await call(
        client.AuthorizationV1Api(api).create_subject_access_review, client.V1SubjectAccessReview(spec=spec)
    )

    assert (answer.status.allowed, answer.status.reason) == (False, "namespace policy")


async def test_token_reviews_know_the_configured_tokens(kube: FakeKubeApi, api: client.ApiClient) -> None:
    kube.tokens["abc"] = ("alice", ["dev"])
    authn = client.AuthenticationV1Api(api)

    def review(token: str) -> client.V1TokenReview:
        return client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token))

    known = await call(authn.create_token_review, review("abc"))
    unknown = await call(authn.create_token_review, review("nope"))

    assert known.status.authenticated is True
    assert known.status.user.username == "alice"
    assert known.status.user.groups == ["dev", "system:authenticated"]
    assert not unknown.status.authenticated and unknown.status.error
    assert [spec["token"] for spec in kube.token_reviews] == ["abc", "nope"]


async def test_extension_apiserver_authentication_has_the_real_keys(kube: FakeKubeApi, api: client.ApiClient) -> None:
    kube.set_authentication_config(
        client_ca="CLIENT-PEM", requestheader_client_ca="PROXY-PEM", allowed_names=["aggregator"]
    )

    configmap = await call(
        client.CoreV1Api(api).read_namespaced_config_map, "extension-apiserver-authentication", "kube-system"
    )

    assert configmap.data == {
        "client-ca-file": "CLIENT-PEM",
        "requestheader-client-ca-file": "PROXY-PEM",
        "requestheader-allowed-names": '["aggregator"]',
        "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]',
        "requestheader-group-headers": '["X-Remote-Group"]',
        "requestheader-username-headers": '["X-Remote-User"]',
    }


async def test_deployments_read_and_list_with_replicas_selector_annotations_and_status(
    kube: FakeKubeApi, api: client.ApiClient
) -> None:
    kube.add_modelmesh_runtime(NS, RUNTIME, replicas=3, ready_pods=1, annotations={"autoscaler.modelmesh.io/x": "1"})
    kube.add_deployment("other", "web", replicas=2)
    apps = client.AppsV1Api(api)

    deployment = await call(apps.read_namespaced_deployment, RUNTIME, NS)
    labelled = await call(apps.list_deployment_for_all_namespaces, label_selector="modelmesh-service")
    in_other = await call(apps.list_namespaced_deployment, "other")

    assert deployment.spec.replicas == 3
    assert deployment.spec.selector.match_labels == {"modelmesh-service": "modelmesh-serving", "name": RUNTIME}
    assert deployment.metadata.annotations["autoscaler.modelmesh.io/x"] == "1"
    assert (deployment.status.replicas, deployment.status.ready_replicas) == (3, 1)
    assert [d.metadata.name for d in labelled.items] == [RUNTIME]
    assert [d.metadata.name for d in in_other.items] == ["web"]
    kube.set_replicas(NS, RUNTIME, 5)
    assert (await call(apps.read_namespaced_deployment, RUNTIME, NS)).spec.replicas == 5
    with pytest.raises(ApiException) as raised:
        await call(apps.read_namespaced_deployment, "missing", NS)
    assert raised.value.status == 404
    assert status_of(raised.value)["message"] == 'deployments.apps "missing" not found'


async def test_leases_have_optimistic_concurrency(kube: FakeKubeApi, api: client.ApiClient) -> None:
    leases = client.CoordinationV1Api(api)
    lease = client.V1Lease(
        metadata=client.V1ObjectMeta(name="modelmesh-autoscaler"),
        spec=client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15),
    )

    created = await call(leases.create_namespaced_lease, NS, lease)
    with pytest.raises(ApiException) as exists:
        await call(leases.create_namespaced_lease, NS, lease)
    created.spec.holder_identity = "a-renewed"
    renewed = await call(leases.replace_namespaced_lease, "modelmesh-autoscaler", NS, created)
    created.spec.holder_identity = "b"
    with pytest.raises(ApiException) as stale:
        await call(leases.replace_namespaced_lease, "modelmesh-autoscaler", NS, created)
    created.metadata.resource_version = None
    with pytest.raises(ApiException) as unconditional:
        await call(leases.replace_namespaced_lease, "modelmesh-autoscaler", NS, created)
    listed = await call(leases.list_namespaced_lease, NS)

    assert exists.value.status == 409 and status_of(exists.value)["reason"] == "AlreadyExists"
    assert int(renewed.metadata.resource_version) > int(created.metadata.uid is not None)
    assert stale.value.status == 409
    assert status_of(stale.value)["message"] == (
        'Operation cannot be fulfilled on leases.coordination.k8s.io "modelmesh-autoscaler": the object has been '
        "modified; please apply your changes to the latest version and try again"
    )
    assert unconditional.value.status == 422
    assert [item.spec.holder_identity for item in listed.items] == ["a-renewed"]


async def test_injected_failures_are_status_objects_with_retry_after(kube: FakeKubeApi, api: client.ApiClient) -> None:
    kube.add_pod(NS, "p")
    kube.fail(r"/pods$", status=429, times=1, retry_after=2)
    kube.fail(r"/pods$", status=500, times=1, method="GET")

    status, body, headers = await raw(kube, "GET", f"/api/v1/namespaces/{NS}/pods")
    assert (status, body["reason"], body["details"], headers["Retry-After"]) == (
        429,
        "TooManyRequests",
        {"retryAfterSeconds": 2},
        "2",
    )
    with pytest.raises(ApiException) as raised:
        await call(client.CoreV1Api(api).list_namespaced_pod, NS)
    assert raised.value.status == 500 and status_of(raised.value)["reason"] == "InternalError"
    recovered = await call(client.CoreV1Api(api).list_namespaced_pod, NS)
    assert [pod.metadata.name for pod in recovered.items] == ["p"]
    assert [r.status for r in kube.requests] == [429, 500, 200]


async def test_a_shutting_down_servers_503_carries_retry_after_and_other_503s_none(kube: FakeKubeApi) -> None:
    """kube-apiserver shutting down answers every new request `503 ServiceUnavailable "apiserver is shutting down"`
    with `Retry-After: 1` (its wait-group and watch-termination filters); an aggregated API's 503 has none."""
    kube.fail(r"/pods$", status=503, times=1, message="apiserver is shutting down", retry_after=1)
    kube.fail(r"/pods$", status=503, times=1)

    shutting_down = await raw(kube, "GET", f"/api/v1/namespaces/{NS}/pods")
    other = await raw(kube, "GET", f"/api/v1/namespaces/{NS}/pods")

    status, body, headers = shutting_down
    assert (status, body["reason"], body["message"], headers["Retry-After"]) == (
        503, "ServiceUnavailable", "apiserver is shutting down", "1")
    assert "details" not in body
    assert other[0] == 503 and "Retry-After" not in other[2]


async def test_a_delay_makes_a_tight_client_timeout_fire(kube: FakeKubeApi, api: client.ApiClient) -> None:
    kube.delay(r"/pods$", 1.0, times=1)

    with pytest.raises(Exception, match=r"(?i)timed? ?out"):
        await call(client.CoreV1Api(api).list_namespaced_pod, NS, _request_timeout=0.2)
    assert (await call(client.CoreV1Api(api).list_namespaced_pod, NS)).items == []


async def test_a_held_answer_keeps_the_matching_request_unanswered_until_released(kube: FakeKubeApi) -> None:
    """`hold_answer`: the first matching request waits for the test; others, later matches too, are answered."""
    kube.add_pod(NS, "p")
    held = kube.hold_answer(r"/pods/p$", method="GET")
    first = asyncio.create_task(raw(kube, "GET", f"/api/v1/namespaces/{NS}/pods/p"))
    await eventually(lambda: held.hits == 1)

    assert (await raw(kube, "GET", f"/api/v1/namespaces/{NS}/pods"))[0] == 200
    assert not first.done()
    held.release()
    assert (await first)[0] == 200
    assert (await raw(kube, "GET", f"/api/v1/namespaces/{NS}/pods/p"))[0] == 200
    assert held.hits == 1


async def test_an_answer_held_after_it_was_applied_leaves_the_write_stored_and_watched(kube: FakeKubeApi) -> None:
    """`hold_answer(applied=True)`: an API server slow to answer a write it already committed. The write is in the
    store and its watch event sent while the client still waits; the release answers it as applied."""
    kube.add_pod(NS, "p")
    before = kube.resource_version
    held = kube.hold_answer(r"/pods/p$", method="PATCH", applied=True)
    cost = {"metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "7"}}}
    patch = asyncio.create_task(raw(kube, "PATCH", f"/api/v1/namespaces/{NS}/pods/p", json=cost,
                                    headers={"Content-Type": "application/merge-patch+json"}))
    await eventually(lambda: held.hits == 1)
    await eventually(lambda: kube.pod_annotations(NS, "p").get("controller.kubernetes.io/pod-deletion-cost") == "7")

    assert not patch.done()
    assert [(pod["metadata"]["name"], pod["metadata"]["annotations"]) for pod in kube.changes("pods", before)] == [
        ("p", {"controller.kubernetes.io/pod-deletion-cost": "7"})]
    held.release()
    status, body, _ = await patch
    assert (status, body["metadata"]["annotations"]["controller.kubernetes.io/pod-deletion-cost"]) == (200, "7")


async def test_a_trigger_changes_the_store_before_the_matching_request_is_answered(kube: FakeKubeApi) -> None:
    """`on_request`: the third GET of the pod finds what the action wrote, once; the first two pass."""
    kube.add_pod(NS, "p")
    kube.on_request(r"/pods/p$", lambda: kube.update_object("pods", NS, "p", lambda o: o["metadata"].update(
        labels={"seen": "yes"})), method="GET", after=2)

    labels = [(await raw(kube, "GET", f"/api/v1/namespaces/{NS}/pods/p"))[1]["metadata"].get("labels")
              for _ in range(4)]

    assert labels == [None, None, {"seen": "yes"}, {"seen": "yes"}]
    assert kube.triggers[0].hits == 4


async def test_pause_refuses_connections_and_resume_keeps_port_and_state(kube: FakeKubeApi) -> None:
    kube.add_pod(NS, "p")
    port = kube.port

    await kube.pause()
    with pytest.raises(aiohttp.ClientConnectionError):
        await raw(kube, "GET", "/version")
    await kube.resume()

    status, body, _ = await raw(kube, "GET", f"/api/v1/namespaces/{NS}/pods")
    assert (kube.port, status, [i["metadata"]["name"] for i in body["items"]]) == (port, 200, ["p"])


async def test_a_required_token_is_checked(kube: FakeKubeApi) -> None:
    kube.require_token = "secret"

    refused = await raw(kube, "GET", "/version")
    accepted = await raw(kube, "GET", "/version", headers={"Authorization": "Bearer secret"})

    assert refused[:2] == (
        401,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "Unauthorized",
            "reason": "Unauthorized",
            "code": 401,
        },
    )
    assert accepted[0] == 200 and accepted[1]["gitVersion"] == "v1.31.0"


async def test_kubectl_gets_pods_through_the_kubeconfig(tmp_path: Path) -> None:
    async with FakeKubeApi(tls=True, require_token="test-token") as kube:
        await _kubectl_gets_pods(kube, tmp_path)


async def test_kubectl_works_over_plain_http_without_sending_its_token(kube: FakeKubeApi, tmp_path: Path) -> None:
    await _kubectl_gets_pods(kube, tmp_path)
    assert all("Authorization" not in r.headers for r in kube.requests)


async def _kubectl_gets_pods(kube: FakeKubeApi, tmp_path: Path) -> None:
    names = kube.add_modelmesh_runtime(NS, RUNTIME, replicas=2)
    kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig", token="test-token")

    process = await asyncio.create_subprocess_exec(
        "/usr/bin/kubectl",
        "--kubeconfig",
        str(kubeconfig),
        "--cache-dir",
        str(tmp_path / "cache"),
        "get",
        "pods",
        "-n",
        NS,
        "-o",
        "json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 30)

    assert process.returncode == 0, stderr.decode()
    listed = json.loads(stdout)
    assert sorted(item["metadata"]["name"] for item in listed["items"]) == sorted(names)
    assert kube.requests[0].path == "/version"
    if kube.tls:
        assert all(r.headers.get("Authorization") == "Bearer test-token" for r in kube.requests)


async def test_runs_as_a_process_from_a_state_file(tmp_path: Path) -> None:
    state = tmp_path / "state.yaml"
    state.write_text(
        "runtimes:\n  - {namespace: default, deployment: modelmesh-serving-triton, replicas: 2}\n"
        "tokens:\n  abc: {user: alice, groups: [dev]}\n"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.fakes.kube",
        "--port",
        "0",
        "--state",
        str(state),
        stdout=asyncio.subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), 10)).decode()
        url = line.rsplit(" ", 1)[-1].strip()
        async with aiohttp.ClientSession() as session, session.get(f"{url}/api/v1/namespaces/default/pods") as response:
            body = await response.json()
        assert len(body["items"]) == 2
    finally:
        process.terminate()
        await process.wait()
    assert process.returncode == 0
