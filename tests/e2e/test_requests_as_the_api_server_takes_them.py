"""Every request the adapter makes is one kube-apiserver takes: a real `serve` process with every part that talks
to Kubernetes switched on (pod discovery and watch, the HPA watch, deletion costs, leader election, the replica
bridge, TokenReviews and SubjectAccessReviews, the authentication ConfigMap) runs against the fake API server
started to refuse any request without the kubeconfig's bearer token, as a cluster does.

For months the reviews went without the token (a renamed library setting) and `serve` could not start on a
cluster, while the fake, which took requests without one, let every test pass. Here a request that a real server
would refuse fails the test by its answer: 401 without the token, 415 for a patch format the resource does not
take, 400 for a field selector on a field the kind does not index, 422 for contradictory list options or an
invalid object (the fake refuses each as kube-apiserver does: `tests/fakes/kube`)."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from tests.fakes.kube import RecordedRequest
from tests.manifests.test_rbac import record_requests

pytestmark = pytest.mark.slow

TOKEN = "test-token"  # what the fake's kubeconfig gives the adapter
REFUSALS = {400, 401, 403, 405, 406, 415, 422}
"""Answers that mean the server would not take the request as sent (409, 404 and 429 are answers the adapter
expects and acts on: a write raced, an object is gone, the server is busy)."""


@pytest.fixture(scope="module")
def requests(tmp_path_factory: pytest.TempPathFactory) -> list[RecordedRequest]:
    return asyncio.run(record_requests(tmp_path_factory.mktemp("wire"), require_token=TOKEN))


def _kind(request: RecordedRequest) -> str:
    return f"{request.method} {request.resource or request.path}"


def test_every_request_carries_the_adapters_bearer_token(requests: list[RecordedRequest]) -> None:
    without = Counter(_kind(r) for r in requests if r.headers.get("Authorization") != f"Bearer {TOKEN}")

    assert without == Counter()


def test_the_api_server_refuses_none_of_the_adapters_requests(requests: list[RecordedRequest]) -> None:
    refused = [(r.status, r.method, r.path, r.query, r.content_type, r.body) for r in requests
               if r.status in REFUSALS]

    assert refused == []


def test_every_kind_of_request_was_made(requests: list[RecordedRequest]) -> None:
    """The two tests above checked something: reads, lists, watches and every kind of write were among them."""
    kinds = {(r.method, r.resource, "watch" in r.query) for r in requests}

    assert {("GET", "pods", True), ("GET", "horizontalpodautoscalers", True), ("GET", "runtimescales", True),
            ("GET", "deployments", False), ("GET", "configmaps", False), ("PATCH", "pods", False),
            ("PATCH", "servingruntimes", False), ("PATCH", "runtimescales", False), ("POST", "leases", False),
            ("PUT", "leases", False), ("POST", "tokenreviews", False),
            ("POST", "subjectaccessreviews", False)} <= kinds


def test_patches_use_a_format_the_resource_takes(requests: list[RecordedRequest]) -> None:
    """A custom resource takes no strategic merge patch (415); the adapter merge-patches everything."""
    formats = {(r.resource, r.content_type) for r in requests if r.method == "PATCH"}

    assert formats == {("pods", "application/merge-patch+json"),
                       ("servingruntimes", "application/merge-patch+json"),
                       ("runtimescales", "application/merge-patch+json")}



def test_every_request_names_the_adapter(requests: list[RecordedRequest]) -> None:
    """The API server's audit log tells the adapter's clients apart (one service account) by their User-Agent: the
    library's own (`OpenAPI-Generator/37.0.2/python`) names no one an operator can find there."""
    others = Counter((_kind(r), r.headers.get("User-Agent", "")) for r in requests
                     if not r.headers.get("User-Agent", "").startswith("modelmesh-autoscaler/"))

    assert others == Counter()
