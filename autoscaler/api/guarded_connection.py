"""One connection of the guarded listener: its place, its TLS upgrade, its header and stalled-answer clocks,
and what the guard reads of it to choose which connection makes room (`connection_room.py`); aiohttp's handler
(`malformed_requests.StatusRequestHandler`) serves its requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from typing import TYPE_CHECKING

from autoscaler.api.listener_log import log

if TYPE_CHECKING:
    from autoscaler.api.connection_room import ConnectionGuard
    from autoscaler.api.malformed_requests import StatusRequestHandler

_HEADER_END = b"\r\n\r\n"
_HEADER_END_TAIL = _HEADER_END[-3:]
"""The last three bytes seen when a read ends with a header block's end (what `data_received` keeps of it)."""


class GuardedConnection(asyncio.Protocol):
    """The guard's protocol for one accepted socket. Public because the guard (`connection_room.ConnectionGuard`)
    creates it, keeps it in its places and lines, and reads its clocks to choose which connection makes room."""

    def __init__(self, guard: ConnectionGuard) -> None:
        self._guard = guard
        self._loop = asyncio.get_running_loop()
        self._counted = False
        self._handler: StatusRequestHandler | None = None
        self._raw: asyncio.BaseTransport | None = None
        self._transport: asyncio.BaseTransport | None = None
        self._awaiting_since: float | None = None  # start of headers not yet complete
        self._timer: asyncio.TimerHandle | None = None
        self._stalled: asyncio.TimerHandle | None = None  # closes a connection whose answer stays backed up
        self._tail = b""
        self._early: list[bytes] = []  # decrypted before `start_tls` returned (TLS 1.3 clients send at once)
        self.refused = False
        """The last answer was a 4xx: the client was refused (a bad token, a denied user, too many requests)."""
        self.answered_once = False
        self.in_flight = False
        """A request's headers are complete and it is not yet answered (or others are queued behind it)."""
        self.opened = 0.0
        """When it took its place (loop time)."""
        self.closing = False
        """Told to go (at once, or after its current answer) to make room: its place is promised to the line."""
        self.peer = ""
        """The client's address (its share of places: `ConnectionGuard.make_room`)."""
        self._in_line = False

    # The raw TCP connection.
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        guard = self._guard
        self._raw = transport
        peername = transport.get_extra_info("peername")
        self.peer = str(peername[0]) if peername else ""
        if guard.open >= guard.limits.max_connections:
            if not guard.make_room(self.peer):
                guard.refused += 1
                transport.abort()  # type: ignore[attr-defined]
                return
            # In line, before any TLS handshake, for the next place to free (`ConnectionGuard.place_freed`).
            transport.pause_reading()  # type: ignore[attr-defined]
            guard.promised.append(self)
            guard.lined.take(self.peer)
            self._in_line = True
            self._timer = self._loop.call_later(guard.limits.header_read_timeout_s, self._promise_expired)
            return
        self._take_place(transport)

    def leave_line(self) -> None:
        """Out of the line (`ConnectionGuard.promised`): admitted, gone, or closed for another."""
        if self._in_line:
            self._in_line = False
            guard = self._guard
            guard.promised.remove(self)
            guard.lined.give_back(self.peer)

    def _take_place(self, transport: asyncio.BaseTransport) -> None:
        guard = self._guard
        guard.counted[self] = None
        guard.held.take(self.peer)
        self._counted = True
        self.opened = self._loop.time()
        self._transport = transport
        self._awaiting(self._loop.time())
        if guard.tls is None:
            self._start(transport)
        else:
            transport.pause_reading()  # type: ignore[attr-defined]  # the ClientHello is for start_tls
            self._loop.create_task(self._upgrade(transport))

    def admit(self) -> bool:
        """Given a place it was promised (`ConnectionGuard.place_freed`); False when it is gone meanwhile."""
        raw = self._raw
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if raw is None or raw.is_closing():
            return False
        self._take_place(raw)
        if self._guard.tls is None:
            raw.resume_reading()  # type: ignore[attr-defined]
        return True

    def _promise_expired(self) -> None:
        self._timer = None
        log.debug("closing a new connection whose promised place was not given up in time")
        if self._raw is not None:
            self._raw.abort()  # type: ignore[attr-defined]

    async def _upgrade(self, raw: asyncio.BaseTransport) -> None:
        try:
            secured = await self._loop.start_tls(
                raw, self, self._guard.tls, server_side=True,  # type: ignore[arg-type]
                ssl_handshake_timeout=self._guard.limits.header_read_timeout_s,
                ssl_shutdown_timeout=self._guard.limits.tls_shutdown_timeout_s)
        except (OSError, ssl.SSLError, TimeoutError, ConnectionError, RuntimeError) as error:
            self._guard.handshake_refusals.failed(self.peer, error)
            raw.abort()  # type: ignore[attr-defined]
            self._release()
            return
        if secured is None or secured.is_closing():
            self._release()
            return
        self._start(secured)

    def _start(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        self._handler = self._guard.make_handler()
        self._handler.on_answered = self.answered
        self._handler.connection_made(transport)
        early, self._early = self._early, []
        for data in early:
            self._handler.data_received(data)

    # Header timing.
    def _awaiting(self, since: float) -> None:
        self._awaiting_since = since
        self._to_back_of_line()  # idle or not before
        if self._timer is None:
            self._timer = self._loop.call_at(since + self._guard.limits.header_read_timeout_s, self._check)

    def answered(self, status: int, idle: bool) -> None:
        """An answer is handed to the transport. Once no other request is queued (`idle`) the connection waits
        for its next request, first in line to make room for a new connection once it has waited longest;
        before any other if this answer refused the client (a 4xx). Idle time is aiohttp's keep-alive
        timeout's to judge, so the header clock starts only with the next request's first byte.
        (`_to_back_of_line` inline: this runs once a request.)"""
        self.refused = 400 <= status < 500
        self.answered_once = True
        guard = self._guard
        if idle:
            self.in_flight = False
        if (idle and not self.closing and self._awaiting_since is None and self._transport is not None
                and not self._transport.is_closing()):
            waiting = guard.waiting
            waiting.pop(self, None)
            waiting[self] = None
        if guard.promised and len(guard.promised) > guard.closing:
            guard.serve_line()  # may tell this very connection to go
        if self.closing:  # nothing queued behind this answer is read or answered (aiohttp's `close`)
            self.in_flight = False
            self._loop.call_soon(self._drop_once_handed_over)

    def closable(self) -> bool:
        """May be closed at once: no request in flight (it is waiting), and its last answer handed over to the
        kernel, or its client has stopped reading it (stalled: a slow client, closed anyway in time)."""
        if self._stalled is not None:
            return True
        return not self.in_flight and self._unsent() == 0

    def _unsent(self) -> int:
        """Bytes of answers still in the process's buffers (TLS and TCP transports)."""
        unsent = 0
        for transport in (self._transport, self._raw):
            if transport is None:
                continue
            # asyncio's TLS transport, closed twice, has let go of its protocol (AttributeError)
            with contextlib.suppress(AttributeError):
                unsent += transport.get_write_buffer_size()  # type: ignore[attr-defined]
        return unsent

    def close_after_answer(self) -> None:
        """Close as soon as the request in flight is answered (aiohttp's `close`: no request pipelined behind
        it is read or answered) and the answer handed over to the kernel (`_drop_once_handed_over`)."""
        if self._handler is not None:
            self._handler.close()
        self._loop.call_soon(self._drop_once_handed_over)  # aiohttp may be between answers: it closes then

    def _drop_once_handed_over(self) -> None:
        """Close a connection told to go once its answer is out of the process's buffers. Its place does not
        wait for the client's TLS close_notify, which a client may never send (it would hold the place for
        `tls_shutdown_timeout_s`): the answer is complete by its length, and the close is a TCP FIN after it."""
        if not self._counted:
            return
        transport = self._transport
        finished = transport is not None and transport.is_closing()  # aiohttp closed it: it writes no more
        if self._stalled is not None or ((finished or not self.in_flight) and self._unsent() == 0):
            self.abort()
        else:  # an answer under way, or a client slow to take it: again shortly
            self._loop.call_later(0.05, self._drop_once_handed_over)

    def _to_back_of_line(self) -> None:
        """Evictable, after every connection that has waited longer (`ConnectionGuard.waiting` keeps order)."""
        self._guard.waiting.pop(self, None)
        self._guard.waiting[self] = None

    def abort(self) -> None:
        """Close at once (evicted, or its headers too slow); `connection_lost` releases its place."""
        self._guard.waiting.pop(self, None)
        self._awaiting_since = None
        transport = self._transport or self._raw  # the raw one: held for a promised place, before TLS
        if transport is not None:
            transport.abort()  # type: ignore[attr-defined]
        else:
            self._release()

    def _check(self) -> None:
        self._timer = None
        since = self._awaiting_since
        if since is None:
            return
        deadline = since + self._guard.limits.header_read_timeout_s
        if self._loop.time() >= deadline:
            log.debug("closing a connection whose request headers did not arrive in time")
            self.abort()
            return
        self._timer = self._loop.call_at(deadline, self._check)

    def data_received(self, data: bytes) -> None:
        if data[-4:] == _HEADER_END:  # the usual read: one whole request's headers, nothing after them
            self._awaiting_since = None
            self.in_flight = True
            self._guard.waiting.pop(self, None)
            self._tail = _HEADER_END_TAIL
            if self._handler is not None:
                self._handler.data_received(data)
            else:
                self._early.append(data)
            return
        seen = self._tail + data
        end = seen.rfind(_HEADER_END)
        if end >= 0:
            # Headers complete; whatever follows the last header block starts the next request's clock.
            self.in_flight = True
            if end + len(_HEADER_END) < len(seen):
                self._awaiting(self._loop.time())  # a new request starts: to the back of the line
            else:
                self._awaiting_since = None
                self._guard.waiting.pop(self, None)
        elif self._awaiting_since is None:
            self._awaiting(self._loop.time())
        self._tail = seen[-3:]
        if self._handler is not None:
            self._handler.data_received(data)
        else:
            self._early.append(data)

    # Delegation to aiohttp's handler.
    def eof_received(self) -> bool | None:
        if self._handler is not None:
            self._handler.eof_received()
        return None

    def pause_writing(self) -> None:
        # The client is not taking its answer: a slow client, evictable, closed if it stays so.
        if self._stalled is None:
            self._stalled = self._loop.call_later(self._guard.limits.write_stall_timeout_s, self._stall_expired)
        self._to_back_of_line()
        if self._handler is not None:
            self._handler.pause_writing()

    def resume_writing(self) -> None:
        if self._stalled is not None:
            self._stalled.cancel()
            self._stalled = None
        if self._awaiting_since is None and self.in_flight:
            self._guard.waiting.pop(self, None)  # busy writing again (`answered` puts it back when done)
        if self._handler is not None:
            self._handler.resume_writing()

    def _stall_expired(self) -> None:
        self._stalled = None
        log.debug("closing a connection whose client has not read its answer in time")
        self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self._release()
        if self._handler is not None:
            self._handler.connection_lost(exc)

    def _release(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._stalled is not None:
            self._stalled.cancel()
            self._stalled = None
        self._awaiting_since = None
        guard = self._guard
        guard.waiting.pop(self, None)
        self.leave_line()
        if self._counted:
            self._counted = False
            guard.counted.pop(self, None)
            guard.held.give_back(self.peer)
            if self.closing:
                guard.closing -= 1
            if guard.promised:
                guard.place_freed()
