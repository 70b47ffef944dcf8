"""The adapter's scrape of an exporter that tells a refused client why (`exporter.refused_handshakes`: a `400`
to plain HTTP, OpenSSL's alert to a client certificate of another CA) still names the setting to change. The
exporter's own serving TLS (`exporter.metrics_tls.serve_over_tls`) on an aiohttp server, the adapter's
`ScrapeSource` scraping it."""

from __future__ import annotations

import ssl
from pathlib import Path

import trustme
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from exporter.metrics_tls import serve_over_tls
from exporter.settings import ExporterSettings
from tests.sources.test_scrape_hints import exporter_says, said
from tests.support.certificates import issue_cert


async def exporter_over_tls(aiohttp_server: AiohttpServer, tmp_path: Path, ca: trustme.CA) -> int:
    """The port of an exporter serving HTTPS with `ca`'s certificate, asking clients for one of `ca`'s."""
    leaf = issue_cert(ca, "127.0.0.1")
    leaf.cert_chain_pems[0].write_to_path(str(tmp_path / "tls.crt"))
    leaf.private_key_pem.write_to_path(str(tmp_path / "tls.key"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    settings = ExporterSettings(tls_cert_file=tmp_path / "tls.crt", tls_key_file=tmp_path / "tls.key",
                                tls_client_ca_file=tmp_path / "ca.pem")
    app = web.Application()
    app.router.add_get("/metrics", exporter_says)
    context = serve_over_tls(app, settings)
    server = await aiohttp_server(app, ssl=context)
    assert server.port is not None
    return server.port


async def test_plain_http_answered_400_names_the_port_name_and_the_scheme(aiohttp_server: AiohttpServer,
                                                                          tmp_path: Path) -> None:
    port = await exporter_over_tls(aiohttp_server, tmp_path, trustme.CA())
    reason, detail = await said(f"http://127.0.0.1:{port}/metrics")
    assert reason == "connect", detail  # as when the exporter closed the connection: alerts keep matching
    assert "--exporter-scheme https" in detail and "https-exporter" in detail, detail
    assert "--tls-cert-file" in detail, detail


async def test_a_client_certificate_of_another_ca_names_the_client_certificate_flags(aiohttp_server: AiohttpServer,
                                                                                     tmp_path: Path) -> None:
    port = await exporter_over_tls(aiohttp_server, tmp_path, trustme.CA())
    client = ssl.create_default_context()
    client.check_hostname, client.verify_mode = False, ssl.CERT_NONE
    issue_cert(trustme.CA(), "adapter@example.com").configure_cert(client)
    reason, detail = await said(f"https://127.0.0.1:{port}/metrics", client)
    assert "--exporter-client-cert-file" in detail, (reason, detail)
