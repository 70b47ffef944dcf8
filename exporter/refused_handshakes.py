"""A client refused in the TLS handshake is told why, where asyncio told it nothing but a closed connection.

Why: asyncio's TLS layer closes the connection at once when the handshake fails, without writing what OpenSSL
had prepared for the client (the alert naming the cause: `unknown ca` for a client certificate of a CA not in
`--tls-client-ca-file`). Plain HTTP sent to the HTTPS port is refused by OpenSSL with nothing to write at all.
Either way the client saw a bare EOF: curl "Empty reply from server", Prometheus's target page "EOF", with
nothing on either side that says which setting is wrong. Go's servers (kube-apiserver, node-exporter) send the
alert, and answer plain HTTP `400 Bad Request` "Client sent an HTTP request to an HTTPS server."; so do we.

How: through `SSLContext.sslobject_class`, the documented hook for the object asyncio drives the handshake with.
When OpenSSL refuses, `RefusalTelling.do_handshake` puts the answer in the outgoing buffer (the plain-HTTP
answer in place of anything else; OpenSSL's alert as it is) and says "want read" once, which makes asyncio send
that buffer; the refusal itself is raised at the next step of the handshake, which the client's close (curl,
Prometheus and OpenSSL close on an alert or a `Connection: close` answer) or more of its bytes bring, or the
handshake timeout. A handshake that succeeds runs exactly as before: nothing is read ahead, nothing is added to
it. The context's certificate reload (`load_cert_chain` in place, or `sni_callback` handing a handshake to a
newer context) is untouched: the class is chosen as the connection is made, whichever context it ends on.
"""

from __future__ import annotations

import ssl
from typing import Any, ClassVar, Final

PLAIN_HTTP_REASONS: Final = frozenset({"HTTP_REQUEST", "HTTPS_PROXY_REQUEST", "WRONG_VERSION_NUMBER",
                                       "UNKNOWN_PROTOCOL"})
"""OpenSSL's reasons when a client sent something other than a TLS ClientHello (`HTTP_REQUEST`: an HTTP request
line, which OpenSSL recognises server-side; `HTTPS_PROXY_REQUEST`: a CONNECT). The adapter's log reads them too
(`autoscaler.api.handshake_refusals`)."""

GO_SAYS: Final = "Client sent an HTTP request to an HTTPS server."
"""The first line of the plain-HTTP answer, word for word Go's, which operators search for."""


def plain_http_answer(made_tls_by: str) -> bytes:
    """The `400 Bad Request` a plain HTTP client gets, naming the setting `made_tls_by` that made the port TLS."""
    body = (f"{GO_SAYS}\nThis port serves HTTPS only ({made_tls_by} is given): use https:// (Prometheus: "
            "scheme: https in the scrape config or ServiceMonitor endpoint; probes: scheme: HTTPS).\n").encode()
    head = ("HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    return head + body


class RefusalTelling(ssl.SSLObject):
    """An `ssl.SSLObject` whose refused handshake sends the client its answer before it fails (see the module)."""

    plain_http: ClassVar[bytes] = b""
    """What a plain HTTP client is answered (`tell_refused_clients` sets it per context)."""

    _outgoing: ssl.MemoryBIO | None = None
    _refusal: ssl.SSLError | None = None

    @classmethod
    def _create(cls, incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO, *args: Any,
                **kwargs: Any) -> RefusalTelling:
        """What `SSLContext.wrap_bio` calls (since Python 3.7): the one place the outgoing buffer is seen. A
        Python that named it otherwise leaves `_outgoing` None, and refusals close at once, as before."""
        made: RefusalTelling = super()._create(incoming, outgoing, *args, **kwargs)  # type: ignore[misc]
        made._outgoing = outgoing
        return made

    def do_handshake(self) -> None:
        if self._refusal is not None:
            raise self._refusal
        try:
            super().do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise
        except ssl.SSLError as error:
            outgoing = self._outgoing
            if outgoing is None:
                raise
            if getattr(error, "reason", None) in PLAIN_HTTP_REASONS and self.plain_http:
                outgoing.read()  # an alert, if any, would garble the answer a plain HTTP client reads
                outgoing.write(self.plain_http)
            elif not outgoing.pending:
                raise  # nothing to tell the client: refused at once, as before
            self._refusal = error
            raise ssl.SSLWantReadError("the refusal is sent to the client first") from error


def tell_refused_clients(context: ssl.SSLContext, made_tls_by: str) -> None:
    """Handshakes on `context` from now on tell a refused client why (see the module); `made_tls_by` names the
    setting that made the port TLS, for the plain-HTTP answer."""
    context.sslobject_class = type("RefusalTellingHere", (RefusalTelling,),
                                   {"plain_http": plain_http_answer(made_tls_by)})
