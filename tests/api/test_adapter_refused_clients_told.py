"""A client the adapter's HTTPS port refuses is told why, as kube-apiserver tells it, where it was told nothing.

`curl http://ADAPTER:6443/apis/external.metrics.k8s.io/v1beta1` got a closed connection ("Empty reply from
server"), and a client certificate of a CA the adapter does not trust a bare EOF where OpenSSL had written the
alert naming the cause. Go's servers answer the first `400 Bad Request`, "Client sent an HTTP request to an
HTTPS server.", and close; they send the second its alert. Checked with curl, openssl s_client and a raw socket
against the adapter's real guarded TLS listener, as an operator checks a refused client."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from autoscaler.api.connections import ConnectionLimits
from autoscaler.settings import ServeSettings
from tests.api.builders import Pki
from tests.api.conftest import SecuredApi, secured_api
from tests.fakes.kube import FakeKubeApi
from tests.support.raw_http import read_until_closed

DISCOVERY = "/apis/external.metrics.k8s.io/v1beta1"
CONNECTIONS_LOGGER = "autoscaler.api.connections"


@pytest.fixture
async def patient(pki: Pki, kube: FakeKubeApi, settings_for: Callable[..., ServeSettings]
                  ) -> AsyncIterator[SecuredApi]:
    """The adapter with a handshake timeout far longer than a client waits below: a refused connection it
    closes is closed because it was refused, not because the handshake ran out of time."""
    async with secured_api(pki, kube, settings_for(), limits=ConnectionLimits(header_read_timeout_s=120.0)) as api:
        yield api


async def run(*command: str) -> tuple[int, str, str]:
    """A real process, while the adapter serves on this loop: (status, stdout, stderr)."""
    process = await asyncio.create_subprocess_exec(*command, stdin=asyncio.subprocess.DEVNULL,
                                                   stdout=asyncio.subprocess.PIPE,
                                                   stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def curl(url: str, *options: str) -> tuple[int, str, str]:
    """curl as an operator runs it: the status code on the last line of stdout, the body before it."""
    return await run("curl", "--silent", "--show-error", "--max-time", "20", "--write-out", "\n%{http_code}",
                     *options, url)


async def test_curl_with_http_is_answered_400_saying_to_use_https(secured: SecuredApi) -> None:
    status, out, err = await curl(f"http://127.0.0.1:{secured.port}{DISCOVERY}")
    assert "Empty reply from server" not in err, err
    assert out.endswith("\n400"), (out, err)
    assert out.startswith("Client sent an HTTP request to an HTTPS server.\n"), out  # Go's words, first
    assert "https://" in out, out
    assert status == 0, err
    answered, _ = await secured.get("/apis")  # the port goes on serving HTTPS
    assert answered == 401


async def test_a_plain_http_client_that_does_not_close_reads_the_answer_then_eof(patient: SecuredApi) -> None:
    received = await asyncio.to_thread(read_until_closed, patient.port,
                                       f"GET {DISCOVERY} HTTP/1.1\r\nHost: adapter\r\n\r\n".encode())
    assert received.startswith(b"HTTP/1.0 400 Bad Request\r\n"), received
    assert received.endswith(b"\n"), received  # the whole answer, then the close


def stranger_files(directory: Path, pki: Pki) -> tuple[Path, Path, Path]:
    """(certificate, key) of a client certificate of a CA the adapter does not trust, and the adapter's CA."""
    cert, key, ca = directory / "stranger.crt", directory / "stranger.key", directory / "server-ca.crt"
    pki.stranger.cert_chain_pems[0].write_to_path(str(cert))
    pki.stranger.private_key_pem.write_to_path(str(key))
    pki.server_ca.cert_pem.write_to_path(str(ca))
    return cert, key, ca


@pytest.mark.parametrize("version", [["--tlsv1.3"], ["--tlsv1.2", "--tls-max", "1.2"]], ids=["tls1.3", "tls1.2"])
async def test_a_certificate_of_another_ca_gets_the_alert_naming_it(tmp_path: Path, patient: SecuredApi,
                                                                    version: list[str]) -> None:
    cert, key, ca = stranger_files(tmp_path, patient.pki)
    status, _, err = await curl(f"https://localhost:{patient.port}{DISCOVERY}", "--cacert", str(ca), *version,
                                "--cert", str(cert), "--key", str(key))
    assert status != 0, err
    assert "alert unknown ca" in err, err  # not "Empty reply from server" nor a bare EOF


async def test_openssl_s_client_is_told_unknown_ca(tmp_path: Path, patient: SecuredApi) -> None:
    """TLS 1.2: with TLS 1.3 s_client finishes its side of the handshake and, given no input, closes before it
    reads what the server answers to its certificate."""
    cert, key, ca = stranger_files(tmp_path, patient.pki)
    _, out, err = await run("openssl", "s_client", "-connect", f"127.0.0.1:{patient.port}", "-tls1_2",
                            "-CAfile", str(ca), "-cert", str(cert), "-key", str(key))
    assert "alert unknown ca" in out + err, (out, err)


async def test_plain_http_is_one_warning_naming_the_peer_and_https(
        patient: SecuredApi, caplog: pytest.LogCaptureFixture) -> None:
    """The refusal log goes on saying whom and why, now that the client is answered and the adapter closes."""
    caplog.set_level(logging.INFO, CONNECTIONS_LOGGER)
    for _ in range(3):
        await asyncio.to_thread(read_until_closed, patient.port, b"GET /apis HTTP/1.1\r\nHost: adapter\r\n\r\n")
    for _ in range(20):
        await asyncio.sleep(0.01)
    lines = [record.getMessage() for record in caplog.records
             if record.name == CONNECTIONS_LOGGER and record.levelno >= logging.WARNING]
    assert len(lines) == 1, lines
    assert "127.0.0.1" in lines[0] and "https://" in lines[0] and "HTTP_REQUEST" in lines[0], lines

