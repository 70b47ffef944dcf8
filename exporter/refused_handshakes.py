"""A client refused in the TLS handshake is told why, then closed, where asyncio told it nothing but a close.

Why: asyncio's TLS layer closes the connection at once when the handshake fails, without writing what OpenSSL
had prepared for the client (the alert naming the cause: `unknown ca` for a client certificate of a CA the port
does not trust). Plain HTTP sent to the HTTPS port is refused by OpenSSL with nothing to write at all. Either
way the client saw a bare EOF: curl "Empty reply from server", Prometheus's target page "EOF", with nothing on
either side that says which setting is wrong. Go's servers (kube-apiserver, node-exporter) send the alert, and
answer plain HTTP `400 Bad Request` "Client sent an HTTP request to an HTTPS server." and close; so do both of
ours, the exporter's port (`exporter.metrics_tls`) and the adapter's (`autoscaler.api.connection_room`).

How: through `SSLContext.sslobject_class`, the documented hook for the object asyncio drives the handshake with.
When OpenSSL refuses, `RefusalTelling.do_handshake` tells the port's refusal log (`on_refused`, with the peer),
puts the answer in the outgoing buffer (the plain-HTTP answer in place of anything else; OpenSSL's alert as it
is) and says "want read" once, which makes asyncio send that buffer; the refusal itself is raised at the next
step of the handshake, which this module takes on the next turn of the loop, once the answer is in the socket
(`_step_on`): the handshake fails with OpenSSL's own error, and asyncio closes the connection, as Go does after
its answer. Without that step a client that keeps the connection open (a raw socket, a client that waits for the
server's close) held it until the handshake timeout, a minute. The step and the peer need the asyncio protocol
driving the handshake, which calls `do_handshake` (`_driving_protocol`); where it cannot be found (an event
loop of another kind) the answer is still sent, and the refusal raised when the client closes or sends more, or
at the handshake timeout, as before. A handshake that succeeds runs exactly as before: nothing is read ahead,
nothing is added to it. The context's certificate reload (`load_cert_chain` in place, or `sni_callback` handing
a handshake to a newer context) is untouched: the class is chosen as the connection is made, whichever context
it ends on.
"""

from __future__ import annotations

import asyncio
import ssl
import sys
from asyncio import sslproto
from collections.abc import Callable
from types import FrameType
from typing import Any, ClassVar, Final

PLAIN_HTTP_REASONS: Final = frozenset({"HTTP_REQUEST", "HTTPS_PROXY_REQUEST", "WRONG_VERSION_NUMBER",
                                       "UNKNOWN_PROTOCOL"})
"""OpenSSL's reasons when a client sent something other than a TLS ClientHello (`HTTP_REQUEST`: an HTTP request
line, which OpenSSL recognises server-side; `HTTPS_PROXY_REQUEST`: a CONNECT). The refusal logs read them too
(`exporter.refusal_log`)."""

GO_SAYS: Final = "Client sent an HTTP request to an HTTPS server."
"""The first line of the plain-HTTP answer, word for word Go's, which operators search for."""

OnRefused = Callable[[str, ssl.SSLError], None]
"""Told of each refused handshake: the peer's address ("" where unknown) and OpenSSL's error."""


def plain_http_answer(advice: str) -> bytes:
    """The `400 Bad Request` a plain HTTP client gets: Go's line, then `advice` (what this port is, what to
    use instead)."""
    body = f"{GO_SAYS}\n{advice}\n".encode()
    head = ("HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    return head + body


def _driving_protocol() -> sslproto.SSLProtocol | None:
    """The asyncio protocol whose handshake step called `RefusalTelling.do_handshake` (the `self` of a caller a
    few frames up), or None where another caller drives it. CPython's frames are the one way from the SSL
    object to it: asyncio hands the object no reference back."""
    frame: FrameType | None = sys._getframe(1)
    for _ in range(4):  # `_refused`, `do_handshake`, then asyncio's step: a few frames up at most
        if frame is None:
            return None
        if isinstance(caller := frame.f_locals.get("self"), sslproto.SSLProtocol):
            return caller
        frame = frame.f_back
    return None


def _raw_transport(protocol: sslproto.SSLProtocol | None) -> asyncio.Transport | None:
    """The TCP transport under `protocol`, while it has one."""
    transport = getattr(protocol, "_transport", None)
    return transport if isinstance(transport, asyncio.Transport) else None


def _peer(transport: asyncio.Transport | None) -> str:
    peername = transport.get_extra_info("peername") if transport is not None else None
    return str(peername[0]) if peername else ""


def _step_on(protocol: sslproto.SSLProtocol) -> None:
    """The refused handshake's next step, as though the client had sent more (zero bytes): it raises the
    refusal, and asyncio closes the connection. Not while the answer is still in the transport's buffer, which
    closing would drop: then the client's close or the handshake timeout ends it, as before."""
    transport = _raw_transport(protocol)
    if transport is None or transport.is_closing() or transport.get_write_buffer_size():
        return
    protocol.buffer_updated(0)


class RefusalTelling(ssl.SSLObject):
    """An `ssl.SSLObject` whose refused handshake sends the client its answer, then fails (see the module)."""

    plain_http: ClassVar[bytes] = b""
    """What a plain HTTP client is answered (`tell_refused_clients` sets it per context)."""
    on_refused: ClassVar[OnRefused | None] = None
    """Told of each refusal (`tell_refused_clients` sets it per context)."""

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
            self._refused(error)
            raise ssl.SSLWantReadError("the refusal is sent to the client first") from error

    def _refused(self, error: ssl.SSLError) -> None:
        """Tell the port's log and the client of `error`; return to send the answer (then fail), or raise it
        where there is nothing to send."""
        protocol = _driving_protocol()
        if (on_refused := type(self).on_refused) is not None:
            on_refused(_peer(_raw_transport(protocol)), error)
        outgoing = self._outgoing
        if outgoing is None:
            raise error
        if getattr(error, "reason", None) in PLAIN_HTTP_REASONS and self.plain_http:
            outgoing.read()  # an alert, if any, would garble the answer a plain HTTP client reads
            outgoing.write(self.plain_http)
        elif not outgoing.pending:
            raise error  # nothing to tell the client: refused at once, as before
        self._refusal = error
        if protocol is not None:
            asyncio.get_running_loop().call_soon(_step_on, protocol)


def tell_refused_clients(context: ssl.SSLContext, advice: str, on_refused: OnRefused | None = None) -> None:
    """Handshakes on `context` from now on tell a refused client why, then close (see the module); `advice`
    follows Go's line in the plain-HTTP answer; `on_refused` is told of each refusal, with the peer."""
    context.sslobject_class = type("RefusalTellingHere", (RefusalTelling,),
                                   {"plain_http": plain_http_answer(advice), "on_refused": on_refused})
