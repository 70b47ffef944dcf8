"""Serving TLS: 1.2 or newer only, from files or self-signed, asking for client certificates only when
some CA can verify them."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from pathlib import Path

import pytest
import trustme
from cryptography import x509

from autoscaler.api.certs import generate_self_signed, self_signed_server_context, server_context
from autoscaler.api.client_certs import CertificateAuthorities, trust_client_certificates
from tests.support.certificates import issue_cert


async def handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> str:
    """Complete a TLS handshake on loopback; the negotiated version. Both ends are closed and waited for: closed
    without waiting, a socket outlived the test's loop and the garbage collector's ResourceWarning failed
    whichever test ran next."""
    served = asyncio.get_running_loop().create_future()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.read(1)
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()
        finally:
            if not served.done():
                served.set_result(None)

    listener = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server)
    port = listener.sockets[0].getsockname()[1]
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname="127.0.0.1")
        version = writer.get_extra_info("ssl_object").version()
        writer.write(b"x")
        writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await writer.wait_closed()
        await asyncio.wait_for(served, 30)
        return str(version)
    finally:
        listener.close()
        await listener.wait_closed()


@pytest.fixture
def server_files(tmp_path: Path) -> tuple[trustme.CA, Path]:
    ca = trustme.CA()
    issue_cert(ca, "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "tls.pem"))
    return ca, tmp_path / "tls.pem"


def client_for(ca: trustme.CA, version: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    if version is not None:
        context.minimum_version = context.maximum_version = version
    return context


async def test_tls_1_2_and_1_3_are_served(server_files: tuple[trustme.CA, Path]) -> None:
    ca, pem = server_files
    server = server_context(pem, pem)
    assert server.minimum_version == ssl.TLSVersion.TLSv1_2
    assert await handshake(server, client_for(ca, ssl.TLSVersion.TLSv1_2)) == "TLSv1.2"
    assert await handshake(server, client_for(ca)) == "TLSv1.3"


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated:DeprecationWarning")
async def test_tls_1_1_is_refused(server_files: tuple[trustme.CA, Path]) -> None:
    ca, pem = server_files
    client = client_for(ca)
    client.set_ciphers("DEFAULT:@SECLEVEL=0")  # the client would speak 1.1; the server must not
    client.minimum_version = ssl.TLSVersion.TLSv1_1
    client.maximum_version = ssl.TLSVersion.TLSv1_1
    with pytest.raises((ssl.SSLError, ConnectionError)):
        await handshake(server_context(pem, pem), client)


def test_a_self_signed_certificate_names_every_host(tmp_path: Path) -> None:
    files = generate_self_signed(tmp_path, "modelmesh-autoscaler", ["127.0.0.1", "localhost", "adapter.ns.svc"])
    certificate = x509.load_pem_x509_certificate(files.cert_file.read_bytes())
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost", "adapter.ns.svc"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert self_signed_server_context("x", ["127.0.0.1"]).minimum_version == ssl.TLSVersion.TLSv1_2


def test_client_certificates_are_requested_only_with_a_ca_to_verify_them(
        server_files: tuple[trustme.CA, Path]) -> None:
    _, pem = server_files
    context = server_context(pem, pem)
    trust_client_certificates(context, None, None)
    modes = [context.verify_mode]
    trust_client_certificates(context, CertificateAuthorities.from_pem(trustme.CA().cert_pem.bytes(), "test"))
    modes.append(context.verify_mode)
    assert modes == [ssl.CERT_NONE, ssl.CERT_OPTIONAL]


@pytest.mark.parametrize("ciphers", [
    "ECDHE-RSA-AES128-SHA256:ECDHE-RSA-AES256-SHA384",  # CBC: Go's InsecureCipherSuites (Lucky13)
    "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384",  # finite-field DHE: Go has none
])
async def test_tls_1_2_suites_kube_apiserver_would_not_offer_are_refused(tmp_path: Path, ciphers: str) -> None:
    """TLS 1.2 is served with the forward-secret AEAD suites of kube-apiserver's defaults only."""
    ca = trustme.CA(key_type=trustme.KeyType.RSA)  # RSA, as cert-manager issues by default
    issue_cert(ca, "127.0.0.1", key_type=trustme.KeyType.RSA).private_key_and_cert_chain_pem.write_to_path(
        str(tmp_path / "tls.pem"))
    server = server_context(tmp_path / "tls.pem", tmp_path / "tls.pem")
    assert await handshake(server, client_for(ca, ssl.TLSVersion.TLSv1_2)) == "TLSv1.2"  # Go's suites: served
    client = client_for(ca, ssl.TLSVersion.TLSv1_2)
    client.set_ciphers(ciphers)
    with pytest.raises((ssl.SSLError, ConnectionError)):
        await handshake(server, client)
