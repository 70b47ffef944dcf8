"""A client the adapter refuses in the TLS handshake is told nothing but a closed connection: the aggregator
logs `connection reset by peer` (or `EOF`) and the APIService turns unavailable. The adapter's log must say
who was refused and why, once for a storm of them, not once per connection."""

from __future__ import annotations

import asyncio
import logging
import ssl

import aiohttp
import pytest

from tests.api.conftest import SecuredApi

CONNECTIONS_LOGGER = "autoscaler.api.connections"


async def _refused_handshake(api: SecuredApi) -> None:
    """A client offering a certificate from a CA the adapter does not trust (`Pki.stranger`)."""
    with pytest.raises((aiohttp.ClientError, ssl.SSLError, ConnectionError)):
        await api.get("/apis", cert=api.pki.stranger)


def _handshake_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records
            if record.name == CONNECTIONS_LOGGER and record.levelno >= logging.WARNING]


async def _settled() -> None:
    """The server's side of a refused handshake ends a few loop turns after the client's."""
    for _ in range(20):
        await asyncio.sleep(0.01)


async def test_a_client_certificate_from_an_untrusted_ca_is_one_warning_naming_the_peer_and_the_cause(
        secured: SecuredApi, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, CONNECTIONS_LOGGER)
    await _refused_handshake(secured)
    await _settled()
    lines = _handshake_lines(caplog)
    assert len(lines) == 1, lines
    assert "127.0.0.1" in lines[0], lines
    assert "certificate verify failed" in lines[0], lines
    assert "--requestheader-client-ca-file" in lines[0] and "--client-ca-file" in lines[0], lines


async def test_a_storm_of_refused_handshakes_is_one_line_then_counted(
        secured: SecuredApi, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, CONNECTIONS_LOGGER)
    for _ in range(5):
        await _refused_handshake(secured)
    await _settled()
    assert len(_handshake_lines(caplog)) == 1, _handshake_lines(caplog)


async def test_a_client_that_opens_and_closes_without_a_handshake_is_not_a_warning(
        secured: SecuredApi, caplog: pytest.LogCaptureFixture) -> None:
    """A TCP probe or a port scan refuses nothing: no line about it."""
    caplog.set_level(logging.INFO, CONNECTIONS_LOGGER)
    _, writer = await asyncio.open_connection("127.0.0.1", secured.port)
    writer.close()
    await writer.wait_closed()
    await _settled()
    assert _handshake_lines(caplog) == []


async def test_plain_http_sent_to_the_tls_port_is_a_warning_that_says_to_use_https(
        secured: SecuredApi, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, CONNECTIONS_LOGGER)
    reader, writer = await asyncio.open_connection("127.0.0.1", secured.port)
    writer.write(b"GET /apis HTTP/1.1\r\nHost: adapter\r\n\r\n")
    await writer.drain()
    await reader.read()  # the adapter closes the connection
    writer.close()
    await _settled()
    lines = _handshake_lines(caplog)
    assert len(lines) == 1 and "https://" in lines[0] and "127.0.0.1" in lines[0], lines
