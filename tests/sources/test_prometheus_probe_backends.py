"""`--source prometheus` against what platform teams really put in front of Prometheus, through the real CLI flags.

Each test stands where a user stood: the backend answers the way VictoriaMetrics, an OAuth proxy, a Mimir
gateway or a Prometheus with a route prefix answers, and the test reads what the adapter then serves or logs.
The data comes from a real Prometheus (promtool backfill, ready at once); a small aiohttp server in front of it
plays the part of the other backend where only its HTTP behaviour differs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from unittest import mock

import aiohttp
import pytest
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from autoscaler import cli
from autoscaler.api.certs import generate_self_signed, server_context
from autoscaler.model import RuntimeKey, RuntimeSnapshot
from autoscaler.serve_args import settings_from_args
from autoscaler.server import build_source
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.prometheus import PrometheusSource
from autoscaler.sources.prometheus_instant import CLOCK_QUERY
from tests.fakes.prometheus import PrometheusServer, create_blocks, openmetrics_text
from tests.sources.test_prometheus_source import AGE_S, OLDER_AGE_S, by_pod, cluster_samples, discovery

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

VM_LATENCY_OFFSET_S = 30.0  # VictoriaMetrics' default -search.latencyOffset


@pytest.fixture
def written_at() -> float:
    """When the `prometheus` fixture's data was made: its newest scrape is AGE_S before this."""
    return time.time()


@pytest.fixture
async def prometheus(tmp_path: Path, written_at: float) -> AsyncIterator[PrometheusServer]:
    """A real Prometheus holding `cluster_samples` (the newest scrape AGE_S before `written_at`, an older one
    OLDER_AGE_S)."""
    tsdb = create_blocks(openmetrics_text(cluster_samples(written_at)), tmp_path / "tsdb")
    async with PrometheusServer(tsdb_dir=tsdb, workdir=tmp_path) as prom:
        yield prom


async def front(aiohttp_server: AiohttpServer, handler: Handler) -> str:
    """The base URL of a server that answers every path with `handler`."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    return str((await aiohttp_server(app)).make_url(""))


async def forward(request: web.Request, prom: PrometheusServer, params: dict[str, str]) -> web.Response:
    """Pass a query on to the real Prometheus with `params`, and its answer back."""
    async with aiohttp.ClientSession() as session, session.get(f"{prom.url}/api/v1/query", params=params) as answer:
        return web.Response(status=answer.status, body=await answer.read(), content_type="application/json")


async def collect(url: str, *flags: str) -> tuple[list[RuntimeSnapshot], Counter[str]]:
    """One refresh of the source `serve --source prometheus --prometheus-url URL FLAGS` builds, and its errors."""
    args = cli.build_parser().parse_args(["serve", "--source", "prometheus", "--prometheus-url", url, *flags])
    source = build_source(settings_from_args(args, {}), discovery())
    assert isinstance(source, PrometheusSource)
    try:
        return await source.collect(time.time()), source.errors
    finally:
        await source.close()


@contextlib.asynccontextmanager
async def empty_prometheus_over_tls(context: ssl.SSLContext) -> AsyncIterator[int]:
    """A Prometheus with no series, served over TLS with `context` on 127.0.0.1; yields its port."""

    async def answer(request: web.Request) -> web.Response:
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": []}})

    app = web.Application()
    app.router.add_get("/api/v1/query", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context).start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()


def warnings(caplog: pytest.LogCaptureFixture) -> Sequence[str]:
    return [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]


async def test_victoriametrics_answers_are_read_as_of_now_not_thirty_seconds_ago(
    prometheus: PrometheusServer, written_at: float, aiohttp_server: AiohttpServer, caplog: pytest.LogCaptureFixture
) -> None:
    """VictoriaMetrics evaluates an instant query asked "now" at now - 30 s (-search.latencyOffset) unless the
    request says `nocache=1`. Read that way, the adapter took the 30 s for a Prometheus clock that is off (a false
    warning), read the scrape of OLDER_AGE_S ago instead of the newest, and moved its time 30 s forward: values
    40 s old passed for 10 s old, so a dead pod stayed "fresh" 30 s longer."""
    queries: list[dict[str, str]] = []

    async def victoriametrics(request: web.Request) -> web.Response:
        params = dict(request.query)
        queries.append(params)
        if params.get("nocache") != "1" and "time" not in params:
            params["time"] = str(time.time() - VM_LATENCY_OFFSET_S)
        return await forward(request, prometheus, params)

    url = await front(aiohttp_server, victoriametrics)
    with caplog.at_level(logging.WARNING):
        snapshots, _ = await collect(url)

    a1 = by_pod(snapshots)["team-a", "a-1"]
    assert a1.requests_per_second == 12.5, "the scrape of 40 s ago was read, not the newest"
    # a-1's freshness: its exporter's last success, 3 s before its newest scrape (`cluster_samples`), AGE_S before
    # the data was made; moved 30 s forward, it read 27 s newer than that. Asked of the clock the data was made
    # with, not of the clock after the backfill and the query: a loaded machine took 15 s and more over those.
    assert a1.sampled_at == pytest.approx(written_at - AGE_S - 3, abs=1.0), (a1.sampled_at, written_at)
    assert not any("clock" in line for line in warnings(caplog)), warnings(caplog)
    assert OLDER_AGE_S > AGE_S + VM_LATENCY_OFFSET_S - 1  # (the data this test stands on)


async def test_prometheus_is_told_the_timeout_so_it_stops_a_query_the_adapter_gave_up_on(
    prometheus: PrometheusServer, aiohttp_server: AiohttpServer
) -> None:
    """Without the `timeout` parameter Prometheus evaluates every query up to its own --query.timeout (2 min):
    an overloaded Prometheus the adapter gave up on after --prometheus-timeout kept working on nine abandoned
    queries per refresh, and got nine more every 15 s. The parameter must also be one Prometheus accepts
    (a float of seconds: it refuses "0.5s"), which the real Prometheus behind the recorder checks."""
    queries: list[dict[str, str]] = []

    async def record(request: web.Request) -> web.Response:
        queries.append(dict(request.query))
        return await forward(request, prometheus, dict(request.query))

    url = await front(aiohttp_server, record)
    snapshots, errors = await collect(url, "--prometheus-timeout", "2.5")

    assert {query.get("timeout") for query in queries} == {"2.5"}
    assert all(s.source_ok for s in snapshots), errors


async def test_prometheus_giving_up_on_the_query_counts_as_a_timeout(aiohttp_server: AiohttpServer) -> None:
    """Told the timeout, Prometheus answers a query it could not finish in time with its own 503 `timeout` error
    (before the adapter's read times out): the same outage as the adapter timing out, counted as `timeout` (what
    the alert on modelmesh_autoscaler_source_errors_total{reason="timeout"} watches), not as `http`."""

    async def timed_out(request: web.Request) -> web.Response:
        return web.json_response({"status": "error", "errorType": "timeout",
                                  "error": "query timed out in expression evaluation"}, status=503)

    snapshots, errors = await collect(await front(aiohttp_server, timed_out))

    assert all(not s.source_ok for s in snapshots)
    assert errors == {"timeout": 1}


async def test_an_oauth_proxy_login_page_is_said_to_be_one(
    aiohttp_server: AiohttpServer, caplog: pytest.LogCaptureFixture
) -> None:
    """An oauth2-proxy or OpenShift oauth-proxy in front of Prometheus redirects a request without a valid token
    to its sign-in page, a 200 in HTML. The log said only `JSONDecodeError('Expecting value: line 1 column 1
    (char 0)')`; it must say what answered, and what to give."""

    async def oauth_proxy(request: web.Request) -> web.StreamResponse:
        if request.path.startswith("/oauth/start"):
            page = "<!DOCTYPE html>\n<html><head><title>Log In</title></head><body>" + "x" * 20_000 + "</body></html>"
            return web.Response(text=page, content_type="text/html")
        raise web.HTTPFound("/oauth/start?rd=" + request.path_qs)

    url = await front(aiohttp_server, oauth_proxy)
    with caplog.at_level(logging.WARNING):
        snapshots, _ = await collect(url)

    assert all(not s.source_ok for s in snapshots)
    (line,) = warnings(caplog)
    assert "JSONDecodeError" not in line
    assert "HTML" in line and "Log In" in line and "/oauth/start" in line, line
    assert "--prometheus-token-file" in line, line
    assert len(line) < 800, line


@pytest.mark.parametrize(
    ("status", "body", "hint"),
    [
        pytest.param(401, "no org id\n", "X-Scope-OrgID", id="mimir-without-tenant"),
        pytest.param(403, "Forbidden (user=system:serviceaccount:ns:sa, verb=get, resource=namespaces)\n",
                     "--prometheus-token-file", id="kube-rbac-proxy-denied"),
        pytest.param(401, "<html><head><title>401 Authorization Required</title></head><body>" + "y" * 20_000
                     + "</body></html>", "--prometheus-token-file", id="html-401-page"),
    ],
)
async def test_a_refused_query_says_which_flag_gives_credentials(
    aiohttp_server: AiohttpServer, caplog: pytest.LogCaptureFixture, status: int, body: str, hint: str
) -> None:
    """A 401 or 403 was logged as `HTTP Status Code 401 (b'...')` with the whole body, however large (an HTML
    error page, 20 KB, in every outage line), and no word of the flags that would fix it."""

    async def refuse(request: web.Request) -> web.Response:
        return web.Response(status=status, text=body)

    url = await front(aiohttp_server, refuse)
    with caplog.at_level(logging.WARNING):
        snapshots, _ = await collect(url)

    assert all(not s.source_ok for s in snapshots)
    (line,) = warnings(caplog)
    assert f"HTTP {status}" in line and hint in line, line
    assert len(line) < 800, line


async def test_a_query_url_too_long_for_a_proxy_says_what_makes_it_long(
    aiohttp_server: AiohttpServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Every namespace of --namespaces goes into every selector of a query sent as a GET: fifty namespaces make
    URLs of some 13 KB, past nginx's 8 KB, and each refresh was `HTTP 414 ... Request-URI Too Large` with no word
    of what made the URL long or what to change."""

    async def too_long(request: web.Request) -> web.Response:
        return web.Response(status=414, content_type="text/html", text=(
            "<html>\r\n<head><title>414 Request-URI Too Large</title></head>\r\n<body>\r\n<center><h1>414 "
            "Request-URI Too Large</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"))

    url = await front(aiohttp_server, too_long)
    with caplog.at_level(logging.WARNING):
        snapshots, _ = await collect(url)

    assert all(not s.source_ok for s in snapshots)
    (line,) = warnings(caplog)
    assert "HTTP 414" in line and "--namespaces" in line and "large_client_header_buffers" in line, line


async def test_a_url_that_is_not_prometheus_base_says_what_the_base_is(
    prometheus: PrometheusServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A Prometheus is served under a route prefix (http://host/prometheus) or not; users give the URL with a
    prefix it does not have. That was a bare `HTTP Status Code 404 (b'404 page not found\\n')`; the line must
    name the path that was asked and what the flag wants. (A URL with /api/v1 appended is refused as the
    adapter starts, naming the base URL: tests/test_serve_settings.py.)"""
    path = "/prometheus"
    with caplog.at_level(logging.WARNING):
        snapshots, _ = await collect(prometheus.url + path)

    assert all(not s.source_ok for s in snapshots)
    (line,) = warnings(caplog)
    assert "HTTP 404" in line and f"{path}/api/v1/query" in line and "route prefix" in line, line


async def test_a_partial_answer_from_thanos_is_logged_once_and_its_missing_pods_hold(
    prometheus: PrometheusServer, aiohttp_server: AiohttpServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Thanos Query with partial responses (its default) answers 200 without the series of a store it could not
    reach, and says so only in the answer's `warnings`; VictoriaMetrics cluster says `"isPartial": true`. The
    library drops both, so the pods of the missing store went stale with nothing in the log saying why. Their
    last good samples must hold (never zeros), and the warning must be logged once, not once per refresh."""
    partial = True

    async def thanos(request: web.Request) -> web.Response:
        async with aiohttp.ClientSession() as session, session.get(f"{prometheus.url}/api/v1/query",
                                                                   params=request.query) as answer:
            payload = await answer.json()
        if partial and payload["data"]["resultType"] == "vector":  # the store holding team-b is down
            payload["data"]["result"] = [item for item in payload["data"]["result"]
                                         if item["metric"].get("namespace") != "team-b"]
            payload["warnings"] = ["receive: store 10.0.3.7:10901 unavailable: rpc error: code = Unavailable"]
            payload["isPartial"] = True
        return web.json_response(payload)

    url = await front(aiohttp_server, thanos)
    args = cli.build_parser().parse_args(["serve", "--source", "prometheus", "--prometheus-url", url])
    source = build_source(settings_from_args(args, {}), discovery())
    try:
        partial = False
        before = by_pod(await source.collect(time.time()))
        partial = True
        with caplog.at_level(logging.INFO, logger="autoscaler.sources.prometheus"):
            first = by_pod(await source.collect(time.time()))
            second = by_pod(await source.collect(time.time()))
            logged_while_partial = list(caplog.messages)
            partial = False
            await source.collect(time.time())
    finally:
        await source.close()

    assert first["team-b", "a-1"] == second["team-b", "a-1"] == before["team-b", "a-1"]  # held, not zeroed
    assert second["team-a", "a-1"].requests_per_second == 12.5
    assert len(logged_while_partial) == 1, logged_while_partial
    assert "store 10.0.3.7:10901 unavailable" in logged_while_partial[0]
    assert "partial" in logged_while_partial[0]
    assert any("complete" in line for line in caplog.messages[1:]), caplog.messages


async def test_the_nine_queries_of_a_refresh_run_at_once_whatever_the_node_cpu_count(
    aiohttp_server: AiohttpServer,
) -> None:
    """The queries ran on asyncio's default executor, `min(32, os.cpu_count() + 4)` threads shared with the rest
    of the process: on a 2-CPU node 6 at a time, so the nine queries of a refresh went in two waves and a slow
    Prometheus cost a refresh twice its slowest query (at 10,000 pods the two freshness queries, the dearest,
    fell in different waves)."""
    queries = 11  # the nine signals, the recent models and the failing ModelMesh collectors
    in_flight, most, all_in = 0, 0, asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        """Held until every query of the refresh is in (or 10 s, well inside the queries' timeout, for queries
        that come in waves): held 0.3 s each, as it was, a loaded machine sent ten within it and the test read
        waves where there were none."""
        nonlocal in_flight, most
        if request.query.get("query") == CLOCK_QUERY:  # the round's clock check, asked before the others
            return web.json_response({"status": "success", "data": {"resultType": "vector", "result": []}})
        in_flight += 1
        most = max(most, in_flight)
        if in_flight == queries:
            all_in.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(10.0):
                await all_in.wait()
        in_flight -= 1
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": []}})

    url = await front(aiohttp_server, slow)
    with mock.patch("os.cpu_count", return_value=2):  # the default executor is made on first use: as on such a node
        await asyncio.get_running_loop().run_in_executor(None, time.sleep, 0)
        await collect(url, "--prometheus-timeout", "30")

    assert most == queries, most


async def test_a_runtime_prometheus_has_no_series_for_is_named_in_the_log(
    prometheus: PrometheusServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The PodMonitor's namespaceSelector leaves out one namespace (or a scrape config drops it): Prometheus
    answers for every other runtime, so no outage is logged, and that runtime's values stay 503 forever with
    nothing in the log naming Prometheus. Once the runtime has gone unseen for longer than a new pod takes to be
    scraped, the log must say so, once, naming the runtime and what to check."""
    disc = discovery()
    disc.set_runtime(RuntimeInventory(RuntimeKey("team-z", "modelmesh-serving-onnx"),
                                      pods=(PodTarget(name="onnx-1", ready=True, url=None),
                                            PodTarget(name="onnx-2", ready=True, url=None))))
    args = cli.build_parser().parse_args(["serve", "--source", "prometheus", "--prometheus-url", prometheus.url])
    source = build_source(settings_from_args(args, {}), disc)
    now = time.time()
    try:
        with caplog.at_level(logging.WARNING, logger="autoscaler.sources.prometheus"):
            await source.collect(now)
            assert caplog.messages == []  # a new runtime: Prometheus has not had the time to scrape it yet
            for later in (130.0, 260.0):
                snapshots = await source.collect(now + later)
    finally:
        await source.close()

    assert all(s.source_ok for s in snapshots)
    assert len(caplog.messages) == 1, caplog.messages
    assert "team-z/modelmesh-serving-onnx" in caplog.messages[0]
    assert "namespaceSelector" in caplog.messages[0]


async def test_a_certificate_the_adapter_does_not_trust_is_a_tls_failure_naming_the_ca_flag(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Thanos Querier or a Prometheus behind TLS signed by the cluster's own CA, and no --prometheus-ca-file: the
    failure was counted as `connect` (the scrape source counts it `tls`, and the docs list `tls` for both) and
    logged as urllib3's `Max retries exceeded ... (Caused by SSLError(...))`, without the flag that fixes it."""
    certificates = generate_self_signed(tmp_path / "tls", "thanos-querier", ["127.0.0.1"])
    async with empty_prometheus_over_tls(server_context(certificates.cert_file, certificates.key_file)) as port:
        with caplog.at_level(logging.WARNING):
            snapshots, errors = await collect(f"https://127.0.0.1:{port}")

    assert all(not s.source_ok for s in snapshots)
    assert errors == {"tls": 1}
    (line,) = warnings(caplog)
    assert "--prometheus-ca-file" in line and "Max retries" not in line, line
