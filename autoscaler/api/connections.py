"""The listening socket, guarded: connections cannot exhaust the adapter's memory.

Each open TLS connection costs a few hundred KB (asyncio's TLS buffers, aiohttp's parser), so an adapter that
keeps every connection open runs out of memory under a few thousand slow or idle ones and is OOM-killed.
Here, as Go's `http.Server` does for kube-apiserver and other extension API servers:

- **A bound on open connections** per serving process (`--max-connections`). At the bound, a new connection
  waits in line, before any TLS handshake (an accepted socket costs next to nothing), for the next place to
  free, first come first served, and a place is freed for it (`connection_room.py`; which connection goes,
  in what order, is `choose_room`'s): a connection whose last answer was a 4xx (a bad token's 401, a
  denied user's 403, a 429) first, so a client refused for who it is or how fast it asks cannot keep the
  places from clients that are served (the security review's case: one looping on instant 401s in every
  place, reconnecting at once, got KEDA's new connection reset); then a slow or idle one (kept alive after its
  last answer; Go's server closes idle connections on its own clock, and HTTP clients reconnect). A connection
  with a request in flight is never closed to make room, nor one whose answer is not yet handed to the kernel
  unless its client has stopped reading its answers. The line is as long as the bound and a connection waits in
  it for the header timeout at most; when it is full, or no place is to come, the new connection is closed as it
  is accepted.
  Each client address has a share of the places (a quarter of the bound, as of the TokenReviews under way:
  `peer_share.py`): a new connection from an address under its share goes first in line, takes the line place of
  an address over its share when the line is full, and an idle place of an address over its share makes room
  first; so one client opening many times the bound cannot keep another address out.
- **A TLS handshake and header read timeout** (`--header-read-timeout`): the handshake, and then the complete
  header block of each request, must arrive within it, counted from the connection's start or from the first
  byte of a request. A slow-header client ("slowloris") is disconnected.
- **An idle keep-alive timeout** (`--keepalive-timeout`): aiohttp closes a connection idle between requests.
- **A stalled-answer timeout**: a client that stops reading (pipelined requests, answers never read) stalls
  its connection in a write that would never end; from the moment the answer backs up it is a slow client,
  first in line to make room, and it is closed when it has taken nothing for `write_stall_timeout_s`.
- **Requests it cannot serve as they came** (`malformed_requests.py`). Oversized request lines or headers (a line or
  field over `max_line_size`, more than `max_header_fields` fields, a header block over `max_header_bytes`:
  `header_budget.py`) are refused with a Kubernetes `Status`, code 431 (as Go answers for headers over its limit)
  with reason `BadRequest` (metav1 has no reason of its own for 431, and a client must not retry it unchanged), its
  message naming the limit that was hit; a method the parser does not know (`curl -X FOO`) with a 405
  `MethodNotAllowed` (`unknown_method.py`); any other unparseable request with a 400 `Status`, logged once per
  interval in one short WARNING line, never with the request or a traceback (`client_errors.py`). Either carries
  kube-apiserver's headers and `Connection: close`, as every answer of the API does.

TLS is negotiated by each connection (`guarded_connection.py`, `loop.start_tls`) rather than by the server socket,
which is what makes refusing before the handshake possible; aiohttp's request handler then runs unchanged on the TLS
transport.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import ssl
from dataclasses import dataclass

from aiohttp import web

from autoscaler.api.connection_room import ConnectionGuard
from autoscaler.api.malformed_requests import before_routing
from exporter.accept_limit import quiet_accept_errors
from exporter.listen import ListenError, bind_listeners, listen_family

TLS_READ_BUFFER = 32 * 1024
"""asyncio allocates a read buffer of `SSLProtocol.max_size` (256 KiB) for every TLS connection, handshaking or
not: most of what an open connection costs, and under connection churn freed memory is not returned to the
system quickly. Requests to this API are a few hundred bytes, so a serving process reads in 32 KiB chunks."""


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_connections: int = 256
    """Per serving process. An idle connection holds about 300 KB at most (asyncio's TLS buffers); one whose
    client is sending its headers up to about 1.2 MB more (`max_header_bytes`). 256 idle ones add about 75 MB,
    256 sending their largest headers at once about 380 MB (256 x 1.5 MB): inside the shipped 1Gi limit beside
    5,000 runtimes' steady use (about 450 MiB) with one serving process, not with two. The aggregator keeps a
    handful of connections open."""
    header_read_timeout_s: float = 10.0
    """For the TLS handshake, and for each request's headers. An HPA's request arrives in milliseconds."""
    keepalive_timeout_s: float = 60.0
    """Idle time before a kept-alive connection is closed; kube-apiserver's aggregator reuses its connections
    well within it."""
    write_stall_timeout_s: float = 10.0
    """How long an answer may stay backed up (the client reads nothing) before the connection is closed.
    Answers are at most a few MB (`/metrics` of a large fleet), which a client that reads at all takes in far
    less."""
    tls_shutdown_timeout_s: float = 5.0
    """How long a closing connection waits for its client's TLS close_notify before it is dropped (asyncio's
    default, 30 s, let a client that never answers hold a place that long after it was told to go)."""
    max_line_size: int = 8190
    """Longest request line (URL) or header line accepted, bytes (aiohttp's and nginx's default)."""
    max_field_size: int = 8190
    max_header_fields: int = 2048
    """Header fields a request may have. The front proxy sends one `X-Remote-Group` per group of the user it
    forwards; aiohttp's default, 128, refused a user in about 115 groups. Go's server counts no fields, only
    bytes (`max_header_bytes`); the count still bounds what the parser keeps per field (about 250 bytes of
    Python objects each, so 2048 tiny fields cost about 500 KB)."""
    max_header_bytes: int = 256 * 1024
    """Bytes of a request's header block (`header_budget.py`): 2048 fields of 128 bytes. Go's server allows
    1 MiB, but aiohttp keeps each field twice (bytes and text) besides its objects: a request's headers held
    while they arrive cost about 1.2 MB at most (tracemalloc, 2048 fields of 120 bytes), where aiohttp's
    default 128 fields of 8 KiB each allowed about 2 MB."""


class GuardedSite(web.BaseSite):
    """A TCP site whose connections go through a `ConnectionGuard`; `reuse_port` lets several serving
    processes listen on one port (the kernel spreads connections across them)."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, *, tls: ssl.SSLContext | None,
                 limits: ConnectionLimits, reuse_port: bool = False, backlog: int = 1024) -> None:
        super().__init__(runner, backlog=backlog)
        self._host, self._port = host, port
        self._tls = tls
        self._limits = limits
        self._reuse_port = reuse_port
        self.guard: ConnectionGuard | None = None
        self._more_servers: list[asyncio.Server] = []

    @property
    def name(self) -> str:
        return f"https://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        asyncio.sslproto.SSLProtocol.max_size = TLS_READ_BUFFER  # this process serves small requests only
        server = self._runner.server
        assert server is not None
        server.request_handler = before_routing(server.request_handler)  # each connection's handler reads it
        self.guard = ConnectionGuard(server, self._tls, self._limits)
        loop = asyncio.get_running_loop()
        # Bound as the exporter binds (IPv4's addresses alone where IPv6 is turned off), so that at the open-file
        # limit the sockets say so once (`exporter.accept_limit`), where asyncio logged a traceback per attempt.
        try:
            sockets = bind_listeners(self._host, self._port, family=listen_family(self._host),
                                     reuse_port=self._reuse_port, backlog=self._backlog)
        except ListenError as error:
            raise (error.__cause__ or error) from None  # the caller says "cannot listen on ..." itself
        quiet_accept_errors(loop)
        servers = [await loop.create_server(self.guard, sock=sock, backlog=self._backlog) for sock in sockets]
        self._server, self._more_servers = servers[0], servers[1:]

    async def stop(self) -> None:
        if self.guard is not None:  # connections held for a promised place have no handler to close them
            for newcomer in list(self.guard.promised):
                newcomer.leave_line()
                newcomer.abort()
        for server in self._more_servers:  # the other family's; `super().stop` closes the first
            server.close()
        await super().stop()

    @property
    def port(self) -> int:
        server = self._server
        assert isinstance(server, asyncio.Server)
        return int(server.sockets[0].getsockname()[1])
