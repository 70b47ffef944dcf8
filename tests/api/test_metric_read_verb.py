"""A metric read is checked with the verb kube-apiserver checks for the same request: `list`, because
`/apis/external.metrics.k8s.io/v1beta1/namespaces/NS/METRIC` is a collection path that names no object
(`RequestInfoFactory`). Checked as `get`, a user whose Role allows only `list` (what kube-apiserver, in front,
let through) was refused by the adapter with `cannot get resource`."""

from __future__ import annotations

from collections.abc import Callable

from tests.api.conftest import SecuredApi

DEV = {"X-Remote-User": "dev", "X-Remote-Group": "developers"}


async def test_a_user_allowed_to_list_the_metric_reads_it(
        secured: SecuredApi, metric_path: Callable[..., str]) -> None:
    secured.kube.allow(user="dev", verb="list", group="external.metrics.k8s.io",
                       resource="modelmesh_desired_replicas", namespace="ml")
    status, body = await secured.get(metric_path(), cert=secured.pki.proxy, headers=DEV)
    assert status == 200, body
    assert body["items"][0]["metricName"] == "modelmesh_desired_replicas"


async def test_a_user_allowed_only_to_get_the_metric_is_refused_in_kubes_words(
        secured: SecuredApi, metric_path: Callable[..., str]) -> None:
    secured.kube.allow(user="dev", verb="get", group="external.metrics.k8s.io")
    status, body = await secured.get(metric_path(), cert=secured.pki.proxy, headers=DEV)
    assert status == 403, body
    assert ('User "dev" cannot list resource "modelmesh_desired_replicas" in API group "external.metrics.k8s.io" '
            'in the namespace "ml"') in body["message"], body
