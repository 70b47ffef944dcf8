"""What kube-apiserver refuses, the fake refuses too, as the real `kubectl` shows it: a strategic merge patch
of a custom resource (415), a field selector on a field the kind does not index (400), list options that
contradict each other (422). A client that passes against a laxer fake fails on a cluster: the fake is the only
API server these tests have, so it must not take what the real one refuses (checked against the sources named
in `tests/fakes/kube`)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes.kube import FakeKubeApi
from tests.fakes.kube.resources import POD_FIELD_LABELS
from tests.fakes.test_kube_custom_resources import kubectl

NS = "modelmesh-serving"
CUSTOM_TYPES_ACCEPTED = ("application/json-patch+json, application/merge-patch+json, "
                         "application/apply-patch+yaml")


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        yield server


@pytest.mark.parametrize("resource", ["runtimescale/triton", "servingruntime/triton"])
async def test_kubectl_patch_of_a_custom_resource_needs_a_merge_or_json_patch(
    kube: FakeKubeApi, tmp_path: Path, resource: str
) -> None:
    kube.add_serving_runtime(NS, "triton", replicas=1)
    kube.add_runtime_scale(NS, "triton", replicas=1)
    patch = '{"spec": {"replicas": 4}}'

    code, _, stderr = await kubectl(kube, tmp_path, "patch", "-n", NS, resource, "-p", patch)

    assert code != 0
    assert "the body of the request was in an unknown format - accepted media types include: " \
        + CUSTOM_TYPES_ACCEPTED in stderr
    code, _, stderr = await kubectl(kube, tmp_path, "patch", "-n", NS, resource, "--type", "merge", "-p", patch)
    assert code == 0, stderr
    assert kube.stored(resource.split("/")[0] + "s", NS, "triton")["spec"]["replicas"] == 4


async def test_kubectl_patch_of_a_custom_resource_status_needs_a_merge_or_json_patch(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    kube.add_runtime_scale(NS, "triton", replicas=1)
    patch = '{"status": {"replicas": 2}}'

    code, _, stderr = await kubectl(kube, tmp_path, "patch", "-n", NS, "rts/triton", "--subresource", "status",
                                    "-p", patch)

    assert code != 0 and CUSTOM_TYPES_ACCEPTED in stderr
    code, _, stderr = await kubectl(kube, tmp_path, "patch", "-n", NS, "rts/triton", "--subresource", "status",
                                    "--type", "merge", "-p", patch)
    assert code == 0, stderr
    assert kube.stored("runtimescales", NS, "triton")["status"]["replicas"] == 2


async def test_kubectl_patch_of_a_pod_may_be_strategic(kube: FakeKubeApi, tmp_path: Path) -> None:
    kube.add_pod(NS, "p")

    code, _, stderr = await kubectl(kube, tmp_path, "patch", "-n", NS, "pod/p", "-p",
                                    '{"metadata": {"labels": {"x": "1"}}}')

    assert code == 0, stderr
    assert kube.stored("pods", NS, "p")["metadata"]["labels"] == {"x": "1"}


async def test_kubectl_field_selectors_are_those_each_kind_indexes(kube: FakeKubeApi, tmp_path: Path) -> None:
    kube.add_pod(NS, "on-a", node="node-a")
    kube.add_pod(NS, "on-b", node="node-b")
    kube.add_deployment(NS, "d", replicas=1)

    code, stdout, stderr = await kubectl(kube, tmp_path, "get", "pods", "-n", NS, "--field-selector",
                                         "spec.nodeName=node-a", "-o", "name")
    assert code == 0, stderr
    assert stdout.split() == ["pod/on-a"]

    code, _, stderr = await kubectl(kube, tmp_path, "get", "deployments", "-n", NS, "--field-selector",
                                    "spec.replicas=1")
    assert code != 0
    assert "Error from server (BadRequest)" in stderr
    assert '"spec.replicas" is not a known field selector: only "metadata.name", "metadata.namespace"' in stderr

    code, _, stderr = await kubectl(kube, tmp_path, "get", "leases", "-n", NS, "--field-selector",
                                    "spec.holderIdentity=a")
    assert code != 0 and '"spec.holderIdentity" is not a known field selector' in stderr

    code, _, stderr = await kubectl(kube, tmp_path, "get", "rts", "-n", NS, "--field-selector", "spec.replicas=1")
    assert code != 0 and "field label not supported: spec.replicas" in stderr


async def test_kubectl_raw_list_with_a_resource_version_match_but_no_version_is_invalid(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    code, _, stderr = await kubectl(kube, tmp_path, "get", "--raw", "/api/v1/pods?resourceVersionMatch=NotOlderThan")

    assert code != 0
    assert ('The ListOptions "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless '
            "resourceVersion is provided") in stderr
    code, stdout, stderr = await kubectl(kube, tmp_path, "get", "--raw",
                                         "/api/v1/pods?resourceVersion=0&resourceVersionMatch=NotOlderThan")
    assert code == 0, stderr
    assert json.loads(stdout)["kind"] == "PodList"


async def test_a_watch_with_a_resource_version_match_needs_send_initial_events(kube: FakeKubeApi) -> None:
    async with aiohttp.ClientSession() as session, session.get(
        f"{kube.url}/api/v1/pods", params={"watch": "true", "resourceVersionMatch": "NotOlderThan"}
    ) as response:
        status = await response.json()

    assert response.status == 422
    assert status["details"]["causes"] == [{
        "reason": "FieldValueForbidden", "field": "resourceVersionMatch",
        "message": "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"}]


_LABELS = st.one_of(st.sampled_from(["metadata.name", "metadata.namespace", "spec.host", *POD_FIELD_LABELS]),
                    st.from_regex(r"\A[a-z]{1,8}\.[a-zA-Z]{1,10}\Z"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(label=_LABELS)
async def test_any_field_label_is_taken_exactly_where_the_kind_converts_it(label: str) -> None:
    pods_take = label in {"metadata.name", "metadata.namespace", "spec.host", *POD_FIELD_LABELS}
    deployments_take = label in {"metadata.name", "metadata.namespace"}
    async with FakeKubeApi() as kube, aiohttp.ClientSession() as session:
        for path, taken in ((f"/api/v1/namespaces/{NS}/pods", pods_take),
                            (f"/apis/apps/v1/namespaces/{NS}/deployments", deployments_take)):
            async with session.get(kube.url + path, params={"fieldSelector": f"{label}=x"}) as response:
                answer = await response.json()
            assert response.status == (200 if taken else 400), (path, label, answer)
            assert taken or label in answer["message"]


async def test_once_a_kubeconfig_gave_a_token_a_request_without_credentials_is_anonymous_and_forbidden(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    """kube-apiserver takes a request without credentials as `system:anonymous` (`--anonymous-auth`, on by
    default) and RBAC refuses that user all but the public paths: 403 naming the user, not 401."""
    kube.add_pod(NS, "p")
    pods = f"{kube.url}/api/v1/namespaces/{NS}/pods"
    async with aiohttp.ClientSession() as session:
        async with session.get(pods) as before:
            assert before.status == 200  # no client was given credentials yet: the fake takes anyone
        kube.write_kubeconfig(tmp_path / "kubeconfig")

        async with session.get(pods) as anonymous:
            status = await anonymous.json()
        async with session.get(f"{kube.url}/apis") as discovery:
            discovery_status = await discovery.json()
        async with session.get(pods, headers={"Authorization": "Bearer test-token"}) as with_token:
            assert with_token.status == 200
        for public in ("/healthz", "/version"):
            async with session.get(kube.url + public) as answer:
                assert answer.status == 200, public

    assert anonymous.status == 403
    assert (status["reason"], status["message"]) == (
        "Forbidden", f'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" '
                     f'in the namespace "{NS}"')
    assert (discovery.status, discovery_status["message"]) == (
        403, 'forbidden: User "system:anonymous" cannot get path "/apis"')
    # kubectl sends no credentials over the fake's plain http (it would over TLS): it is let through.
    code, stdout, stderr = await kubectl(kube, tmp_path, "get", "pods", "-n", NS, "-o", "name")
    assert code == 0, stderr
    assert stdout.split() == ["pod/p"]


async def test_with_anonymous_auth_off_a_request_without_credentials_is_unauthorized(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    """A cluster started with `--anonymous-auth=false` answers 401 to every request without credentials."""
    kube.anonymous_auth = False
    kube.write_kubeconfig(tmp_path / "kubeconfig")
    async with aiohttp.ClientSession() as session, session.get(f"{kube.url}/api/v1/namespaces/{NS}/pods") as anonymous:
        status = await anonymous.json()

    assert anonymous.status == 401
    assert (status["reason"], status["message"]) == ("Unauthorized", "Unauthorized")


async def test_a_runtime_scale_is_checked_against_its_crd_schema_and_pruned(kube: FakeKubeApi, tmp_path: Path) -> None:
    kube.add_runtime_scale(NS, "triton", replicas=1)

    code, _, stderr = await kubectl(kube, tmp_path, "patch", "-n", NS, "rts/triton", "--subresource", "status",
                                    "--type", "merge", "-p", '{"status": {"conditions": [{"type": "Ready", '
                                    '"status": "Maybe"}]}}')
    assert code != 0
    assert 'The RuntimeScale "triton" is invalid' in stderr
    assert 'status.conditions[0].status: Unsupported value: "Maybe": supported values: "True", "False", ' \
        '"Unknown"' in stderr
    assert "status.conditions[0].lastTransitionTime: Required value" in stderr

    code, _, stderr = await kubectl(kube, tmp_path, "scale", "-n", NS, "rts/triton", "--replicas=70000")
    assert code != 0 and "spec.replicas: Invalid value: 70000" in stderr

    code, _, stderr = await kubectl(kube, tmp_path, "patch", "-n", NS, "rts/triton", "--type", "merge", "-p",
                                    '{"spec": {"replicas": 3, "notInTheSchema": true}}')
    assert code == 0, stderr
    assert kube.stored("runtimescales", NS, "triton")["spec"] == {"servingRuntime": "triton", "replicas": 3}
