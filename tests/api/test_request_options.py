"""What a request asks for beyond a path: `watch`, which the external metrics API does not offer, and the media
types it accepts. kube-apiserver's answers for both are the model (`k8s.io/apiserver` list handler and
`k8s.io/apimachinery` content negotiation), since clients written against Kubernetes read them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from yarl import URL

from autoscaler.api.app import build_api_app
from tests.api.builders import KEY, refresher_with, runtime_view

Client = TestClient[Any, Any]
ClientFactory = Callable[..., Awaitable[Client]]
METRIC = (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{KEY.namespace}/modelmesh_desired_replicas"
          f"?labelSelector=deployment%3D{KEY.deployment}")


@pytest.fixture
async def client(aiohttp_client: ClientFactory) -> Client:
    refresher = refresher_with(runtime_view(KEY))
    return await aiohttp_client(build_api_app(refresher, refresher.metrics))


async def answer(client: Client, path: str, accept: str | None = None) -> tuple[int, str, Any]:
    """The answer to `path` sent as written: the client leaves its escapes as they are (`%77` stays `%77`)."""
    headers = {} if accept is None else {"Accept": accept}
    async with client.get(URL(path, encoded=True), headers=headers) as response:
        return response.status, response.content_type, await response.json(content_type=None)


@pytest.mark.parametrize("watch", ["=true", "=1", "=yes", "=True", "=", ""])
async def test_a_watch_is_refused_with_a_405_status_as_kube_apiserver_refuses_it(client: Client, watch: str) -> None:
    """`kubectl get --raw '...&watch=true'` on a resource without watch: apiserver's list handler answers
    `MethodNotSupported` (405) rather than a list the client would wait on as if it were a stream. Kubernetes
    reads any value but `0` and `false` as true (`Convert_Slice_string_To_bool`), the empty one of `&watch=` and
    of a bare `&watch` too: both were served as a plain list."""
    status, _, body = await answer(client, f"{METRIC}&watch{watch}")
    assert (status, body["kind"], body.get("reason"), body.get("code")) == (405, "Status", "MethodNotAllowed", 405)
    assert body["message"] == ('watch is not supported on resources of kind '
                               '"modelmesh_desired_replicas.external.metrics.k8s.io"')


@pytest.mark.parametrize("key", ["%77atch", "w%61tch", "wa%74%63h", "watc%68", "%77%61%74%63%68"])
async def test_a_watch_whose_key_is_percent_encoded_is_refused_as_one(client: Client, key: str) -> None:
    """kube-apiserver decodes a query's keys before it reads them (Go's `url.ParseQuery`): `%77atch=true` asks to
    watch as `watch=true` does, and was served as a plain list."""
    status, _, body = await answer(client, f"{METRIC}&{key}=true")
    assert (status, body["kind"], body["reason"]) == (405, "Status", "MethodNotAllowed")


@pytest.mark.parametrize("key", ["%57atch", "watch%20", "w%2561tch"])
async def test_a_key_that_decodes_to_another_word_is_not_a_watch(client: Client, key: str) -> None:
    """Keys are decoded once and compared whole, case and all, as kube-apiserver does."""
    status, _, body = await answer(client, f"{METRIC}&{key}=true")
    assert (status, body["kind"]) == (200, "ExternalMetricValueList")


@pytest.mark.parametrize("watch", ["false", "0", "FALSE", "False"])
async def test_watch_false_is_an_ordinary_list(client: Client, watch: str) -> None:
    status, _, body = await answer(client, f"{METRIC}&watch={watch}")
    assert (status, body["kind"]) == (200, "ExternalMetricValueList")


@pytest.mark.parametrize(("option", "said"), [
    ("limit=abc", 'query parameter limit: strconv.ParseInt: parsing "abc": invalid syntax'),
    ("timeoutSeconds=abc", 'query parameter timeoutSeconds: strconv.ParseInt: parsing "abc": invalid syntax'),
    ("limit=", 'query parameter limit: strconv.ParseInt: parsing "": invalid syntax'),
    ("limit", 'query parameter limit: strconv.ParseInt: parsing "": invalid syntax'),
    ("limit=1.5", 'query parameter limit: strconv.ParseInt: parsing "1.5": invalid syntax'),
    ("limit=1_000", 'query parameter limit: strconv.ParseInt: parsing "1_000": invalid syntax'),
    ("limit=%2010", 'query parameter limit: strconv.ParseInt: parsing " 10": invalid syntax'),
    ("limit=+7", 'query parameter limit: strconv.ParseInt: parsing " 7": invalid syntax'),  # `+` is a blank
    ("limit=%D9%A1", 'query parameter limit: strconv.ParseInt: parsing "\u0661": invalid syntax'),  # Arabic one
    ("limit=1%0A", 'query parameter limit: strconv.ParseInt: parsing "1\\n": invalid syntax'),
    ("limit=%00", 'query parameter limit: strconv.ParseInt: parsing "\\x00": invalid syntax'),
    ("limit=9223372036854775808",
     'query parameter limit: strconv.ParseInt: parsing "9223372036854775808": value out of range'),
    ("timeoutSeconds=30s&limit=x", 'query parameter timeoutSeconds: strconv.ParseInt: parsing "30s": invalid syntax'),
    ("watch=true&limit=abc", 'query parameter limit: strconv.ParseInt: parsing "abc": invalid syntax'),
    ("limit=abc&limit=5", 'query parameter limit: strconv.ParseInt: parsing "abc": invalid syntax'),
])
async def test_a_list_option_that_is_no_integer_is_a_bad_request(client: Client, option: str, said: str) -> None:
    """apiserver's list handler decodes `ListOptions` from the query before anything else (before it looks at
    `watch`): `limit` and `timeoutSeconds` are int64s read by `strconv.ParseInt(value, 10, 64)`, its first value,
    and one that does not parse is a 400 `BadRequest` with Go's error. They were ignored, and answered 200."""
    status, _, body = await answer(client, f"{METRIC}&{option}")
    assert (status, body["kind"], body.get("reason"), body.get("code")) == (400, "Status", "BadRequest", 400)
    assert body["message"] == said


@pytest.mark.parametrize("option", [
    "limit=500", "limit=0", "limit=-1", "limit=%2B7", "limit=-9223372036854775808", "timeoutSeconds=30",
    "limit=5&limit=abc", "limits=abc", "Limit=abc", "continue=abc", "resourceVersion=abc",
    "allowWatchBookmarks=abc", "sendInitialEvents=", "fieldSelector=",
])
async def test_list_options_kubernetes_reads_are_taken_as_it_takes_them(client: Client, option: str) -> None:
    """What parses as an int64 (a sign, ASCII digits, in range) is taken; the first value decides; other keys,
    keys of another case and the strings and booleans of `ListOptions` are never refused (Kubernetes reads any
    boolean value but `0` and `false` as true)."""
    status, _, body = await answer(client, f"{METRIC}&{option}")
    assert (status, body["kind"]) == (200, "ExternalMetricValueList"), body


@pytest.mark.parametrize("accept", [
    "application/json", "application/json, */*", "*/*", "application/*",
    "application/vnd.kubernetes.protobuf, */*",  # the HPA controller's client (protobuf first, anything after)
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",  # kubectl get
    # kubectl's discovery: aggregated discovery first, plain JSON last
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;"
    "g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json",
    "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",  # a browser
    "APPLICATION/JSON",
])
async def test_json_is_served_to_every_client_that_takes_it(client: Client, accept: str) -> None:
    for path in (METRIC, "/apis", "/apis/external.metrics.k8s.io/v1beta1", "/version", "/openapi/v2"):
        status, content_type, _ = await answer(client, path, accept)
        assert (status, content_type) == (200, "application/json"), path


@pytest.mark.parametrize("accept", [
    "application/vnd.kubernetes.protobuf", "application/yaml", "text/plain",
    # A Table alone (no plain JSON after it): apimachinery skips a clause whose conversion the endpoint lacks.
    "application/json;as=Table;v=v1;g=meta.k8s.io",
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
])
async def test_a_client_that_cannot_read_json_gets_406_not_json_it_would_fail_to_decode(
        client: Client, accept: str) -> None:
    """A client that asks only for protobuf and gets JSON fails in its decoder with a message about bytes;
    apiserver answers 406 `NotAcceptable` naming what it serves."""
    for path in (METRIC, "/apis/external.metrics.k8s.io/v1beta1"):
        status, content_type, body = await answer(client, path, accept)
        assert (status, content_type, body["reason"]) == (406, "application/json", "NotAcceptable"), path
        assert body["message"] == "only the following media types are accepted: application/json"


@pytest.mark.parametrize("path", ["/metrics", "/healthz", "/readyz"])
async def test_text_paths_answer_whatever_is_accepted(client: Client, path: str) -> None:
    """Prometheus asks `/metrics` for OpenMetrics or text; probes send no JSON Accept: those paths are text."""
    async with client.get(path, headers={"Accept": "text/plain;version=0.0.4"}) as response:
        assert response.status == 200
