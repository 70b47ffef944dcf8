"""`system:masters` is let through without a SubjectAccessReview, as k8s.io/apiserver's default
`AlwaysAllowGroups` does (kube-apiserver's own authorizer allows the group everything, so asking it is a round
trip whose answer is known). The aggregator's availability probe of the APIService comes as
`system:kube-aggregator` in that group: a review failing or slow made it fail, and the APIService went
`FailedDiscoveryCheck` for every kubectl user."""

from __future__ import annotations

from collections.abc import Callable

from tests.api.conftest import SecuredApi

AGGREGATOR = {"X-Remote-User": "system:kube-aggregator", "X-Remote-Group": "system:masters"}
DISCOVERY = "/apis/external.metrics.k8s.io/v1beta1"


async def test_the_aggregators_probe_is_answered_while_reviews_fail(secured: SecuredApi) -> None:
    secured.kube.fail("subjectaccessreviews", 500, times=None)
    status, body = await secured.get(DISCOVERY, cert=secured.pki.proxy, headers=AGGREGATOR)
    assert status == 200, body
    assert body["groupVersion"] == "external.metrics.k8s.io/v1beta1"
    assert secured.kube.access_reviews == []


async def test_a_member_of_system_masters_reads_a_metric_without_a_review(
        secured: SecuredApi, metric_path: Callable[..., str]) -> None:
    status, body = await secured.get(metric_path(), cert=secured.pki.proxy,
                                     headers={"X-Remote-User": "kubernetes-admin", "X-Remote-Group": "system:masters"})
    assert status == 200, body
    assert secured.kube.access_reviews == []


async def test_another_group_is_still_reviewed(secured: SecuredApi) -> None:
    status, body = await secured.get(DISCOVERY, cert=secured.pki.proxy,
                                     headers={"X-Remote-User": "bob", "X-Remote-Group": "system:mastersx"})
    assert status == 403, body
    assert len(secured.kube.access_reviews) == 1
