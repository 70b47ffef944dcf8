"""When the Kubernetes API cannot review a request's credentials or rights, the operator is told, once a minute.

A TokenReview that cannot be made (the API server down or slow, or a 403 because the adapter's ServiceAccount
lacks the `system:auth-delegator` binding) still answers 401, as kube-apiserver's `WithAuthentication` does,
but it is not a bad token: it is logged as a WARNING that says why ("Unable to authenticate the request" is
upstream's line) and counted apart in `authentications_total` (`result="error"`). A SubjectAccessReview that
fails is logged too; an outage must not write one line per request. These tests make real HTTPS requests and
read the answers, the log and the adapter's own `/metrics`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from tests.api.conftest import SecuredApi
from tests.api.test_auth_gate import assert_status

SCRAPER = {"X-Remote-User": "prometheus"}
HPA = {"X-Remote-User": "system:serviceaccount:kube-system:horizontal-pod-autoscaler"}
FORBIDDEN_REVIEW = ('tokenreviews.authentication.k8s.io is forbidden: User "system:serviceaccount:'
                    'modelmesh-autoscaler:modelmesh-autoscaler" cannot create resource "tokenreviews" in API group '
                    '"authentication.k8s.io" at the cluster scope')


def warnings(caplog: pytest.LogCaptureFixture, *words: str) -> list[str]:
    return [record.getMessage() for record in caplog.records
            if record.levelno >= logging.WARNING and all(word in record.getMessage() for word in words)]


async def self_metrics(api: SecuredApi) -> str:
    status, text = await api.get("/metrics", cert=api.pki.proxy, headers=SCRAPER)
    assert status == 200, text
    assert isinstance(text, str)
    return text


async def test_a_token_review_that_cannot_be_made_is_401_logged_once_a_minute_and_counted_apart(
        secured: SecuredApi, metric_path: Callable[..., str], caplog: pytest.LogCaptureFixture) -> None:
    secured.kube.allow()
    secured.kube.tokens["keda"] = ("keda", [])
    fault = secured.kube.fail("tokenreviews", 403, times=None, message=FORBIDDEN_REVIEW)
    for _ in range(5):
        status, body = await secured.get(metric_path(), token="keda")
        assert status == 401
        assert_status(body, 401, "Unauthorized")
    assert fault.hits == 5
    [said] = warnings(caplog, "TokenReview")
    assert "403" in said and "cannot create resource" in said, said
    secured.kube.clear_faults()
    secured.kube.fail("tokenreviews", 500, times=None)  # another cause: a line of its own
    assert (await secured.get(metric_path(), token="keda"))[0] == 401
    assert len(warnings(caplog, "TokenReview")) == 2
    secured.kube.clear_faults()
    assert (await secured.get(metric_path(), token="bad"))[0] == 401  # refused by a review: no warning
    assert len(warnings(caplog, "TokenReview")) == 2
    text = await self_metrics(secured)
    assert 'modelmesh_autoscaler_authentications_total{method="token",result="error"} 6.0' in text
    assert 'modelmesh_autoscaler_authentications_total{method="none",result="failure"} 1.0' in text


async def test_a_failing_access_review_is_logged_once_a_minute_not_once_a_request(
        secured: SecuredApi, metric_path: Callable[..., str], caplog: pytest.LogCaptureFixture) -> None:
    secured.kube.allow()
    secured.kube.fail("subjectaccessreviews", 500, times=None)
    for _ in range(30):
        status, body = await secured.get(metric_path(), cert=secured.pki.proxy, headers=HPA)
        assert status == 500
        assert_status(body, 500, "InternalError")
    [said] = warnings(caplog, "cannot authorize")
    assert "SubjectAccessReview" in said or "subjectaccessreview" in said, said
