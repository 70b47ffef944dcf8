"""Fetching one exporter's `/metrics`, with every cost bounded, and naming why a fetch failed.

The bounds exist because any pod that matches a runtime's selector gets scraped: a short connect timeout (a
black-holed pod costs one second, not the whole per-pod timeout), the per-pod total timeout, and a cap on
the bytes read (one pod answering 64 MiB bodies took the adapter past its 512 MiB memory limit). A body
over the cap is abandoned and its connection closed as soon as the cap is passed, never buffered.

Failure reasons are the exporter's own (`exporter.names.REASON_*`: a TLS failure is `tls` on both sides),
plus `too_large`.
"""

from __future__ import annotations

import ssl

import aiohttp

from exporter import names

MAX_BODY_BYTES = 1 << 20
"""1 MiB: the exporter's whole output with 8 GPUs is about 5 KB; anything near the cap is not our exporter."""
CONNECT_TIMEOUT_S = 1.0
"""Inside a cluster a TCP connect takes well under a millisecond; a pod that has not answered the SYN
within a second is gone (its node lost), and waiting longer only stretches the refresh."""
REASON_TOO_LARGE = "too_large"
_CHUNK_BYTES = 64 * 1024


class FetchError(Exception):
    """One fetch failed; `reason` is the `source_errors_total` label."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


def scrape_timeout(total_s: float, connect_s: float = CONNECT_TIMEOUT_S) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=total_s, sock_connect=min(connect_s, total_s))


async def fetch_exposition(session: aiohttp.ClientSession, url: str, *, max_bytes: int = MAX_BODY_BYTES) -> str:
    """The body of `url` as text; raises `FetchError` with the reason for any failure."""
    timeout = session.timeout
    try:
        async with session.get(url) as response:
            if response.status != 200:
                raise FetchError(names.REASON_HTTP, f"HTTP {response.status} from {url}")
            body = await _read_capped(response, url, max_bytes)
    except aiohttp.ConnectionTimeoutError as error:
        raise FetchError(names.REASON_TIMEOUT, f"no connection to {url} within {timeout.sock_connect} s") from error
    except TimeoutError as error:
        raise FetchError(names.REASON_TIMEOUT, f"no answer from {url} in {timeout.total} s") from error
    except (aiohttp.ClientSSLError, ssl.SSLError) as error:
        raise FetchError(names.REASON_TLS, f"{url}: {error}") from error
    except aiohttp.ClientPayloadError as error:
        raise FetchError(names.REASON_PARSE, f"incomplete body from {url}: {error}") from error
    except aiohttp.ClientError as error:
        raise FetchError(names.REASON_CONNECT, f"{url}: {error}") from error
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FetchError(names.REASON_PARSE, f"{url}: {error}") from error


async def _read_capped(response: aiohttp.ClientResponse, url: str, max_bytes: int) -> bytes:
    too_large = FetchError(REASON_TOO_LARGE, f"{url} sent more than {max_bytes} bytes; not read further")
    if response.content_length is not None and response.content_length > max_bytes:
        response.close()
        raise too_large
    body = bytearray()
    async for chunk in response.content.iter_chunked(_CHUNK_BYTES):
        body += chunk
        if len(body) > max_bytes:
            response.close()  # never hand a half-read connection back to the pool
            raise too_large
    return bytes(body)
