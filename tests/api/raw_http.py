"""Raw HTTP/1.1 over TLS: what a client sees for bytes that no HTTP client library would send (a request
aiohttp cannot parse, `OPTIONS *`, `CONNECT host:port`, thousands of header fields)."""

from __future__ import annotations

import asyncio

import trustme

from tests.api.builders import Pki


async def exchange(port: int, pki: Pki, raw: bytes, *,
                   cert: trustme.LeafCert | None = None) -> tuple[int, dict[str, list[str]], bytes]:
    """`raw` sent over TLS on a new connection (with `cert` as the client's certificate); the status, headers
    (lower-case names) and body the client reads before the server closes the connection (the request should
    say `Connection: close` where the server would keep it open)."""
    answer = await exchange_raw(port, pki, raw, cert=cert)
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers: dict[str, list[str]] = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers.setdefault(name.strip().lower(), []).append(value.strip())
    return int(status_line.split()[1]), headers, body


async def exchange_raw(port: int, pki: Pki, raw: bytes, *, cert: trustme.LeafCert | None = None) -> bytes:
    """`exchange`, the answer as the bytes the client reads, status line first."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=pki.client_context(cert))
    writer.write(raw)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return answer
