"""TLS handshakes the adapter refuses, in its log: one WARNING line per cause per interval.

A client refused in the handshake (a certificate from a CA the adapter does not trust, no protocol or cipher
in common, plain HTTP sent to the TLS port) is told why (`exporter.refused_handshakes`: the alert, or Go's
`400 Bad Request`), but its own log says little more: the aggregator logs `remote error: tls: unknown
certificate authority`, `connection reset by peer` or `EOF` and the APIService turns unavailable, while the
adapter said nothing (the failure was a DEBUG line). The operator debugging it needs the adapter's side: which
peer, what OpenSSL refused, and which setting decides it, once per cause per interval
(`exporter.refusal_log.RefusalLog`, which the exporter's port logs through too, with its own settings' words).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final

from exporter.log_limit import INTERVAL_S
from exporter.refusal_log import RefusalLog, Remedies

ADAPTER_REMEDIES: Final = Remedies(
    untrusted_client=(
        "the client's certificate is not signed by a CA the adapter trusts: the aggregator's front-proxy "
        "certificate must be signed by --requestheader-client-ca-file's CA, a user's by --client-ca-file's "
        "(without those flags, the CAs of kube-system/extension-apiserver-authentication); a client with a bearer "
        "token needs no certificate"),
    plain_http=("the client sent plain HTTP (or something else) to the TLS port and was answered 400 Bad Request: "
                "it must use https://"),
    nothing_in_common=("the client offers no TLS version or cipher the adapter accepts (TLS 1.2 or later): update "
                       "the client or its TLS settings"),
)

PLAIN_HTTP_ADVICE: Final = (
    "This is the autoscaler's external metrics API, which serves HTTPS only, as every Kubernetes API server: use "
    "https://, or ask through kube-apiserver: kubectl get --raw /apis/external.metrics.k8s.io/v1beta1")
"""The line after Go's in the `400` a plain HTTP client is answered (`exporter.refused_handshakes`)."""


class HandshakeRefusals(RefusalLog):
    """Logs the handshakes a listener refuses (`failed`), one line per cause per interval."""

    def __init__(self, logger: logging.Logger, interval_s: float = INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(logger, ADAPTER_REMEDIES, interval_s, clock)
