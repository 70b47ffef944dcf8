"""The TLS failure behind a source's connection error, for the hints both sources give (the exporters' scrape
through aiohttp, Prometheus through requests and urllib3): each library wraps OpenSSL's error its own way, so
the `ssl.SSLError` is found by walking the chain rather than by one library's attribute."""

from __future__ import annotations

import ssl
from typing import Final

import aiohttp

NOT_TLS: Final = frozenset({"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "UNKNOWN_PROTOCOL",
                            "PACKET_LENGTH_TOO_LONG", "HTTP_REQUEST"})
"""OpenSSL's reasons when the other end answered a TLS handshake with something else (plain http, mostly)."""

HOST_MISMATCH: Final = frozenset({62, 64})
"""X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH: a certificate that chains to a trusted CA but
is not issued for the name asked."""

_LINKS: Final = ("certificate_error", "os_error", "reason")
"""Where the libraries keep the error they wrap: aiohttp's connector errors (the first two), urllib3's
MaxRetryError and SSLError (`reason`)."""


def ssl_cause(error: BaseException) -> ssl.SSLError | None:
    """The `ssl.SSLError` behind `error` (its wrapped errors, cause, context or arguments), if any. aiohttp's own
    subclass of it is passed through to the OpenSSL error it carries."""
    seen: set[int] = set()
    pending: list[object] = [error]
    while pending:
        current = pending.pop()
        if not isinstance(current, BaseException) or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ssl.SSLError) and not isinstance(current, aiohttp.ClientError):
            return current
        pending.extend((*(getattr(current, link, None) for link in _LINKS), current.__cause__, current.__context__,
                        *current.args))
    return None
