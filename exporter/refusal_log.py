"""Clients a TLS port refuses, in the log: one WARNING line per cause per interval, naming the peer and the fix.

Why: a refused client sees an alert, a `400` or a `401`, and its own log says only that (Prometheus's target
page "EOF" or "400", the aggregator's `connection reset by peer`); the operator debugging it looks at the
server's log first, which said nothing (asyncio drops a failed handshake at DEBUG). It must say which peer, what
was refused, and which setting decides it. A misconfigured client retries at once, so a line per connection
would flood the log: one line per cause per interval, counting the ones left out (`log_limit.LogLimiter`).
Both HTTPS ports log through here, each with the remedies in its own settings' words (`Remedies`): the adapter
(`autoscaler.api.handshake_refusals`) and the exporter (`exporter.metrics_tls`).

A client that goes away before or during its handshake (a TCP probe, a port scan, a timeout) was refused
nothing: that stays a DEBUG line.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from exporter.log_limit import INTERVAL_S, LogLimiter
from exporter.refused_handshakes import PLAIN_HTTP_REASONS

NOTHING_IN_COMMON_REASONS: Final = frozenset({"NO_SHARED_CIPHER", "UNSUPPORTED_PROTOCOL", "NO_PROTOCOLS_AVAILABLE",
                                              "VERSION_TOO_LOW"})
"""OpenSSL's reasons when the client offers no TLS version or cipher the server accepts."""

OTHER_REFUSAL: Final = "see OpenSSL's reason; the client's own log says what it sent"


@dataclass(frozen=True)
class Remedies:
    """What to do about each kind of refused handshake, in the words of one server's settings."""

    untrusted_client: str
    """A client certificate no CA the server trusts signed."""
    plain_http: str
    """Plain HTTP (or anything but a TLS ClientHello) sent to the TLS port."""
    nothing_in_common: str
    """No TLS version or cipher in common."""


def describe(error: ssl.SSLError, remedies: Remedies) -> tuple[str, str]:
    """(cause, what to do) for a refused handshake: the cause as OpenSSL names it, with its verification detail
    where it has one (`unable to get local issuer certificate`), and the setting or fix that decides it."""
    reason = getattr(error, "reason", None) or type(error).__name__
    detail = getattr(error, "verify_message", None) or ""
    cause = f"{reason}: {detail}" if detail else str(reason)
    if isinstance(error, ssl.SSLCertVerificationError) or reason == "CERTIFICATE_VERIFY_FAILED":
        return f"certificate verify failed ({cause})", remedies.untrusted_client
    if reason in PLAIN_HTTP_REASONS:
        return f"plain HTTP ({cause})", remedies.plain_http
    if reason in NOTHING_IN_COMMON_REASONS:
        return f"protocol ({cause})", remedies.nothing_in_common
    return cause, OTHER_REFUSAL


class RefusalLog:
    """Logs the clients a port refuses (`failed` for handshakes, `refused` for any other), one line per cause
    per interval."""

    def __init__(self, logger: logging.Logger, remedies: Remedies, interval_s: float = INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log = logger
        self.remedies = remedies
        self._limiter = LogLimiter(interval_s, clock)

    def failed(self, peer: str, error: BaseException) -> None:
        """A handshake with `peer` that ended in `error`: a WARNING when the server refused the client (an
        `ssl.SSLError`), rate-limited by cause; DEBUG when the client went away or timed out."""
        if not isinstance(error, ssl.SSLError):
            self._log.debug("TLS handshake with %s did not complete: %r", peer or "an unknown peer", error)
            return
        cause, remedy = describe(error, self.remedies)
        self.refused(f"TLS handshake with {peer or 'an unknown peer'}", cause, remedy)

    def refused(self, what: str, cause: str, remedy: str) -> None:
        """`what` (the handshake or request, naming the peer) was refused for `cause`: a WARNING saying `remedy`,
        unless one about `cause` was logged less than an interval ago."""
        left_out = self._limiter.admit(cause)
        if left_out is None:
            return
        self._log.warning("%s refused: %s; %s; further ones logged once per %.0f s%s", what, cause, remedy,
                          self._limiter.interval_s, self._limiter.note(left_out))
