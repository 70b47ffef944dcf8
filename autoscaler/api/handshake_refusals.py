"""TLS handshakes the adapter refuses, in its log: one WARNING line per cause per interval.

A client refused in the handshake (a certificate from a CA the adapter does not trust, no protocol or cipher
in common, plain HTTP sent to the TLS port) is told nothing but a closed connection: the aggregator logs
`connection reset by peer` or `EOF` and the APIService turns unavailable, while the adapter said nothing
(the failure was a DEBUG line). The operator debugging that reset needs the adapter's side: which peer, what
OpenSSL refused, and which setting decides it. A misconfigured client retries at once, so a line per
connection would flood the log: one line per cause per interval, counting the ones left out
(`log_limit.LogLimiter`, as the malformed requests' lines).

A client that goes away before or during its handshake (a TCP probe, a port scan, a timeout) was refused
nothing: that stays a DEBUG line.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable
from typing import Final

from autoscaler.api.log_limit import INTERVAL_S, LogLimiter
from exporter.refused_handshakes import PLAIN_HTTP_REASONS

_NOTHING_IN_COMMON_REASONS: Final = frozenset({"NO_SHARED_CIPHER", "UNSUPPORTED_PROTOCOL", "NO_PROTOCOLS_AVAILABLE",
                                               "VERSION_TOO_LOW"})
_UNTRUSTED_CLIENT: Final = (
    "the client's certificate is not signed by a CA the adapter trusts: the aggregator's front-proxy certificate "
    "must be signed by --requestheader-client-ca-file's CA, a user's by --client-ca-file's (without those flags, "
    "the CAs of kube-system/extension-apiserver-authentication); a client with a bearer token needs no "
    "certificate")
_PLAIN_HTTP: Final = "the client sent plain HTTP (or something else) to the TLS port: it must use https://"
_NOTHING_IN_COMMON: Final = ("the client offers no TLS version or cipher the adapter accepts (TLS 1.2 or later): "
                             "update the client or its TLS settings")


def describe(error: ssl.SSLError) -> tuple[str, str]:
    """(cause, what to do) for a refused handshake: the cause as OpenSSL names it, with its verification detail
    where it has one (`unable to get local issuer certificate`), and the setting or fix that decides it."""
    reason = getattr(error, "reason", None) or type(error).__name__
    detail = getattr(error, "verify_message", None) or ""
    cause = f"{reason}: {detail}" if detail else str(reason)
    if isinstance(error, ssl.SSLCertVerificationError) or reason == "CERTIFICATE_VERIFY_FAILED":
        return f"certificate verify failed ({cause})", _UNTRUSTED_CLIENT
    if reason in PLAIN_HTTP_REASONS:
        return cause, _PLAIN_HTTP
    if reason in _NOTHING_IN_COMMON_REASONS:
        return cause, _NOTHING_IN_COMMON
    return cause, "see OpenSSL's reason; the client's own log says what it sent"


class HandshakeRefusals:
    """Logs the handshakes a listener refuses (`refused`), one line per cause per interval."""

    def __init__(self, logger: logging.Logger, interval_s: float = INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log = logger
        self._limiter = LogLimiter(interval_s, clock)

    def failed(self, peer: str, error: BaseException) -> None:
        """A handshake with `peer` that ended in `error`: a WARNING when the adapter refused the client (an
        `ssl.SSLError`), rate-limited by cause; DEBUG when the client went away or timed out."""
        if not isinstance(error, ssl.SSLError):
            self._log.debug("TLS handshake with %s did not complete: %r", peer or "an unknown peer", error)
            return
        cause, remedy = describe(error)
        left_out = self._limiter.admit(cause)
        if left_out is None:
            return
        self._log.warning("TLS handshake with %s refused: %s; %s; further ones logged once per %.0f s%s",
                          peer or "an unknown peer", cause, remedy, self._limiter.interval_s,
                          self._limiter.note(left_out))
