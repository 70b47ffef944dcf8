"""The exporter names no implementation in its answers. aiohttp adds `Server: Python/3.11 aiohttp/3.x` to every
response, which tells anyone who reaches port 9187 which Python and aiohttp releases to look up advisories for
(the adapter sends none: tests/api/test_response_headers.py). Read as a scraper reads them, from the exporter
process: every route, a path that is none, and requests aiohttp's own parser refuses (answered without the app)."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.support.processes import free_port, running


def answer_head(port: int, request: bytes) -> str:
    """The status line and header fields of the first answer to `request`, as sent."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as client:
        client.sendall(request)
        received = b""
        while b"\r\n\r\n" not in received and (chunk := client.recv(4096)):
            received += chunk
    return received.split(b"\r\n\r\n", 1)[0].decode("latin-1")


def test_no_answer_names_python_or_aiohttp(tmp_path: Path) -> None:
    port = free_port()
    with running(["exporter.cli", "--listen", f"127.0.0.1:{port}", "--no-gpu", "--modelmesh-url",
                  "http://127.0.0.1:1/metrics"], f"http://127.0.0.1:{port}/healthz", tmp_path / "exporter.log"):
        heads = {request: answer_head(port, request) for request in (
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n",
            b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
            b"GET /no-such-path HTTP/1.1\r\nHost: x\r\n\r\n",
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",  # refused by the parser: a 400
            b"GARBAGE\r\n\r\n",
        )}
    for request, head in heads.items():
        assert head.startswith(("HTTP/1.1 200", "HTTP/1.1 404", "HTTP/1.0 400", "HTTP/1.1 400")), (request, head)
        assert "server:" not in head.lower() and "aiohttp" not in head and "Python" not in head, (request, head)
