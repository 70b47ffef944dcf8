"""Which connection makes room at `--max-connections`, and who in line gets the place: the guard's policy.

`ConnectionGuard` is the protocol factory of the guarded listener (`connections.GuardedSite`): it counts the
places held, keeps the line of new connections accepted at the bound (before their TLS handshake), and decides
which connection goes to free a place (`choose_room`, where the order is said) and who in line takes it
(`ConnectionGuard.place_freed`), each client address within its share (`peer_share.py`). The connections
themselves are `guarded_connection.py`'s.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from aiohttp import web

from autoscaler.api.guarded_connection import GuardedConnection
from autoscaler.api.handshake_refusals import PLAIN_HTTP_ADVICE, HandshakeRefusals
from autoscaler.api.listener_log import log
from autoscaler.api.malformed_requests import StatusRequestHandler
from autoscaler.api.peer_share import PeerCounts
from exporter.refused_handshakes import tell_refused_clients

if TYPE_CHECKING:
    from autoscaler.api.connections import ConnectionLimits


class ConnectionGuard:
    """A protocol factory for `loop.create_server`: counts, upgrades to TLS, times headers, hands over, and at
    the bound decides which connection makes room for a new one (`make_room`)."""

    def __init__(self, server: web.Server, tls: ssl.SSLContext | None, limits: ConnectionLimits) -> None:
        self.server = server
        self.tls = tls
        if tls is not None:
            # A client refused in the handshake is told why, then closed, as kube-apiserver tells it (Go's `400`
            # to plain HTTP, the alert to a certificate of another CA), where it read an empty reply.
            tell_refused_clients(tls, PLAIN_HTTP_ADVICE)
        self.limits = limits
        self.refused = 0
        self.evicted = 0
        self.closed_after_answer = 0
        self.closing = 0
        """Connections told to go (at once, or after their current answer) that have not yet gone: places coming."""
        self.waiting: dict[GuardedConnection, None] = {}
        """Open connections waiting for request headers (a handshake, a slow client, one idle after its last
        answer) or stalled in a write, longest-waiting first (dicts keep insertion order)."""
        self.counted: dict[GuardedConnection, None] = {}
        """Every connection holding a place, oldest first."""
        self.promised: deque[GuardedConnection] = deque()
        """New connections accepted at the bound, held before their TLS handshake in line for the next place to
        free; first come, first admitted, those of an address under its share first (`make_room`,
        `place_freed`)."""
        self.held = PeerCounts(limits.max_connections)
        """Places held, by the client's address, and each address's share of them (`make_room`)."""
        self.lined = PeerCounts(limits.max_connections)
        """New connections in line (`promised`), by the client's address."""
        self.handshake_refusals = HandshakeRefusals(log)
        """The handshakes refused, in the log: one line per cause a minute (`handshake_refusals`)."""
        self._handler_kwargs: dict[str, Any] = {
            "keepalive_timeout": limits.keepalive_timeout_s,
            "max_line_size": limits.max_line_size,
            "max_field_size": limits.max_field_size,
            "max_headers": limits.max_header_fields,
            "access_log": None,
        }

    def __call__(self) -> asyncio.Protocol:
        return GuardedConnection(self)

    def make_handler(self) -> StatusRequestHandler:
        handler = StatusRequestHandler(self.server, loop=asyncio.get_running_loop(), **self._handler_kwargs)
        handler.line_limit = min(self.limits.max_line_size, self.limits.max_field_size)
        handler.fields_limit = self.limits.max_header_fields
        handler.bound_header_bytes(self.limits.max_header_bytes)
        return handler

    @property
    def open(self) -> int:
        """Connections holding a place."""
        return len(self.counted)

    def make_room(self, peer: str) -> bool:
        """At the bound, for a new connection from `peer`: whether it may wait in line (`promised`), before its
        TLS handshake, for the next place to free (False: refused, closed at once). Places go to the line first
        come, first served, so that a client that reconnects at once cannot take the place freed for a client
        that came before it. The line is as long as the bound at most, and a connection waits in it for
        `header_read_timeout_s` at most; an accepted socket not yet in TLS costs next to nothing.

        Each client address has a share of the places, a quarter of the bound (`peer_share.peer_share`, as the
        TokenReviews under way: several clients may share an address, and one address holding its share leaves
        three quarters to the others). A new connection from an address that holds, with its connections in
        line, less than its share is ahead of the others: it goes before them in line (`place_freed`), and when
        the line is full it takes the place in line of the newest connection of an address over its share,
        closed instead. Without it, one client opening many times the bound (reconnecting at once) kept the line
        full and every other address's new connection was refused as it was accepted. A place freed for the
        line is one of an address over its share where one is idle (`choose_room`), so its other clients keep
        theirs. The share is a fixed quarter, not the bound divided among the addresses present: behind the
        aggregation layer nearly every connection is kube-apiserver's, from one address per replica, and an
        address is never held to less than its share, so kube-apiserver keeps at least a quarter of the places
        however many other addresses connect (each replica its own quarter); with no other address at the
        bound the share changes nothing, since an address over its share is put after, never refused for it,
        and the order of places and victims among its own connections is as before.

        A place is freed for the line by `choose_room` (which connection, in what order: said there alone) and
        `tell_to_go`."""
        if len(self.promised) >= self.limits.max_connections:
            # A place is already coming for each connection in line: an address under its share can only take
            # one of theirs, that of an address over its share.
            if not self.claims_under_share(peer) or (displaced := self._displaceable()) is None:
                return False
            self.refused += 1
            displaced.leave_line()
            displaced.abort()
            return True
        decision, victim = choose_room(self.waiting, self.counted, asyncio.get_running_loop().time(),
                                       self.holds_over_share)
        if decision == "refuse":
            return False
        if victim is not None:
            self.tell_to_go(victim, decision)
        return True

    # Two measures of an address against its share, on purpose. Who may join or keep a place in the line counts
    # its claims (places held and connections in line: each in line is a place to come), or an address filling
    # the line while it holds little would count as under its share. Which place goes, and who in line is
    # admitted first, counts the places held alone (`holds_over_share`, `place_freed`): a place is what is
    # taken away or given, and an address holding nothing is never put after for the line it fills.
    def claims(self, peer: str) -> int:
        """The places `peer` holds and the connections it has in line for one."""
        return self.held.held(peer) + self.lined.held(peer)

    def claims_under_share(self, peer: str) -> bool:
        """`peer` holds, with its connections in line, fewer places than its share: a new one goes first."""
        return self.claims(peer) < self.held.share

    def holds_over_share(self, connection: GuardedConnection) -> bool:
        """`connection`'s address holds more places than its share (its line not counted): its idle ones make
        room first."""
        return self.held.held(connection.peer) > self.held.share

    def _displaceable(self) -> GuardedConnection | None:
        """The newest connection in line of an address that claims (holds, with its connections in line) more
        places than its share."""
        share = self.held.share
        return next((newcomer for newcomer in reversed(self.promised) if self.claims(newcomer.peer) > share), None)

    def tell_to_go(self, victim: GuardedConnection, decision: Room) -> None:
        self.closing += 1
        victim.closing = True
        if decision == "close":
            self.evicted += 1
            victim.abort()
        else:
            self.closed_after_answer += 1
            victim.close_after_answer()

    def serve_line(self) -> None:
        """An answer was handed over while connections wait in line for more places than are coming: free
        one now if `choose_room` finds one to close (a 4xx answered, an idle connection)."""
        while len(self.promised) > self.closing:
            decision, victim = choose_room(self.waiting, self.counted, asyncio.get_running_loop().time(),
                                           self.holds_over_share)
            if victim is None:
                return
            self.tell_to_go(victim, decision)

    def place_freed(self) -> None:
        """A counted connection has gone: its place to the first connection in line of an address holding fewer
        places than its share (its line not counted: an address holding nothing is first however many it has in
        line), else to the first in line."""
        promised, held, share = self.promised, self.held, self.held.share
        while promised:
            newcomer = next((one for one in promised if held.held(one.peer) < share), promised[0])
            newcomer.leave_line()
            if newcomer.admit():
                return


Room = Literal["close", "after-answer", "wait", "refuse"]
NEW_CONNECTION_S = 1.0
"""A client's TLS handshake and first request take milliseconds on a cluster network; until then, and for at
most this long, a new connection is not closed to make room while a place is coming anyway."""


def choose_room(waiting: dict[GuardedConnection, None], counted: dict[GuardedConnection, None],
                now: float, over_share: Callable[[GuardedConnection], bool] = lambda _: False,
                ) -> tuple[Room, GuardedConnection | None]:
    """What frees a place at the bound for a connection in line (`ConnectionGuard.make_room`, `serve_line`), so
    that a client refused for who it is or how fast it asks cannot keep the places from clients that are served.
    The first that applies, in this order:

    1. close at once a waiting connection whose last answer was a 4xx (401, 403, 429: a bad token, a denied
       user, a client over its share), longest-waiting first;
    2. close after its answer a connection whose last answer was a 4xx and that has another request in flight,
       oldest first: as soon as that request is answered and the answer handed over in full (HTTP/1.1 lets a
       server close a connection between answers; a client resends what it had pipelined behind). It goes even
       if that answer serves its client: the choice is made when it is told (aiohttp's `close` is not taken
       back), so another connection refused meanwhile keeps its place until the next choice;
    3. close at once a waiting connection that is not new (answered once, or open `NEW_CONNECTION_S` or more),
       even while a place is coming: a slow client (TLS handshake or request headers not complete), one idle
       since its last answer (Go's server closes idle connections on its own clock too; an HTTP client
       reconnects for its next request), or one whose client stopped reading its answer; one whose address is
       `over_share` first, else the longest-waiting;
    4. nothing, and wait, while a place is coming: a connection told to go has not yet gone, an answer is still
       being handed over, or a request is in flight (if its answer is a 4xx, that connection goes then:
       `GuardedConnection.answered`). A client refused at once reconnects at once: it must not take the place
       of a new client still in its TLS handshake;
    5. close at once a new waiting connection (not yet answered, open less than `NEW_CONNECTION_S`), chosen as
       in 3;
    6. refuse: no place is coming and none may go.

    A connection with a request in flight, or whose answer is still being handed over, is never closed before
    its answer is, unless its client has stopped reading its answers (`GuardedConnection.closable`)."""
    first: GuardedConnection | None = None
    first_new: GuardedConnection | None = None
    first_over = first_new_over = False
    coming = False
    for connection in waiting:
        if connection.closing:
            coming = True
        elif connection.closable():
            if connection.refused:
                return "close", connection
            if connection.answered_once or now - connection.opened >= NEW_CONNECTION_S:
                if not first_over and (first is None or over_share(connection)):
                    first, first_over = connection, over_share(connection)
            elif not first_new_over and (first_new is None or over_share(connection)):
                first_new, first_new_over = connection, over_share(connection)
        else:
            coming = True  # an answer still being handed over
    for connection in counted:
        if connection.closing:
            coming = True
        elif connection.in_flight:
            if connection.refused:
                return "after-answer", connection
            coming = True
    if first is not None:
        return "close", first
    if coming:
        return "wait", None
    if first_new is not None:
        return "close", first_new
    return "refuse", None
