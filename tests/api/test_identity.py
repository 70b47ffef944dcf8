"""Request attributes as kube-apiserver's RequestInfoFactory derives them: one row per case."""

from __future__ import annotations

import pytest

from autoscaler.api.authz import access_review_spec
from autoscaler.api.identity import (
    Attributes,
    NonResourceAttributes,
    ResourceAttributes,
    UserInfo,
    describe,
    request_attributes,
)

G, V = "external.metrics.k8s.io", "v1beta1"


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("GET", f"/apis/{G}/{V}/namespaces/ml/modelmesh_gpu_busy",
         ResourceAttributes("list", G, V, "modelmesh_gpu_busy", "ml")),
        ("GET", f"/apis/{G}/{V}/namespaces/ml/MODELMESH_GPU_BUSY",
         ResourceAttributes("list", G, V, "modelmesh_gpu_busy", "ml")),
        ("HEAD", f"/apis/{G}/{V}/namespaces/ml/modelmesh_gpu_busy",
         ResourceAttributes("list", G, V, "modelmesh_gpu_busy", "ml")),
        ("GET", f"/apis/{G}/{V}/namespaces/ml/modelmesh_gpu_busy/x",
         ResourceAttributes("get", G, V, "modelmesh_gpu_busy", "ml", "x")),
        ("POST", f"/apis/{G}/{V}/namespaces/ml/modelmesh_gpu_busy",
         ResourceAttributes("create", G, V, "modelmesh_gpu_busy", "ml")),
        ("DELETE", f"/apis/{G}/{V}/namespaces/ml/modelmesh_gpu_busy",
         ResourceAttributes("deletecollection", G, V, "modelmesh_gpu_busy", "ml")),
        ("GET", f"/apis/{G}/{V}/namespaces/ml", ResourceAttributes("get", G, V, "namespaces", "ml", "ml")),
        ("GET", "/api/v1/namespaces/ml/pods", ResourceAttributes("list", "", "v1", "pods", "ml")),
        ("GET", f"/apis/{G}/{V}", NonResourceAttributes("get", f"/apis/{G}/{V}")),
        ("GET", f"/apis/{G}", NonResourceAttributes("get", f"/apis/{G}")),
        ("GET", "/apis", NonResourceAttributes("get", "/apis")),
        ("GET", "/", NonResourceAttributes("get", "/")),
        ("PUT", "/version", NonResourceAttributes("put", "/version")),
        ("GET", "/keda/v1/namespaces/ml/runtimes/rt",
         ResourceAttributes("get", G, V, "runtimes", "ml", "rt")),
        ("GET", "/keda/v1/namespaces/ml/runtimes/rt/extra",
         NonResourceAttributes("get", "/keda/v1/namespaces/ml/runtimes/rt/extra")),
        ("GET", "/debug/runtimes/ml/rt", ResourceAttributes("get", G, V, "runtimes", "ml", "rt", "debug")),
        ("GET", "/debug/runtimes/ml", NonResourceAttributes("get", "/debug/runtimes/ml")),
        ("GET", f"/apis/{G}/{V}/namespaces/ml%2Fx/modelmesh_gpu_busy",
         ResourceAttributes("list", G, V, "modelmesh_gpu_busy", "ml/x")),
        ("GET", f"/apis/{G}/{V}/namespaces/ml/%6Dodelmesh_gpu_busy",
         ResourceAttributes("list", G, V, "modelmesh_gpu_busy", "ml")),
        ("GET", f"/apis/{G}//namespaces/ml/m", NonResourceAttributes("get", f"/apis/{G}//namespaces/ml/m")),
        ("GET", "/open%20api", NonResourceAttributes("get", "/open api")),
    ],
    ids=["metric", "metric upper case", "head", "named", "post", "delete", "namespace", "core group",
         "group version", "group", "apis", "root", "non-resource put", "keda", "keda too long", "debug",
         "debug too short", "encoded slash stays in its segment", "encoded letters", "empty segment",
         "decoded non-resource path"],
)
def test_request_attributes(method: str, path: str, expected: Attributes) -> None:
    assert request_attributes(method, path) == expected


def test_forbidden_descriptions_read_like_kubes() -> None:
    assert describe(ResourceAttributes("list", G, V, "m", "ml")) == \
        'list resource "m" in API group "external.metrics.k8s.io" in the namespace "ml"'
    assert describe(ResourceAttributes("get", G, V, "runtimes", "ml", "rt", "debug")) == \
        'get resource "runtimes/debug" in API group "external.metrics.k8s.io" in the namespace "ml"'
    assert describe(NonResourceAttributes("get", "/apis")) == 'get path "/apis"'


def test_review_spec_carries_the_whole_subject() -> None:
    user = UserInfo("u", "uid-1", ("g1", "g2"), (("scopes", ("a", "b")),))
    spec = access_review_spec(user, ResourceAttributes("list", G, V, "m", "ml"))
    assert spec == {
        "user": "u", "uid": "uid-1", "groups": ["g1", "g2"], "extra": {"scopes": ["a", "b"]},
        "resourceAttributes": {"verb": "list", "group": G, "version": V, "resource": "m", "namespace": "ml"},
    }
    assert access_review_spec(UserInfo("u"), NonResourceAttributes("get", "/apis")) == {
        "user": "u", "groups": [], "nonResourceAttributes": {"path": "/apis", "verb": "get"}}
