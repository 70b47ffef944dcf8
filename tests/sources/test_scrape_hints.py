"""A failing exporter scrape says what to change, as the Prometheus source's errors do: what the log line and
/debug show for the pod (`ScrapeSource.problems`). Before, a certificate from an unknown CA was aiohttp's
`Cannot connect to host ... ssl:True [SSLCertVerificationError: (1, '[SSL: CERTIFICATE_VERIFY_FAILED] ...')]`
with no word of --exporter-ca-file, an https URL to a plain exporter an OpenSSL record error, and a 401 or 404
a bare status.

Real servers on real sockets: an aiohttp exporter over TLS with a trustme certificate, a plain one.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable

import pytest
import trustme
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from autoscaler.model import RuntimeKey
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.scrape import ScrapeSource
from tests.sources.static_discovery import StaticDiscovery
from tests.support.certificates import issue_cert

KEY = RuntimeKey("ml", "modelmesh-serving-triton")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def serve(aiohttp_server: AiohttpServer, handler: Handler, tls: ssl.SSLContext | None = None) -> int:
    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    server = await aiohttp_server(app, ssl=tls)
    assert server.port is not None
    return server.port


async def said(url: str, ssl_context: ssl.SSLContext | None = None, *, timeout_s: float = 5.0,
               deadline_s: float = 15.0) -> tuple[str, str]:
    """(reason, detail) of one failed scrape of `url`, as /debug shows it. The connection may take all of
    `timeout_s`: at the adapter's 1 s for connecting (a dropped packet's hint), a loaded machine that stalled this
    process for a second during a TLS handshake with its own in-process server read as a timeout (a CI run;
    made to fail by stalling 1.5 s after the connect)."""
    source = ScrapeSource(StaticDiscovery([RuntimeInventory(KEY, (PodTarget("p-0", True, url),))]),
                          timeout_s=timeout_s, deadline_s=deadline_s, ssl_context=ssl_context,
                          connect_timeout_s=timeout_s)
    try:
        await source.collect(1_700_000_000.0)
        [problem] = source.problems(KEY)
        return problem.reason, problem.detail
    finally:
        await source.close()


async def exporter_says(request: web.Request) -> web.Response:
    return web.Response(text="# EOF\n")


async def test_a_certificate_from_an_unknown_ca_names_the_flag(aiohttp_server: AiohttpServer) -> None:
    ca = trustme.CA()
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    issue_cert(ca, "127.0.0.1").configure_cert(tls)
    port = await serve(aiohttp_server, exporter_says, tls)
    reason, detail = await said(f"https://127.0.0.1:{port}/metrics")
    assert reason == "tls"
    assert "certificate verify failed" in detail and "--exporter-ca-file" in detail, detail


async def test_https_to_a_plain_exporter_says_to_use_http(aiohttp_server: AiohttpServer) -> None:
    port = await serve(aiohttp_server, exporter_says)
    reason, detail = await said(f"https://127.0.0.1:{port}/metrics")
    assert reason == "tls"
    assert "http://" in detail and "plain" in detail, detail


@pytest.mark.parametrize(("status", "hint"), [(401, "refuses the adapter"), (403, "refuses the adapter"),
                                              (404, "no /metrics")])
async def test_an_http_error_says_what_it_means(aiohttp_server: AiohttpServer, status: int, hint: str) -> None:
    async def refuse(request: web.Request) -> web.Response:
        return web.Response(status=status)

    port = await serve(aiohttp_server, refuse)
    reason, detail = await said(f"http://127.0.0.1:{port}/metrics")
    assert reason == "http"
    assert f"HTTP {status}" in detail and hint in detail, detail


async def test_a_redirect_is_not_followed_and_says_where_it_pointed(aiohttp_server: AiohttpServer) -> None:
    """A tenant's pod at the exporter port that redirects the adapter elsewhere: another tenant's exporter (whose
    load it would be served as its own) or an internal address (whose answer came back quoted in the 503 and
    /debug the tenant can read). Before, aiohttp followed up to ten redirects to any host. The exporter never
    redirects: an `http` failure of that pod, the Location said, the other server never asked."""
    asked_elsewhere: list[str] = []

    async def elsewhere(request: web.Request) -> web.Response:
        asked_elsewhere.append(request.path)
        return web.Response(text='{"AccessKeyId":"ASIAEXAMPLE","Token":"IQoJ"}\n')

    other = await serve(aiohttp_server, elsewhere)

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound(location=f"http://127.0.0.1:{other}/secret")

    port = await serve(aiohttp_server, redirect)
    reason, detail = await said(f"http://127.0.0.1:{port}/metrics")
    assert asked_elsewhere == []
    assert reason == "http"
    assert f"HTTP 302 from http://127.0.0.1:{port}/metrics" in detail, detail
    assert f"redirected to 'http://127.0.0.1:{other}/secret', not followed" in detail, detail
    assert "AccessKeyId" not in detail, detail
