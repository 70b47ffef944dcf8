"""`/metrics` behind authentication and authorization, as metrics-server and prometheus-adapter serve it.

k8s.io/apiserver's `--authorization-always-allow-paths` default is `/healthz,/readyz,/livez`, and so is ours:
`/metrics` names every runtime with its served values, so it is authorized by a SubjectAccessReview of the
non-resource URL (`get /metrics`; Prometheus's service account is granted it by a ClusterRole with
`nonResourceURLs: ["/metrics"]`, manifests/examples/prometheus). These tests hold the default to it: no
credentials 401, a token without the grant 403 in kube's words, a token with it the page; and the flag that
opens it again does, without a call to the Kubernetes API.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from autoscaler.settings import ServeSettings
from tests.api.builders import Pki
from tests.api.conftest import SecuredApi, secured_api
from tests.fakes.kube import FakeKubeApi


@pytest.fixture
async def closed_metrics(
    pki: Pki, kube: FakeKubeApi, settings_for: Callable[..., ServeSettings]
) -> AsyncIterator[SecuredApi]:
    async with secured_api(pki, kube, settings_for(), kube_timeout_s=2.0) as api:  # the default settings
        yield api


async def test_metrics_without_credentials_is_401(closed_metrics: SecuredApi) -> None:
    status, body = await closed_metrics.get("/metrics")
    assert (status, body["reason"]) == (401, "Unauthorized")


async def test_metrics_for_a_token_without_the_grant_is_403_naming_the_url(closed_metrics: SecuredApi) -> None:
    closed_metrics.kube.tokens["scraper"] = ("system:serviceaccount:monitoring:prometheus", ["system:serviceaccounts"])
    status, body = await closed_metrics.get("/metrics", token="scraper")
    assert (status, body["reason"]) == (403, "Forbidden")
    assert 'User "system:serviceaccount:monitoring:prometheus" cannot get path "/metrics"' in body["message"], body


async def test_metrics_for_a_token_granted_get_on_the_url_is_the_page(closed_metrics: SecuredApi) -> None:
    user = "system:serviceaccount:monitoring:prometheus"
    closed_metrics.kube.tokens["scraper"] = (user, ["system:serviceaccounts"])
    closed_metrics.kube.allow(user=user, verb="get", path="/metrics")
    status, body = await closed_metrics.get("/metrics", token="scraper")
    assert status == 200 and "modelmesh_autoscaler_api_requests_total" in body
    [review] = closed_metrics.kube.access_reviews
    assert review["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
    status, _ = await closed_metrics.get("/healthz")  # health stays open for the kubelet
    assert status == 200


async def test_the_flag_opens_metrics_again_without_asking_the_kubernetes_api(
    pki: Pki, kube: FakeKubeApi, settings_for: Callable[..., ServeSettings]
) -> None:
    """`--authorization-always-allow-paths=/healthz,/livez,/readyz,/metrics`: the scrape needs no token (and
    anyone who reaches the port reads every runtime's values)."""
    opened = settings_for(authorization_always_allow_paths=("/healthz", "/livez", "/readyz", "/metrics"))
    async with secured_api(pki, kube, opened, kube_timeout_s=2.0) as api:
        status, body = await api.get("/metrics")
        assert status == 200 and "modelmesh_autoscaler_api_requests_total" in body
        assert kube.token_reviews == [] and kube.access_reviews == []
