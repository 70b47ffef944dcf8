"""Which refusal a request with several faults gets, as kube-apiserver orders them for an aggregated external
metrics server (custom-metrics-apiserver: apiserver's `handlers.ListResource`).

The list handler decodes `metav1.ListOptions` from the query before the REST storage asks the provider for
the metric: `timeoutSeconds`, `limit` (`strconv.ParseInt`), then `labelSelector` (`labels.Parse`), then
`fieldSelector` (`fields.ParseSelector` and the field conversion), each failure a 400 `BadRequest`; then a
`watch` is refused, 405; only then does the provider look at the metric's name (404 for one not served) and
at what the selector selects. Seen through the real `kubectl get --raw`, as an operator debugging an HPA sees it.

Before: a fieldSelector's refusal was named before a labelSelector that kube-apiserver cannot parse, and a
metric name not served was a 404 even when the query itself could not be decoded (or asked to watch).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from yarl import URL

from autoscaler.api.app import build_api_app
from tests.api.builders import DEPLOYMENT, KEY, NAMESPACE, refresher_with, runtime_view
from tests.support.kubectl import kubectl_error

GROUP_VERSION = "/apis/external.metrics.k8s.io/v1beta1"
SERVED = f"{GROUP_VERSION}/namespaces/{NAMESPACE}/modelmesh_desired_replicas"
NOT_SERVED = f"{GROUP_VERSION}/namespaces/{NAMESPACE}/modelmesh_gpu"
BAD_FIELDS = "fieldSelector=nodeName"
FIELD_REFUSAL = "Error from server (BadRequest): invalid selector: 'nodeName'; can't understand 'nodeName'"


@pytest.mark.parametrize("selector", ["deployment%3D-bad-", "deployment%3Etriton", "deployment%3Da%20b",
                                      "deployment_%3Dx", f"{'k' * 64}%3Dx"])
async def test_a_label_selector_kube_cannot_parse_is_named_before_a_bad_field_selector(kubeconfig: Path,
                                                                                       selector: str) -> None:
    """`labels.Parse` runs before `fields.ParseSelector` in ListOptions' conversion: kube-apiserver names the
    label selector. The field selector's refusal was named instead."""
    said = await kubectl_error(kubeconfig, f"{SERVED}?labelSelector={selector}&{BAD_FIELDS}")
    assert said.startswith("Error from server (BadRequest): "), said
    assert "labelSelector" in said and "nodeName" not in said, said


@pytest.mark.parametrize("selector", ["", "labelSelector=app%3Dtriton&", "labelSelector=deployment%21%3Dx&",
                                      "labelSelector=deployment%3E1&", "labelSelector=deployment+%3C+0&"])
async def test_a_label_selector_that_parses_but_names_no_runtime_comes_after_the_field_selector(
        kubeconfig: Path, selector: str) -> None:
    """What a parsed selector selects is the provider's question, asked after every option was decoded: the
    field selector's refusal comes first, as kube-apiserver's."""
    assert await kubectl_error(kubeconfig, f"{SERVED}?{selector}{BAD_FIELDS}") == FIELD_REFUSAL


@pytest.mark.parametrize(("query", "said"), [
    (f"labelSelector=deployment%3D{DEPLOYMENT}&limit=abc", "(BadRequest): "),
    (f"labelSelector=deployment%3D{DEPLOYMENT}&timeoutSeconds=1.5", "(BadRequest): "),
    (f"labelSelector=deployment%3D{DEPLOYMENT}&{BAD_FIELDS}", "(BadRequest): invalid selector: 'nodeName'"),
    ("labelSelector=deployment%3D-bad-", "(BadRequest): invalid label value '-bad-'"),
    ("labelSelector=-app%3Dx", "(BadRequest): invalid label key '-app'"),
    ("labelSelector=a%2Fb%2Fc%3Dx", "(BadRequest): invalid label key 'a/b/c'"),
    (f"labelSelector=Example.com%2Fdeployment%3D{DEPLOYMENT}", "(BadRequest): invalid label key "),
    (f"labelSelector=deployment%3D{DEPLOYMENT}&watch=true", "(MethodNotAllowed): "),
    ("labelSelector=deployment%3E1&watch=true", "(MethodNotAllowed): "),
    ("labelSelector=-app%3E1", "(BadRequest): invalid label key '-app'"),
    ("labelSelector=Example.com%2Fx%3C5", "(BadRequest): invalid label key 'Example.com/x'"),
    ("labelSelector=deployment%3E-1", "(BadRequest): "),
    ("labelSelector=deployment%3E%2B1", "(BadRequest): "),
    ("labelSelector=deployment%3E99999999999999999999", "(BadRequest): "),
    ("labelSelector=deployment%3E", "(BadRequest): "),
])
async def test_a_query_kube_cannot_decode_is_refused_before_the_metric_name_is_looked_at(
        kubeconfig: Path, query: str, said: str) -> None:
    """The metric is the provider's to find, after the list options are decoded: `modelmesh_gpu&limit=abc` is
    a 400 from kube-apiserver, not a 404 (nor is a watch of it)."""
    answer = await kubectl_error(kubeconfig, f"{NOT_SERVED}?{query}")
    assert answer.startswith(f"Error from server {said}"), answer


@pytest.mark.parametrize("query", ["", "labelSelector=app%3Dtriton", "labelSelector=deployment%3Dnope&limit=5",
                                   "labelSelector=deployment%3E1"])
async def test_a_metric_not_served_is_still_a_404_whatever_its_selector_selects(kubeconfig: Path,
                                                                                query: str) -> None:
    answer = await kubectl_error(kubeconfig, f"{NOT_SERVED}?{query}")
    assert answer.startswith("Error from server (NotFound): external metric 'modelmesh_gpu' is not served"), answer


# The property: a refusal of the query is the same, whatever metric name the path has.

Client = TestClient[Any, Any]

_PARTS = st.sampled_from([
    f"labelSelector=deployment%3D{DEPLOYMENT}", "labelSelector=deployment%3D-bad-", "labelSelector=app%3Dx",
    "labelSelector=deployment%3Ex", "labelSelector=deployment%3D", "labelSelector=a%2Fb%2Fc%3Dx",
    "labelSelector=example.com%2Fdeployment%3Dx", "labelSelector=deployment%3E1", "labelSelector=deployment%3E-1",
    "labelSelector=x%3C9223372036854775808", "labelSelector=x%3C9223372036854775807", "limit=abc", "limit=5",
    "timeoutSeconds=x", "timeoutSeconds=30", "fieldSelector=nodeName", "fieldSelector=spec.x%3D1",
    "fieldSelector=metadata.name%3Dy", "watch=true", "watch=false", "pretty=true",
])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(_PARTS, max_size=5), name=st.sampled_from(["modelmesh_gpu", "cpu", "x.y"]))
async def test_a_query_refused_for_a_served_metric_is_refused_alike_for_any_other_name(
        aiohttp_client: Any, parts: list[str], name: str) -> None:
    """Every 400 and 405 a served metric's query gets comes from decoding the query, which kube-apiserver does
    before the metric's name is looked at: a name not served gets the same answer, word for word; a query the
    served metric does not refuse so is a 404 for the other name."""
    refresher = refresher_with(runtime_view(KEY))
    client = await aiohttp_client(build_api_app(refresher, refresher.metrics))
    query = "&".join(parts)
    served = await _answer(client, f"{SERVED}?{query}")
    other = await _answer(client, f"{GROUP_VERSION}/namespaces/{NAMESPACE}/{name}?{query}")
    if served[0] == 405:  # its message names the resource asked, as kube's names the route's
        assert other[0] == 405
    elif served[0] == 400 and _decoding_refusal(served[1]):
        assert other == served
    else:
        assert other[0] == 404, (query, other)


def _decoding_refusal(message: str) -> bool:
    """Whether a 400's message is one of the list options' decoding (not what the selector selects)."""
    return not any(semantic in message for semantic in ("unknown label", "missing labelSelector", "names no runtime",
                                                        "selects no runtime", "different runtimes", "empty value"))


async def _answer(client: Client, path: str) -> tuple[int, str]:
    async with client.get(URL(path, encoded=True)) as response:
        body = await response.json(content_type=None)
        return response.status, body.get("message", "")


async def test_a_number_compared_with_a_runtime_label_is_said_to_select_no_runtime(kubeconfig: Path) -> None:
    """`deployment>1` parses in kube-apiserver (`labels.Parse` takes `>` and `<` with an integer) and holds for
    no runtime, whose labels are names: refused as what it selects, after the options were decoded."""
    answer = await kubectl_error(kubeconfig, f"{SERVED}?labelSelector=deployment%3E1")
    assert answer.startswith("Error from server (BadRequest): "), answer
    assert "selects no runtime" in answer and "deployment>1" in answer, answer
