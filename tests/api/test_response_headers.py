"""What every answer of the API says about itself in its headers, as kube-apiserver's answers do.

kube-apiserver's handler chain marks every answer `Cache-Control: no-cache, private` (`WithCacheControl`: a
metric value, a forbidden message or a discovery document is for this client now, never for a shared cache)
and `X-Content-Type-Options: nosniff` (`responsewriters`, the health checks: a browser that opens a path
must not read a JSON or text answer as HTML), and names no implementation (Go's server sends no `Server`).
aiohttp names itself and its Python by default (`Server: Python/3.11 aiohttp/3.x`), which tells a scanner
which versions' flaws to try. These tests read the headers off real HTTPS answers of the secured API: every
route, its errors (401, 403, 404, 405, 406) and the open health paths.
"""

from __future__ import annotations

import aiohttp
import pytest
from multidict import CIMultiDictProxy

from tests.api.conftest import SecuredApi

HPA = {"X-Remote-User": "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
       "X-Remote-Group": "system:serviceaccounts"}
ADMIN = {"X-Remote-User": "admin", "X-Remote-Group": "system:masters"}


async def answer_headers(api: SecuredApi, path: str, headers: dict[str, str] | None = None, *,
                         method: str = "GET", proxied: bool = True) -> tuple[int, CIMultiDictProxy[str]]:
    """The status and headers a client sees for `path`, through the aggregator's certificate unless not
    `proxied` (no credentials at all)."""
    connector = aiohttp.TCPConnector(ssl=api.context(api.pki.proxy if proxied else None))
    async with aiohttp.ClientSession(connector=connector) as session, \
            session.request(method, api.url + path, headers=headers or {}) as response:
        await response.read()
        return response.status, response.headers


def assert_like_kube(status: int, headers: CIMultiDictProxy[str], expected: int) -> None:
    assert status == expected, (status, dict(headers))
    assert headers.getall("Cache-Control", []) == ["no-cache, private"], dict(headers)
    assert headers.getall("X-Content-Type-Options", []) == ["nosniff"], dict(headers)
    assert "Server" not in headers, dict(headers)


@pytest.mark.parametrize(("path", "status"), [
    ("/apis/external.metrics.k8s.io/v1beta1/namespaces/ml/modelmesh_desired_replicas"
     "?labelSelector=deployment%3Dmodelmesh-serving-triton", 200),
    ("/apis/external.metrics.k8s.io/v1beta1/namespaces/ml/modelmesh_desired_replicas"
     "?labelSelector=deployment%3Dnot-there", 404),
    ("/apis/external.metrics.k8s.io/v1beta1/namespaces/ml/modelmesh_desired_replicas?labelSelector=x%3Dy", 400),
    ("/apis", 200),
    ("/apis/external.metrics.k8s.io", 200),
    ("/apis/external.metrics.k8s.io/v1beta1", 200),
    ("/version", 200),
    ("/openapi/v2", 200),
    ("/debug/runtimes/ml/modelmesh-serving-triton", 200),
    ("/keda/v1/namespaces/ml/runtimes/modelmesh-serving-triton", 200),
    ("/metrics", 200),
    ("/healthz", 200),
    ("/readyz", 200),
    ("/no/such/path", 404),
])
async def test_every_route_answers_with_kubes_headers_and_no_server_name(
        secured: SecuredApi, path: str, status: int) -> None:
    secured.kube.allow(user=ADMIN["X-Remote-User"])
    assert_like_kube(*await answer_headers(secured, path, ADMIN), status)


async def test_refusals_answer_with_kubes_headers_and_no_server_name(secured: SecuredApi) -> None:
    metric = ("/apis/external.metrics.k8s.io/v1beta1/namespaces/ml/modelmesh_desired_replicas"
              "?labelSelector=deployment%3Dmodelmesh-serving-triton")
    assert_like_kube(*await answer_headers(secured, metric, proxied=False), 401)
    assert_like_kube(*await answer_headers(secured, metric, HPA), 403)  # the HPA is not allowed here
    secured.kube.allow(user=ADMIN["X-Remote-User"])
    assert_like_kube(*await answer_headers(secured, metric, {**ADMIN, "Accept": "application/yaml"}), 406)
    assert_like_kube(*await answer_headers(secured, "/apis", ADMIN, method="POST"), 405)
    assert_like_kube(*await answer_headers(secured, metric, ADMIN), 200)
