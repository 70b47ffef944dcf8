"""The serving worker's dispatch (`app.Serving.dispatch`: the HPA's request served without aiohttp's routing)
answers every request as the routed application does: the same status line, headers and body, the same
per-route request counts, the gate run before anything is decided. Two servers of the same API over the same
runtimes, one routed (as `aiohttp_client` and the tests elsewhere serve it), one with the dispatch installed
(as `serve_until_stopped` serves it), are sent the same raw requests."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass

import pytest
from aiohttp import web
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from autoscaler.api.app import build_api_app, install_dispatch
from autoscaler.api.status import ApiError
from autoscaler.model import RuntimeKey
from autoscaler.selfmetrics import AdapterMetrics
from tests.api.builders import KEY, refresher_with, runtime_view

OTHER = runtime_view(RuntimeKey("team-b", "modelmesh-serving-ovms"), fresh=False)  # a 503 while unknown


def gate(request: web.Request) -> Awaitable[None] | None:
    """Decides by a header, at once or in a coroutine, as the real gate does (`auth.auth_gate`)."""
    verdict = request.headers.get("X-Test-Gate")
    if verdict == "deny":
        raise ApiError(403, f"forbidden: {request.method} {request.rel_url.raw_path}")
    if verdict in ("later", "later-deny"):
        async def decide() -> None:
            await asyncio.sleep(0)
            if verdict == "later-deny":
                raise ApiError(401, "Unauthorized")
        return decide()
    return None


@dataclass
class Served:
    port: int
    metrics: AdapterMetrics


@dataclass
class Pair:
    loop: asyncio.AbstractEventLoop
    routed: Served
    dispatched: Served

    def counts(self, served: Served) -> list[tuple[str, str, float]]:
        """The API's request counts by (route, code), the tally handed to its series first (in the server's loop)."""
        async def flush() -> None:
            served.metrics.tally.flush()
        asyncio.run_coroutine_threadsafe(flush(), self.loop).result(5)
        return sorted((s.labels["path"], s.labels["code"], s.value) for family in served.metrics.requests.collect()
                      for s in family.samples if s.name.endswith("_total"))


async def _serve(dispatched: bool) -> tuple[web.AppRunner, Served]:
    metrics = AdapterMetrics()
    app = build_api_app(refresher_with(runtime_view(), OTHER, metrics=metrics), metrics, gate)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    if dispatched:
        assert runner.server is not None
        install_dispatch(app, runner.server)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    return runner, Served(sock.getsockname()[1], metrics)


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    (routed_runner, routed), (dispatched_runner, dispatched) = (
        asyncio.run_coroutine_threadsafe(_serve(flag), loop).result(10) for flag in (False, True))
    yield Pair(loop, routed, dispatched)
    for runner in (routed_runner, dispatched_runner):
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


def exchange(port: int, request: bytes) -> bytes:
    """The server's whole answer to one request on its own connection, its `Date` header left out."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"\r\n".join(line for line in b"".join(chunks).split(b"\r\n") if not line.lower().startswith(b"date:"))


PREFIX = "/apis/external.metrics.k8s.io/v1beta1/namespaces/"
segments = st.one_of(
    st.sampled_from([KEY.namespace, KEY.namespace, "team-b", "modelmesh_desired_replicas", "modelmesh_pod_demand",
                     "modelmesh_desired_replicas"]),
    st.sampled_from([KEY.namespace, KEY.deployment, "team-b", "modelmesh_desired_replicas", "modelmesh_pod_demand",
                     "Modelmesh_Desired_Replicas", "nonexistent", "", "{x}", "%2F", "%6Dl", "ml%", ".", ".."]),
    st.text(st.sampled_from("abz-_.{}%2F/"), max_size=6),
)
namespaces = st.one_of(st.just(KEY.namespace), st.just(KEY.namespace), st.just("team-b"), segments)
metric_names = st.one_of(st.sampled_from(["modelmesh_desired_replicas", "modelmesh_pod_demand"]), segments)
hot_shaped = st.builds(lambda namespace, metric, tail: f"{PREFIX}{namespace}/{metric}{tail}", namespaces,
                       metric_names, st.sampled_from(["", "", "", "/", "/", "//", "/x", "/x/"]))
paths = st.one_of(
    hot_shaped, hot_shaped, hot_shaped,
    st.builds(lambda prefix, parts, slash: prefix + "/".join(parts) + slash,
              st.sampled_from([PREFIX, PREFIX[:-1], "/apis/external.metrics.k8s.io/v1beta1/", "/apis/",
                               "/debug/runtimes/", "/keda/runtimes/", "/", "//apis/external.metrics.k8s.io/v1beta1/"
                               "namespaces/", PREFIX.upper()]),
              st.lists(segments, max_size=4), st.sampled_from(["", "/", "//"])),
    st.sampled_from(["/apis", "/version", "/healthz", "/readyz", "/openapi/v2", "*"]),  # not /metrics: the counts
)
SELECTED = "?labelSelector=deployment%3D" + KEY.deployment
queries = st.sampled_from(["", SELECTED, "?labelSelector=deployment=team-b",
                           "?labelSelector=deployment%3Dmodelmesh-serving-ovms", "?labelSelector=app%3Dx",
                           "?watch=true&labelSelector=deployment%3D" + KEY.deployment, "?", "?labelSelector="])
methods = st.sampled_from(["GET", "GET", "GET", "GET", "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"])
header_sets = st.lists(st.sampled_from([
    "Accept: application/json", "Accept: text/plain", "Accept: */*", "Accept: application/json, */*",
    "Accept: application/vnd.kubernetes.protobuf", "Expect: 100-continue", "Expect: something",
    "X-Test-Gate: deny", "X-Test-Gate: later", "X-Test-Gate: later-deny", "Accept-Encoding: gzip",
]), max_size=3, unique=True)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(methods, paths, queries, header_sets)
@example("GET", PREFIX + "%6Dl/modelmesh_desired_replicas", SELECTED, [])  # the route matches `ml`, decoded
@example("GET", PREFIX + "ml/%6Dodelmesh_desired_replicas/", SELECTED, [])
@example("GET", PREFIX + "a%2Fb/modelmesh_desired_replicas", SELECTED, [])  # `a/b`, one segment to the route
@example("GET", PREFIX + "ml/{modelmesh_desired_replicas}", SELECTED, [])  # no route matches a brace
@example("GET", PREFIX + "ml/modelmesh_desired_replicas//", SELECTED, [])
@example("GET", PREFIX + "ml/modelmesh_desired_replicas", SELECTED, ["X-Test-Gate: deny"])
@example("GET", PREFIX + "ml/modelmesh_desired_replicas", SELECTED, ["X-Test-Gate: later-deny"])
@example("GET", PREFIX + "ml/modelmesh_desired_replicas/", SELECTED, ["Accept: text/plain"])
@example("GET", PREFIX + "ml/modelmesh_desired_replicas", SELECTED, ["Expect: 100-continue"])
@example("GET", PREFIX + "ml/modelmesh_desired_replicas", SELECTED, ["Expect: something"])
@example("POST", PREFIX + "ml/modelmesh_desired_replicas", SELECTED, [])
@example("GET", PREFIX + "ml/modelmesh_desired_replicas", "?watch=1&" + SELECTED[1:], [])
def test_the_dispatch_answers_as_the_routed_app(pair: Pair, method: str, path: str, query: str,
                                                headers: list[str]) -> None:
    head = "".join(f"{header}\r\n" for header in headers)
    request = f"{method} {path}{query} HTTP/1.1\r\nHost: adapter\r\n{head}Connection: close\r\n\r\n".encode()
    counted = {served.port: pair.counts(served) for served in (pair.routed, pair.dispatched)}
    routed, dispatched = exchange(pair.routed.port, request), exchange(pair.dispatched.port, request)
    assert dispatched == routed
    assert added(counted[pair.dispatched.port], pair.counts(pair.dispatched)) == added(
        counted[pair.routed.port], pair.counts(pair.routed))


def added(before: list[tuple[str, str, float]], after: list[tuple[str, str, float]]) -> set[tuple[str, str]]:
    """The (route, code) counts that one request added to."""
    was = {(route, code): value for route, code, value in before}
    return {(route, code) for route, code, value in after if value != was.get((route, code), 0.0)}


def test_the_hpas_request_is_served_by_the_dispatch(pair: Pair) -> None:
    """The example worked by hand: the HPA's request, answered 200 with the runtime's value, counted under the
    route (the property above would also hold were the dispatch never to serve anything itself)."""
    before = dict(((p, c), v) for p, c, v in pair.counts(pair.dispatched))
    request = (f"GET {PREFIX}{KEY.namespace}/modelmesh_desired_replicas?labelSelector=deployment%3D{KEY.deployment} "
               "HTTP/1.1\r\nHost: adapter\r\nAccept: application/json\r\nConnection: close\r\n\r\n").encode()
    answer = exchange(pair.dispatched.port, request)
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b'"metricName": "modelmesh_desired_replicas"' in answer
    assert b"Cache-Control: no-cache, private\r\n" in answer and b"Server:" not in answer
    route = PREFIX + "{namespace}/{metric}"
    after = dict(((p, c), v) for p, c, v in pair.counts(pair.dispatched))
    assert after[route, "200"] == before.get((route, "200"), 0.0) + 1
