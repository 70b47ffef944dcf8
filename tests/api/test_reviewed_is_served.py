"""The promise behind every SubjectAccessReview: it names exactly what the handler then serves. A client
chooses the raw path, and the gate (`identity.request_attributes`) and aiohttp's router read it apart: if an
encoding (`%2F`, `%25`, `..`, a dot, another case, UTF-8) made them disagree, a user allowed in one namespace,
or on one runtime, would be served another. Hypothesis writes the namespace and name segments, percent-encodes
any of their characters (as a client may), and the real router resolves the path sent over a real socket."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from yarl import URL

from autoscaler.api import runtimes
from autoscaler.api.app import EXTERNAL_METRIC_ROUTE, build_api_app
from autoscaler.api.identity import DEBUG_SUBRESOURCE, RUNTIMES_RESOURCE, ResourceAttributes, request_attributes
from autoscaler.names import API_GROUP, ServedMetric, lookup_metric
from tests.api.builders import KEY, refresher_with, runtime_view

Client = TestClient[Any, Any]
Seen = list[tuple[str, Any, dict[str, str]]]

_LITERAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@")
"""Characters a path segment may carry unencoded (RFC 3986 `pchar`)."""


@st.composite
def encoded(draw: st.DrawFn, text: st.SearchStrategy[str]) -> str:
    """`text` as a client may put it in one path segment: each character literal where the URL syntax allows,
    or percent-encoded (UTF-8, either hex case) at the client's whim."""
    out = []
    for char in draw(text):
        if char in _LITERAL and draw(st.booleans()):
            out.append(char)
        else:
            hexes = "".join(f"%{byte:02X}" for byte in char.encode())
            out.append(hexes.lower() if draw(st.booleans()) else hexes)
    return "".join(out)


names = st.one_of(
    st.sampled_from([KEY.namespace, KEY.deployment, "..", ".", "%", "/", "a/b", *[m.value for m in ServedMetric]]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=12),
    st.builds("{}{}".format, st.sampled_from([m.value for m in ServedMetric]), st.sampled_from(["", ".", "/", "%2F"])),
)
segments = encoded(names)


@pytest.fixture
async def seen(aiohttp_client: Callable[..., Awaitable[Client]]) -> tuple[Client, Seen]:
    """A client of the API whose gate records, for each request, the route aiohttp chose, the attributes the
    real gate would review and the route's match (what the handler reads), and lets every request through."""
    records: Seen = []

    def gate(request: web.Request) -> None:
        route = request.match_info.route.resource
        # a route also answered with a trailing slash (`app.SLASH_TOLERANT`) serves what it serves without
        records.append((route.canonical.rstrip("/") if route is not None else "", request_attributes(
            request.method, request.rel_url.raw_path), dict(request.match_info)))

    refresher = refresher_with(runtime_view(KEY))
    return await aiohttp_client(build_api_app(refresher, refresher.metrics, gate)), records


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["metric", "keda", "debug"]), namespace=segments, name=segments,
       slash=st.sampled_from(["", "/"]))
@example(kind="metric", namespace="ml%2Fother", name="modelmesh_gpu_busy", slash="")
@example(kind="metric", namespace=KEY.namespace, name="MODELMESH_GPU_BUSY", slash="/")
@example(kind="keda", namespace=KEY.namespace, name=f"{KEY.deployment}%2F..%2Fother", slash="")
@example(kind="debug", namespace="..", name=KEY.deployment, slash="")
async def test_the_review_names_what_the_router_serves(seen: tuple[Client, Seen], kind: str, namespace: str,
                                                       name: str, slash: str) -> None:
    client, records = seen
    records.clear()
    path = {"metric": f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{name}",
            "keda": f"/keda/v1/namespaces/{namespace}/runtimes/{name}",
            "debug": f"/debug/runtimes/{namespace}/{name}"}[kind]
    url = URL(f"{path}{slash}?labelSelector=deployment%3D{KEY.deployment}", encoded=True)
    async with client.get(url) as response:
        await response.read()
    [(route, attributes, match)] = records
    if route == EXTERNAL_METRIC_ROUTE:
        assert isinstance(attributes, ResourceAttributes) and attributes.group == API_GROUP
        assert attributes.namespace == match["namespace"]
        served = lookup_metric(match["metric"])
        assert served is None or attributes.resource == served.value
        assert (attributes.name, attributes.subresource) == ("", "")
    elif route in (runtimes.KEDA_ROUTE, runtimes.DEBUG_ROUTE):
        assert isinstance(attributes, ResourceAttributes) and attributes.group == API_GROUP
        assert (attributes.namespace, attributes.resource, attributes.name) == (
            match["namespace"], RUNTIMES_RESOURCE, match["deployment"])
        assert attributes.subresource == (DEBUG_SUBRESOURCE if route == runtimes.DEBUG_ROUTE else "")
    else:
        assert route not in ("", EXTERNAL_METRIC_ROUTE, runtimes.KEDA_ROUTE, runtimes.DEBUG_ROUTE)
