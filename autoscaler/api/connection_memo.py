"""What authentication found out about one connection, kept on it for the connection's next requests.

A TLS connection has one peer certificate for its whole life (the serving context refuses renegotiation,
`client_certs.trust_client_certificates`), and the aggregator sends an HPA's requests over a few long-lived
connections with the same headers each time. So the certificate is classified once per connection, and the
front-proxy identity is read again only when the request's headers differ from the previous request's on
the same connection (for the certificate-based methods only: a bearer token's review has its own TTL). Both
answers are exact (pure functions of what they are kept with), and together they save about a tenth of a
cached request's CPU (`bench/bench_request_cost.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autoscaler.api.client_certs import ClientCertificate
    from autoscaler.api.identity import UserInfo

RawHeaders = tuple[tuple[bytes, bytes], ...]


class ConnectionMemo:
    """Mixed into the adapter's protocol handler (`malformed_requests.StatusRequestHandler`); where a request's
    protocol is not one (aiohttp's own, in some tests), nothing is kept and every request is read in full."""

    peer_certificate: tuple[object, ClientCertificate | None] | None = None
    """(the inspector's CA generation, what the peer's certificate was found to be)."""
    identity: tuple[object, RawHeaders, tuple[UserInfo, str]] | None = None
    """(the inspector's CA generation, the request's raw headers, (the user they name, the method))."""
