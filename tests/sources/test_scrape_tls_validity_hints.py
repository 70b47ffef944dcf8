"""A failing exporter scrape names what to look at when the certificate is out of its dates, and when plain
HTTP reaches an exporter serving HTTPS. Before, an expired (or not yet valid) certificate got the hint for an
untrusted CA ("give --exporter-ca-file", which was given and right), and a plain-HTTP scrape of an HTTPS
exporter logged "Server disconnected" with no hint at all.

Real servers on real sockets, as in `test_scrape_hints`: an aiohttp exporter over TLS with trustme certificates
issued with past or future dates."""

from __future__ import annotations

import ssl
from datetime import UTC, datetime, timedelta

import pytest
import trustme
from pytest_aiohttp import AiohttpServer

from tests.sources.test_scrape_hints import exporter_says, said, serve
from tests.support.certificates import issue_cert

NOW = datetime.now(UTC)


def trusting(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


async def served_with(aiohttp_server: AiohttpServer, ca: trustme.CA, leaf: trustme.LeafCert) -> int:
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    leaf.configure_cert(tls)
    return await serve(aiohttp_server, exporter_says, tls)


async def test_an_expired_certificate_says_renewal_not_the_ca(aiohttp_server: AiohttpServer) -> None:
    ca = trustme.CA()
    leaf = issue_cert(ca, "127.0.0.1", not_before=NOW - timedelta(days=100), not_after=NOW - timedelta(days=10))
    port = await served_with(aiohttp_server, ca, leaf)
    reason, detail = await said(f"https://127.0.0.1:{port}/metrics", trusting(ca))
    assert reason == "tls"
    assert "certificate has expired" in detail, detail
    assert "--exporter-ca-file" not in detail, detail
    assert "renew" in detail and "reload" in detail and "sidecar's log" in detail, detail


async def test_a_certificate_not_yet_valid_says_to_check_clocks(aiohttp_server: AiohttpServer) -> None:
    ca = trustme.CA()
    leaf = issue_cert(ca, "127.0.0.1", not_before=NOW + timedelta(days=2), not_after=NOW + timedelta(days=90))
    port = await served_with(aiohttp_server, ca, leaf)
    reason, detail = await said(f"https://127.0.0.1:{port}/metrics", trusting(ca))
    assert reason == "tls"
    assert "certificate is not yet valid" in detail, detail
    assert "--exporter-ca-file" not in detail, detail
    assert "clock" in detail, detail


@pytest.mark.parametrize("with_client_ca", [False, True], ids=["https", "https-client-ca"])
async def test_plain_http_to_an_https_exporter_names_its_tls_and_the_scheme(aiohttp_server: AiohttpServer,
                                                                           with_client_ca: bool) -> None:
    ca = trustme.CA()
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    issue_cert(ca, "127.0.0.1").configure_cert(tls)
    if with_client_ca:
        ca.configure_trust(tls)
        tls.verify_mode = ssl.CERT_OPTIONAL
    port = await serve(aiohttp_server, exporter_says, tls)
    reason, detail = await said(f"http://127.0.0.1:{port}/metrics")
    assert reason == "connect"
    assert "--exporter-scheme https" in detail and "HTTPS" in detail and "--tls-cert-file" in detail, detail
    assert "https-exporter" in detail, detail  # the port name `--exporter-scheme auto` reads


async def test_https_to_a_plain_exporter_names_the_port_name_and_the_scheme(aiohttp_server: AiohttpServer) -> None:
    """A discovered pod is scraped over https when its exporter port is named https-... (`--exporter-scheme
    auto`): a sidecar not given its certificate yet answers in plain HTTP, and the hint said "scrape it with
    http://", which no one writes for a discovered pod."""
    port = await serve(aiohttp_server, exporter_says)
    reason, detail = await said(f"https://127.0.0.1:{port}/metrics", ssl.create_default_context())
    assert reason == "tls"
    assert "https-exporter" in detail and "--exporter-scheme http" in detail, detail
    assert "--tls-cert-file" in detail, detail
