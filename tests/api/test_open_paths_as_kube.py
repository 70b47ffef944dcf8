"""`--authorization-always-allow-paths` means what it means on kube-apiserver, metrics-server and
prometheus-adapter (k8s.io/apiserver's `pkg/authorization/path/path.go`), since users bring their values from
there: a leading `/` is optional, and a listed path opens non-resource requests only, so no entry, however wide,
serves a metric value, a KEDA runtime or a runtime's `/debug` to a caller without credentials or rights.
(A `*` before an entry's end stops the start: tests/hardening/test_startup_errors.py.)"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from autoscaler.settings import ServeSettings
from tests.api.builders import KEY, Pki
from tests.api.conftest import secured_api
from tests.fakes.kube import FakeKubeApi

METRIC = (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{KEY.namespace}/modelmesh_desired_replicas"
          f"?labelSelector=deployment%3D{KEY.deployment}")
RESOURCES = [METRIC, f"/keda/v1/namespaces/{KEY.namespace}/runtimes/{KEY.deployment}",
             f"/debug/runtimes/{KEY.namespace}/{KEY.deployment}"]


async def test_health_paths_listed_without_their_leading_slash_answer_the_kubelets_probes(
        pki: Pki, kube: FakeKubeApi, settings_for: Callable[..., ServeSettings]) -> None:
    """`healthz,livez,readyz`, as kube accepts them: the probes need no credentials (they got 401, so the pod
    was never Ready and the APIService never Available)."""
    settings = settings_for(authorization_always_allow_paths=("healthz", "livez", "readyz"))
    async with secured_api(pki, kube, settings) as api:
        for path in ("/healthz", "/livez", "/readyz"):
            status, body = await api.get(path)
            assert status == 200, (path, body)
        assert kube.token_reviews == [] and kube.access_reviews == []


@pytest.mark.parametrize("opened", [("/apis/*",), ("*",), ("/*",), ("/keda/*", "/debug/*"), (METRIC.split("?")[0],)],
                         ids=["apis-prefix", "star", "slash-star", "keda-and-debug", "the-metric-path"])
async def test_no_open_path_serves_a_resource_to_a_caller_without_credentials(
        pki: Pki, kube: FakeKubeApi, settings_for: Callable[..., ServeSettings], opened: tuple[str, ...]) -> None:
    """An uptime probe's `/apis/*` opens discovery, not every tenant's metric values."""
    async with secured_api(pki, kube, settings_for(authorization_always_allow_paths=opened)) as api:
        for path in RESOURCES:
            status, body = await api.get(path)
            assert (status, body["reason"]) == (401, "Unauthorized"), (path, body)


async def test_a_resource_under_an_open_prefix_is_still_authorized_for_a_token(
        pki: Pki, kube: FakeKubeApi, settings_for: Callable[..., ServeSettings]) -> None:
    """A token without the grant gets kube's 403 for the metric, while discovery under the prefix is open."""
    kube.tokens["probe"] = ("system:serviceaccount:monitoring:blackbox", ["system:serviceaccounts"])
    async with secured_api(pki, kube, settings_for(authorization_always_allow_paths=("/apis/*",))) as api:
        status, body = await api.get(METRIC, token="probe")
        assert (status, body["reason"]) == (403, "Forbidden"), body
        assert 'cannot list resource "modelmesh_desired_replicas" in API group "external.metrics.k8s.io"' in \
            body["message"], body
        for discovery in ("/apis/external.metrics.k8s.io", "/apis/external.metrics.k8s.io/v1beta1"):
            status, body = await api.get(discovery)
            assert status == 200, (discovery, body)
