"""The gate end to end over real TLS: who gets in, as whom, and what the Kubernetes API is asked."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from tests.api.builders import KEY
from tests.api.conftest import SecuredApi

HPA = {"X-Remote-User": "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
       "X-Remote-Group": "system:serviceaccounts"}


def assert_status(body: Any, code: int, reason: str) -> None:
    assert isinstance(body, dict), body
    assert body["kind"] == "Status"
    assert body["apiVersion"] == "v1"
    assert body["status"] == "Failure"
    assert body["code"] == code
    assert body["reason"] == reason
    assert body["message"]


async def test_front_proxy_with_an_allowed_user_gets_the_metric(
        secured: SecuredApi, metric_path: Callable[..., str]) -> None:
    secured.kube.allow(user=HPA["X-Remote-User"], verb="list", group="external.metrics.k8s.io")
    status, body = await secured.get(metric_path(), cert=secured.pki.proxy, headers=HPA)
    assert status == 200, body
    assert body["kind"] == "ExternalMetricValueList"
    [spec] = secured.kube.access_reviews
    assert spec["user"] == HPA["X-Remote-User"]
    assert spec["groups"] == ["system:serviceaccounts", "system:authenticated"]
    assert spec["resourceAttributes"] == {
        "verb": "list", "group": "external.metrics.k8s.io", "version": "v1beta1",
        "resource": "modelmesh_desired_replicas", "namespace": KEY.namespace,
    }


async def test_a_denied_user_gets_403_with_kubes_message(
        secured: SecuredApi, metric_path: Callable[..., str]) -> None:
    status, body = await secured.get(metric_path(), cert=secured.pki.proxy, headers={"X-Remote-User": "bob"})
    assert status == 403
    assert_status(body, 403, "Forbidden")
    assert 'User "bob" cannot list resource "modelmesh_desired_replicas" in API group ' \
           f'"external.metrics.k8s.io" in the namespace "{KEY.namespace}"' in body["message"]


async def test_a_denied_user_of_a_named_runtime_is_told_its_name_as_kube_does(secured: SecuredApi) -> None:
    """kube-apiserver names the object a request is forbidden on (`NewForbidden`: `runtimes.<group> "<name>" is
    forbidden: ...`); the message left the name out."""
    path = f"/keda/v1/namespaces/{KEY.namespace}/runtimes/{KEY.deployment}"
    status, body = await secured.get(path, cert=secured.pki.proxy, headers={"X-Remote-User": "bob"})
    assert status == 403
    assert_status(body, 403, "Forbidden")
    assert body["message"].startswith(f'runtimes.external.metrics.k8s.io "{KEY.deployment}" is forbidden: User '
                                      '"bob" cannot get resource "runtimes" in API group "external.metrics.k8s.io" '
                                      f'in the namespace "{KEY.namespace}"'), body["message"]


async def test_denial_comes_before_routing_so_runtimes_cannot_be_probed(
        secured: SecuredApi, metric_path: Callable[..., str]) -> None:
    status, body = await secured.get(metric_path(deployment="no-such-runtime"), cert=secured.pki.proxy,
                                     headers={"X-Remote-User": "bob"})
    assert status == 403
    assert_status(body, 403, "Forbidden")


@pytest.mark.parametrize("headers", [{}, {"X-Remote-User": "admin"}], ids=["plain", "spoofed header"])
async def test_no_credentials_is_401(secured: SecuredApi, metric_path: Callable[..., str],
                                     headers: dict[str, str]) -> None:
    secured.kube.allow()  # even a cluster that allows everything
    status, body = await secured.get(metric_path(), headers=headers)
    assert status == 401
    assert_status(body, 401, "Unauthorized")
    assert secured.kube.access_reviews == []


async def test_front_proxy_certificate_without_a_user_header_is_401(
        secured: SecuredApi, metric_path: Callable[..., str]) -> None:
    secured.kube.allow()
    status, body = await secured.get(metric_path(), cert=secured.pki.proxy)
    assert status == 401
    assert_status(body, 401, "Unauthorized")


async def test_proxy_certificate_with_a_cn_not_allowed_is_401(
        secured: SecuredApi, metric_path: Callable[..., str]) -> None:
    secured.kube.allow()
    status, body = await secured.get(metric_path(), cert=secured.pki.rogue_proxy, headers=HPA)
    assert status == 401
    assert_status(body, 401, "Unauthorized")
    assert secured.kube.access_reviews == []


async def test_client_certificate_user_cannot_spoof_identity_headers(
        secured: SecuredApi, metric_path: Callable[..., str]) -> None:
    secured.kube.allow(user="alice")
    status, _ = await secured.get(metric_path(), cert=secured.pki.alice,
                                  headers={"X-Remote-User": "admin", "X-Remote-Group": "system:masters"})
    assert status == 200
    [spec] = secured.kube.access_reviews
    assert spec["user"] == "alice"
    assert spec["groups"] == ["analysts", "system:authenticated"]


async def test_certificate_from_another_ca_fails_the_handshake(
        secured: SecuredApi, metric_path: Callable[..., str]) -> None:
    with pytest.raises(aiohttp.ClientError):
        await secured.get(metric_path(), cert=secured.pki.stranger, headers=HPA)


async def test_bearer_tokens_are_reviewed_once_per_ttl(
        secured: SecuredApi, metric_path: Callable[..., str]) -> None:
    secured.kube.tokens["good"] = ("carol", ["devs"])
    secured.kube.allow(user="carol")
    for _ in range(3):
        status, _ = await secured.get(metric_path(), token="good", headers={"X-Remote-User": "admin"})
        assert status == 200
    assert [review["token"] for review in secured.kube.token_reviews] == ["good"]
    assert secured.kube.access_reviews[0]["user"] == "carol"
    status, body = await secured.get(metric_path(), token="bad")
    assert status == 401
    assert_status(body, 401, "Unauthorized")


async def test_access_reviews_are_cached_per_subject_and_attributes(
        secured: SecuredApi, metric_path: Callable[..., str]) -> None:
    secured.kube.allow(user="hpa")
    for _ in range(3):
        assert (await secured.get(metric_path(), cert=secured.pki.proxy, headers={"X-Remote-User": "hpa"}))[0] == 200
    assert len(secured.kube.access_reviews) == 1
    await secured.get(metric_path("modelmesh_gpu_busy"), cert=secured.pki.proxy, headers={"X-Remote-User": "hpa"})
    await secured.get(metric_path(), cert=secured.pki.proxy,
                      headers={"X-Remote-User": "hpa", "X-Remote-Group": "extra-group"})
    assert len(secured.kube.access_reviews) == 3


async def test_extra_headers_reach_the_review_with_decoded_keys(
        secured: SecuredApi, metric_path: Callable[..., str]) -> None:
    secured.kube.allow()
    headers = {"X-Remote-User": "dave", "X-Remote-Extra-Scopes": "read", "X-Remote-Extra-Example.com%2fTeam": "ml"}
    assert (await secured.get(metric_path(), cert=secured.pki.proxy, headers=headers))[0] == 200
    assert secured.kube.access_reviews[0]["extra"] == {"scopes": ["read"], "example.com/team": ["ml"]}


@pytest.mark.parametrize(
    ("path", "attributes"),
    [
        ("/apis", {"nonResourceAttributes": {"path": "/apis", "verb": "get"}}),
        ("/openapi/v2", {"nonResourceAttributes": {"path": "/openapi/v2", "verb": "get"}}),
        (f"/keda/v1/namespaces/{KEY.namespace}/runtimes/{KEY.deployment}",
         {"resourceAttributes": {"verb": "get", "group": "external.metrics.k8s.io", "version": "v1beta1",
                                 "resource": "runtimes", "namespace": KEY.namespace, "name": KEY.deployment}}),
        (f"/debug/runtimes/{KEY.namespace}/{KEY.deployment}",
         {"resourceAttributes": {"verb": "get", "group": "external.metrics.k8s.io", "version": "v1beta1",
                                 "resource": "runtimes", "subresource": "debug", "namespace": KEY.namespace,
                                 "name": KEY.deployment}}),
    ],
    ids=["discovery", "openapi", "keda", "debug"],
)
async def test_every_protected_path_is_reviewed_with_its_attributes(
        secured: SecuredApi, path: str, attributes: dict[str, Any]) -> None:
    secured.kube.allow(user="erin")
    status, _ = await secured.get(path, cert=secured.pki.proxy, headers={"X-Remote-User": "erin"})
    assert status == 200
    [spec] = secured.kube.access_reviews
    assert {k: v for k, v in spec.items() if k.endswith("Attributes")} == attributes


@pytest.mark.parametrize("path", ["/healthz", "/livez", "/readyz"])
async def test_health_needs_no_credentials(secured: SecuredApi, path: str) -> None:
    status, _ = await secured.get(path)
    assert status == 200
    assert secured.kube.requests == []


async def test_self_metrics_need_credentials_by_default(secured: SecuredApi) -> None:
    """They name every runtime with its values: not open, as k8s.io/apiserver's default (tests/api/
    test_metrics_authorized.py has the grant)."""
    status, body = await secured.get("/metrics")
    assert_status(body, 401, "Unauthorized")
    assert status == 401


async def test_slow_kubernetes_api_never_blocks_health_and_never_allows(
        secured: SecuredApi, metric_path: Callable[..., str]) -> None:
    secured.kube.allow()
    secured.kube.delay("subjectaccessreviews", 5.0)
    pending = asyncio.create_task(secured.get(metric_path(), cert=secured.pki.proxy, headers=HPA))
    await asyncio.sleep(0.05)
    assert (await secured.get("/healthz"))[0] == 200
    assert not pending.done()  # health was answered while the review still waited on the API server
    status, body = await pending
    assert status == 500
    assert_status(body, 500, "InternalError")


@pytest.mark.parametrize("fault", [500, 429, 403])
async def test_failed_reviews_fail_closed_and_are_not_cached(
        secured: SecuredApi, metric_path: Callable[..., str], fault: int) -> None:
    """A review failing on every try (one failure is tried again: tests/api/test_review_retries.py)."""
    secured.kube.allow()
    secured.kube.fail("subjectaccessreviews", fault, times=None)
    status, body = await secured.get(metric_path(), cert=secured.pki.proxy, headers=HPA)
    assert status == 500
    assert_status(body, 500, "InternalError")
    secured.kube.clear_faults()
    assert (await secured.get(metric_path(), cert=secured.pki.proxy, headers=HPA))[0] == 200


async def test_kubernetes_api_down_is_500_for_proxy_requests_and_401_for_tokens(
        secured: SecuredApi, metric_path: Callable[..., str]) -> None:
    secured.kube.allow()
    await secured.kube.pause()
    try:
        assert (await secured.get(metric_path(), cert=secured.pki.proxy, headers=HPA))[0] == 500
        assert (await secured.get(metric_path(), token="anything"))[0] == 401
        assert (await secured.get("/readyz"))[0] == 200
    finally:
        await secured.kube.resume()


async def test_self_metrics_count_decisions(secured: SecuredApi, metric_path: Callable[..., str]) -> None:
    secured.kube.allow(user="hpa")
    await secured.get(metric_path(), cert=secured.pki.proxy, headers={"X-Remote-User": "hpa"})
    await secured.get(metric_path(), cert=secured.pki.proxy, headers={"X-Remote-User": "hpa"})
    await secured.get(metric_path())
    secured.kube.tokens["scraper"] = ("prometheus", [])  # a scrape as Prometheus makes it: a token, reviewed too
    secured.kube.allow(user="prometheus", verb="get", path="/metrics")
    status, text = await secured.get("/metrics", token="scraper")
    assert status == 200
    # Reviewed: the HPA's first request and the scrape itself; cached: the HPA's second.
    assert 'modelmesh_autoscaler_authorization_decisions_total{cached="false",decision="allowed"} 2.0' in text
    assert 'modelmesh_autoscaler_authorization_decisions_total{cached="true",decision="allowed"} 1.0' in text
    assert 'modelmesh_autoscaler_authentications_total{method="none",result="failure"} 1.0' in text
    assert 'modelmesh_autoscaler_authentications_total{method="token",result="success"} 1.0' in text
    assert 'modelmesh_autoscaler_kube_api_request_duration_seconds_count{call="subjectaccessreview",' \
           'outcome="ok"} 2.0' in text


async def test_the_reviewed_namespace_is_the_one_the_router_serves(secured: SecuredApi) -> None:
    secured.kube.allow(user="hpa")
    path = ("/apis/external.metrics.k8s.io/v1beta1/namespaces/ml%2Fother/modelmesh_gpu_busy"
            f"?labelSelector=deployment%3D{KEY.deployment}")
    status, body = await secured.get(path, cert=secured.pki.proxy, headers={"X-Remote-User": "hpa"})
    assert status == 404, body  # authorized for namespace "ml/other", which serves nothing
    assert secured.kube.access_reviews[0]["resourceAttributes"]["namespace"] == "ml/other"


async def test_each_request_on_a_connection_kept_open_is_judged_by_its_own_headers(
        secured: SecuredApi, metric_path: Callable[..., str]) -> None:
    """The aggregator sends every user's requests over the same few connections: what the gate found for the
    previous request on a connection must never answer for a request with other identity headers."""
    secured.kube.allow(user=HPA["X-Remote-User"], verb="list", group="external.metrics.k8s.io")
    connector = aiohttp.TCPConnector(ssl=secured.context(secured.pki.proxy), limit=1)
    async with aiohttp.ClientSession(connector=connector) as session:
        async def answer(headers: dict[str, str]) -> tuple[int, str]:
            async with session.get(secured.url + metric_path(), headers=headers) as response:
                body = await response.json()
                return response.status, body.get("message", body["kind"])

        hpa = await answer(HPA)
        as_bob = await answer({**HPA, "X-Remote-User": "bob"})
        with_extra = await answer({**HPA, "X-Remote-Extra-Scopes": "view"})  # another subject: reviewed anew
        no_user = await answer({"X-Remote-Group": "system:serviceaccounts"})
        again = await answer(HPA)
    assert hpa == again == (200, "ExternalMetricValueList")
    assert as_bob[0] == 403 and 'User "bob" cannot list' in as_bob[1]
    assert with_extra[0] == 200  # the fake API allows the user whatever its extra fields
    assert no_user[0] == 401
    assert [review.get("extra") for review in secured.kube.access_reviews] == [None, None, {"scopes": ["view"]}]


async def test_a_bearer_token_that_is_not_utf8_is_401_not_an_internal_error(
        secured: SecuredApi, metric_path: Callable[..., str], caplog: pytest.LogCaptureFixture) -> None:
    """Anyone on the pod network may send any bytes as a token: the answer is kube's 401, and no ERROR with
    a traceback is logged per request."""
    reader, writer = await asyncio.open_connection("127.0.0.1", int(secured.url.rsplit(":", 1)[1]),
                                                   ssl=secured.context(None), server_hostname="127.0.0.1")
    writer.write(f"GET {metric_path()} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n".encode()
                 + b"Authorization: Bearer \xff\xfe\r\n\r\n")
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 401 "), answer
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]
    assert secured.kube.token_reviews == []


async def test_connections_share_review_answers_only_for_equal_subjects(
        secured: SecuredApi, metric_path: Callable[..., str]) -> None:
    """Each connection authenticates on its own, and equal users found on different connections are handed
    out as one object (so the review cache compares keys by identity): a connection with the same user name
    but another group, or without a valid front-proxy certificate, must still get its own answer, on a
    connection kept open, after the HPA was allowed on another one."""
    secured.kube.allow(user=HPA["X-Remote-User"], groups=["system:serviceaccounts"])
    path = metric_path()

    async def answers(cert: Any, headers: dict[str, str], times: int = 2) -> list[int]:
        connector = aiohttp.TCPConnector(ssl=secured.context(cert), limit=1)
        statuses = []
        async with aiohttp.ClientSession(connector=connector) as session:
            for _ in range(times):
                async with session.get(secured.url + path, headers=headers) as response:
                    await response.read()
                    statuses.append(response.status)
        return statuses

    assert await answers(secured.pki.proxy, HPA) == [200, 200]
    assert await answers(secured.pki.proxy, HPA) == [200, 200]  # another connection: the same cached answer
    assert len(secured.kube.access_reviews) == 1
    assert await answers(secured.pki.proxy, {**HPA, "X-Remote-Group": "other"}) == [403, 403]
    assert await answers(secured.pki.rogue_proxy, HPA) == [401, 401]  # CN not in the allowed names
    assert await answers(secured.pki.alice, HPA) == [403, 403]  # the client CA's alice, headers not believed
    assert await answers(None, HPA) == [401, 401]
    assert await answers(secured.pki.proxy, HPA) == [200, 200]
    assert [(review["user"], review["groups"]) for review in secured.kube.access_reviews] == [
        (HPA["X-Remote-User"], ["system:serviceaccounts", "system:authenticated"]),
        (HPA["X-Remote-User"], ["other", "system:authenticated"]),
        ("alice", ["analysts", "system:authenticated"]),
    ]
