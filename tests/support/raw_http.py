"""A plain HTTP client that never closes its connection, for the HTTPS ports' answer to plain HTTP: what it reads
shows both the answer and whether the server closes after it (as Go's servers do), where curl closes at once."""

from __future__ import annotations

import socket


def read_until_closed(port: int, request: bytes) -> bytes:
    """Everything a plain HTTP client that never closes reads, up to the server's close (EOF); a client timeout
    (a third of asyncio's 60 s handshake timeout) where the server leaves the connection open."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as client:
        client.sendall(request)
        received = b""
        while chunk := client.recv(4096):
            received += chunk
    return received
