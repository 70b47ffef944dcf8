"""Binding the exporter's port before anything else starts.

aiohttp's `run_app` binds only after the app's background loops have started, so a port in use surfaced as
a traceback after a "serving" line and a first ModelMesh scrape. Binding first, the way asyncio's
`create_server` does (every address the host resolves to, `SO_REUSEADDR`, IPv6 sockets IPv6-only), makes a
busy port one `ListenError` before any other work, and lets the CLI say "serving" only once it is true.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Sequence
from typing import Any

from exporter.accept_limit import ListeningSocket

BACKLOG = 128

KEEPALIVE_TIMEOUT_S = 75.0
"""Seconds the exporter keeps an idle connection open (aiohttp's `run_app` default, said here so the adapter can
rely on it): the adapter's scrape keeps one connection per exporter from one refresh to the next, and drops it
a little before this (`autoscaler.sources.scrape_keepalive`), so that over HTTPS a refresh pays no handshake."""


class ListenError(OSError):
    """The port cannot be bound; the message says which address and why, `fix` what to change."""

    def __init__(self, message: str, cause: OSError) -> None:
        super().__init__(message)
        self.fix = listen_fix(cause)


def listen_fix(cause: OSError) -> str:
    """What to change for this cause of a failed bind (the adapter's too): a busy port wants another port, a
    wrong host another host (no host, not 0.0.0.0, for all: 0.0.0.0 is IPv4 alone, and in an IPv6 cluster the
    probes and the adapter's scrape would find nothing)."""
    if isinstance(cause, socket.gaierror) or cause.errno == errno.EADDRNOTAVAIL:
        return "give an address of this machine, or no host (:PORT) for all of them, IPv4 and IPv6"
    if cause.errno == errno.EACCES:
        return "choose a port above 1023 (lower ones need privileges)"
    return "choose a free port"


PORT_0_ATTEMPTS = 20
"""How many free ports port 0 tries before it gives up: the first family's free port may be taken in the other's."""


def bind_listeners(host: str, port: int, *, family: socket.AddressFamily = socket.AF_UNSPEC,
                   reuse_port: bool = False, backlog: int = BACKLOG) -> list[ListeningSocket]:
    """Listening sockets for `host:port` (every address `host` resolves to, of `family`), ready for
    `web.run_app(sock=...)` or `loop.create_server(sock=...)`; `ListeningSocket`s, which say once, not at every
    attempt, that the open-file limit stops them accepting. `reuse_port`: several processes listen on the port
    (the adapter's serving workers).

    Port 0 ("any free port") is one port for every address: the first address's free port, which the others
    bind too (each binding port 0 got a port of its own, and a client reached a different server over IPv4 than
    over IPv6). Where another process holds that port in the other family, another free port is tried."""
    try:
        infos = socket.getaddrinfo(host or None, port, family, socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise ListenError(f"cannot listen on {show(host, port)}: {error.strerror}", error) from error
    for attempt in range(PORT_0_ATTEMPTS):
        try:
            return _bind_all(host, port, infos, reuse_port=reuse_port, backlog=backlog)
        except _OtherFamilyTaken as taken:
            if attempt == PORT_0_ATTEMPTS - 1:
                raise ListenError(f"cannot listen on {show(host, port)}: no port free in every address family "
                                  f"after {PORT_0_ATTEMPTS} tries", taken.cause) from taken.cause
    raise AssertionError("unreachable")


class _OtherFamilyTaken(Exception):
    """Port 0: the port the first address got is in use at another address (the other family's)."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(str(cause))
        self.cause = cause


AddressInfo = tuple[socket.AddressFamily, socket.SocketKind, int, str, tuple[Any, ...]]


def _bind_all(host: str, port: int, infos: Sequence[AddressInfo], *, reuse_port: bool,
              backlog: int) -> list[ListeningSocket]:
    """One try of `bind_listeners`: every address of `infos` on `port`, or on the port the first one got."""
    sockets: list[ListeningSocket] = []
    seen: set[tuple[int, object]] = set()
    chosen = port  # port 0: the first bound socket's, for the rest
    try:
        for family, kind, proto, _, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            address = (address[0], chosen, *address[2:])
            try:
                sock = ListeningSocket(family, kind, proto)
            except OSError as error:
                if not host and error.errno in NO_SUCH_FAMILY:
                    continue  # every address: a kernel without IPv6 has IPv4's alone
                raise ListenError(f"cannot listen on {show(host, port)}: {error.strerror or error}", error) from error
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if reuse_port:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as error:
                if not host and family == socket.AF_INET6 and error.errno in NO_SUCH_FAMILY:
                    sockets.pop().close()  # IPv6 turned off in this pod (net.ipv6.conf.all.disable_ipv6)
                    continue
                if port == 0 and chosen != 0 and error.errno == errno.EADDRINUSE:
                    raise _OtherFamilyTaken(error) from error
                raise ListenError(f"cannot listen on {show(host, port)}: {error.strerror or error}", error) from error
            sock.listen(backlog)
            sock.setblocking(False)
            sock.where = show(*sock.getsockname()[:2])
            chosen = sock.getsockname()[1]
        if not sockets:
            raise ListenError(f"cannot listen on {show(host, port)}: no address family can be used",
                              OSError(errno.EADDRNOTAVAIL, "no address"))
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


NO_SUCH_FAMILY = (errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL, errno.EPROTONOSUPPORT)
"""What making or binding an IPv6 socket raises where IPv6 is turned off (the exporter's and the adapter's
every-family listen then serve IPv4 alone)."""


def listen_family(host: str) -> socket.AddressFamily:
    """The family to bind for `--listen HOST:PORT`: no host is every address of both families (a socket each,
    as Go's servers answer on both for a wildcard), so the kubelet and the aggregator reach the pod at an IPv6
    address too; an address is its own family's (`0.0.0.0` IPv4's, `[::]` IPv6's alone: IPV6_V6ONLY)."""
    if not host:
        return socket.AF_UNSPEC
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def show(host: str, port: int) -> str:
    """`HOST:PORT` as a URL writes it: an IPv6 address in brackets, no host as every address's `:PORT`."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bound_addresses(sockets: Sequence[socket.socket]) -> str:
    """Where the sockets listen, for the log: `0.0.0.0:9187 and [::]:9187`."""
    return " and ".join(show(*sock.getsockname()[:2]) for sock in sockets)
