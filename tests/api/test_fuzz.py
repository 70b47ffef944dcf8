"""A fuzz run of the HTTP API: hypothesis makes methods, paths, queries and identities, the in-process app
answers through its real gate (with a scripted authenticator and authorizer, so every branch is reachable
without a Kubernetes API). Whatever comes in: no 5xx but the documented 503, and every error a `Status`.

Methods are ones HTTP parsers know: a request line aiohttp's parser rejects (an unknown method token, say) is
answered 400 by the HTTP layer before any application code runs, with a plain-text body."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from yarl import URL

from autoscaler.api.app import build_api_app
from autoscaler.api.auth import auth_gate
from autoscaler.api.authn import UnionAuthenticator
from autoscaler.api.authz import Decision
from autoscaler.api.identity import Attributes, UserInfo
from autoscaler.api.open_paths import AlwaysAllowPaths
from autoscaler.api.selector import SelectorError, deployment_from_query, deployment_from_selector
from autoscaler.model import RuntimeKey
from autoscaler.names import ServedMetric
from autoscaler.settings import ServeSettings
from tests.api.builders import KEY, refresher_with, runtime_view

Client = TestClient[Any, Any]
STALE = RuntimeKey(KEY.namespace, "modelmesh-serving-stale")


class HeaderAuthenticator:
    """Anyone who names themselves in `X-Test-User` is that user."""

    method = "test"

    async def authenticate(self, request: web.Request) -> UserInfo | None:
        name = request.headers.get("X-Test-User")
        return UserInfo(name) if name else None


class DenyByName:
    def cached(self, user: UserInfo, attributes: Attributes) -> Decision | None:
        return None

    async def authorize(self, user: UserInfo, attributes: Attributes) -> Decision:
        return Decision(user.name != "denied")


@pytest.fixture
async def client(aiohttp_client: Callable[..., Awaitable[Client]]) -> Client:
    refresher = refresher_with(runtime_view(KEY), runtime_view(STALE, fresh=False))
    gate = auth_gate(UnionAuthenticator([HeaderAuthenticator()]), DenyByName(),
                     AlwaysAllowPaths.parse(ServeSettings().authorization_always_allow_paths), refresher.metrics)
    return await aiohttp_client(build_api_app(refresher, refresher.metrics, gate))


text = st.text(alphabet=st.characters(codec="utf-8"), max_size=30)
segment = st.one_of(
    text,
    st.sampled_from(["apis", "external.metrics.k8s.io", "v1beta1", "namespaces", KEY.namespace, KEY.deployment,
                     STALE.deployment, "keda", "v1", "runtimes", "debug", "openapi", "v2", "version", "healthz",
                     "metrics", "..", ".", "%2F", "", *[m.value for m in ServedMetric],
                     ServedMetric.GPU_BUSY.value.upper()]),
)
namespaces = st.one_of(st.just(KEY.namespace), segment)
metric_names = st.one_of(st.sampled_from([*[m.value for m in ServedMetric], ServedMetric.GPU_BUSY.value.upper()]),
                         segment)
runtimes = st.one_of(st.sampled_from([KEY.deployment, STALE.deployment]), segment)
paths = st.one_of(
    st.builds("/apis/external.metrics.k8s.io/v1beta1/namespaces/{}/{}".format, namespaces, metric_names),
    st.builds("/keda/v1/namespaces/{}/runtimes/{}".format, namespaces, runtimes),
    st.builds("/debug/runtimes/{}/{}".format, namespaces, runtimes),
    st.sampled_from(["/apis", "/apis/external.metrics.k8s.io", "/apis/external.metrics.k8s.io/v1beta1",
                     "/version", "/openapi/v2", "/healthz", "/livez", "/readyz", "/metrics"]),
    st.lists(segment, max_size=7).map(lambda parts: "/" + "/".join(parts)),
)
selectors = st.one_of(
    text,
    st.builds(lambda k, op, v: f"{k}{op}{v}", st.sampled_from(["deployment", "servingruntime", "app", ""]),
              st.sampled_from(["=", "==", "!=", " in ", " notin ", ""]),
              st.one_of(text, st.sampled_from([KEY.deployment, STALE.deployment, "triton", f"({KEY.deployment})"]))),
)
good_selectors = st.sampled_from([f"deployment={KEY.deployment}", f"deployment={STALE.deployment}",
                                  "servingruntime=triton", f"deployment in ({KEY.deployment})"])
queries = st.one_of(
    st.fixed_dictionaries({"labelSelector": st.one_of(good_selectors, selectors)}),
    st.dictionaries(st.one_of(st.just("labelSelector"), text), st.one_of(selectors, text), max_size=3),
)
methods = st.one_of(st.just("GET"), st.sampled_from(["HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "PROPFIND"]))
users = st.one_of(st.just("hpa"), st.sampled_from([None, "denied", "", "x" * 300]))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(method=methods, path=paths, query=queries, user=users)
async def test_no_input_gets_an_undocumented_5xx_or_a_non_status_error(
        client: Client, method: str, path: str, query: dict[str, str], user: str | None) -> None:
    url = URL.build(path=path, query=query)
    headers = {"X-Test-User": user} if user is not None else {}
    async with client.request(method, url, headers=headers) as response:
        body = await response.read()
    status = response.status
    assert status < 500 or status == 503, (method, url, status, body[:300])
    if status >= 400 and method != "HEAD":
        document = json.loads(body)
        assert document["kind"] == "Status" and document["apiVersion"] == "v1"
        assert document["status"] == "Failure" and document["code"] == status and document["message"]


def _selector_outcome(read: Callable[[], str]) -> str:
    try:
        return "deployment " + read()
    except SelectorError as error:
        return "refused " + str(error)


@pytest.fixture
async def query_reader(aiohttp_client: Callable[..., Awaitable[Client]]) -> Client:
    """An app answering with what the handler reads from the raw query string and what `request.query` gives."""
    async def both(request: web.Request) -> web.Response:
        cached = _selector_outcome(lambda: deployment_from_query(request.rel_url.raw_query_string))
        parsed = _selector_outcome(lambda: deployment_from_selector(request.query.get("labelSelector")))
        return web.json_response([cached, parsed])

    app = web.Application()
    app.router.add_get("/q", both)
    return await aiohttp_client(app)


raw_query_parts = st.lists(st.one_of(
    st.sampled_from(["labelSelector=", "labelselector=", "labelSelector", "deployment", "%3D", "=", "%3d", "+",
                     "%20", "&", ";", "%26", "%2C", ",", "in", "(", ")", "%28", "%29", "servingruntime",
                     KEY.deployment, "triton", "%", "%zz", "==", "!="]),
    st.text(alphabet="abc-_.=&;+%", max_size=6)), max_size=10)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=raw_query_parts)
async def test_the_selector_read_from_the_raw_query_is_the_one_aiohttp_parses(
        query_reader: Client, parts: list[str]) -> None:
    """The HPA handler caches its runtime by the raw query string (`deployment_from_query`); whatever the
    encoding, it must read the same `labelSelector` as aiohttp's `request.query`, and refuse the same way."""
    async with query_reader.get(URL("/q?" + "".join(parts), encoded=True)) as response:
        cached, parsed = await response.json()
    assert cached == parsed
