"""The guard's promises when it makes room at `--max-connections`, on any sequence of arrivals, requests, answers
(any status, handed over at once or not), stalled readers and clients hanging up:

- a connection with a request in flight is never closed, nor one whose answer is still in the process's
  buffers, unless its client has stopped reading its answers (a stalled write: the slow client the guard
  evicts anyway);
- a connection whose last answer refused its client (a 4xx) makes room before any served client's connection;
- no more connections hold a place than the bound, and no more wait in line for one.

The guard's own connections (`GuardedConnection`) run on a real event loop; only the transport and aiohttp's
handler are stand-ins, which record what the guard did to them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from hypothesis import example, given, settings
from hypothesis import strategies as st

from autoscaler.api import connection_room
from autoscaler.api.connection_room import ConnectionGuard
from autoscaler.api.connections import ConnectionLimits
from autoscaler.api.guarded_connection import GuardedConnection

PLACES = 3
REQUEST = b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n"


@dataclass
class Transport:
    """A socket's transport as the guard sees it, with what the client side has done."""

    loop: asyncio.AbstractEventLoop
    protocol: GuardedConnection
    violations: list[str]
    in_flight: bool = False  # a request whose headers are complete, not yet answered
    unsent: int = 0  # answer bytes not yet handed to the kernel
    stalled: bool = False
    refused: bool = False  # the last answer was a 4xx
    answered: bool = False
    closing: bool = False
    by_server: bool = False
    peers: list[Transport] = field(default_factory=list)
    told_served_over_refused: bool | None = None
    """Told to go after its answer (`close_after_answer`): whether it was then a served client's connection with
    a refused one idle; the guard chooses when it tells, and aiohttp's close cannot be taken back after."""

    def get_write_buffer_size(self) -> int:
        return self.unsent

    def is_closing(self) -> bool:
        return self.closing

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def abort(self) -> None:
        if self.closing:
            return
        if self.in_flight and not self.stalled:
            self.violations.append("closed with a request in flight")
        if self.unsent and not self.stalled:
            self.violations.append("closed with its answer still being handed over")
        if self.told_served_over_refused if self.told_served_over_refused is not None else self.served_over_refused():
            self.violations.append("a served client's connection closed while a refused one was idle")
        self.by_server = True
        self.hang_up()

    def served_over_refused(self) -> bool:
        """A served client's connection (its last answer not a 4xx) while a refused one is idle in line."""
        return self.answered and not self.refused and any(
            p.refused and not p.in_flight and not p.closing and (not p.unsent or p.stalled)
            and p.protocol in p.protocol._guard.waiting for p in self.peers)

    def close(self) -> None:
        self.hang_up()

    def hang_up(self) -> None:
        if not self.closing:
            self.closing = True
            self.loop.call_soon(self.protocol.connection_lost, None)


class Handler:
    """aiohttp's handler as the guard drives it."""

    on_answered: Any = None

    def __init__(self) -> None:
        self.closed_after_answer = False

    def connection_made(self, transport: object) -> None:
        pass

    def data_received(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        self.closed_after_answer = True

    def pause_writing(self) -> None:
        pass

    def resume_writing(self) -> None:
        pass

    def connection_lost(self, exc: object) -> None:
        pass


class Guard(ConnectionGuard):
    def make_handler(self) -> Handler:  # type: ignore[override]
        return Handler()


def guard_of(places: int) -> Guard:
    """A guard whose timeouts never fire: only arrivals, answers and hang-ups make room."""
    return Guard(None, None, ConnectionLimits(max_connections=places, header_read_timeout_s=1e6,  # type: ignore[arg-type]
                                              keepalive_timeout_s=1e6, write_stall_timeout_s=1e6))


def act(chosen: Transport, kind: str, status: int, unsent: int) -> None:
    """What a client (or the answer to it) does on a connection that holds a place."""
    if kind in ("request", "serve", "pipeline") and not chosen.in_flight and not chosen.protocol.closing:
        chosen.in_flight = True  # aiohttp reads nothing more once told to close
        chosen.protocol.data_received(REQUEST + (b"GET /next HTTP/1.1\r\n" if kind == "pipeline" else b""))
    if kind in ("answer", "serve") and chosen.in_flight:
        chosen.in_flight, chosen.answered, chosen.refused = False, True, 400 <= status < 500
        chosen.unsent = unsent
        handler = chosen.protocol._handler
        assert handler is not None and handler.on_answered is not None
        handler.on_answered(status, True)
    elif kind == "flush" and chosen.unsent:
        chosen.unsent, chosen.stalled = 0, False
        chosen.protocol.resume_writing()
    elif kind == "stall" and chosen.unsent and not chosen.stalled:
        chosen.stalled = True
        chosen.protocol.pause_writing()
    elif kind == "hang-up":
        chosen.hang_up()


KINDS = ["arrive", "arrive", "serve", "serve", "request", "pipeline", "answer", "flush", "stall", "hang-up"]
"""`serve`: a request and its answer; `request`, `answer`: one kept in flight, answered later; `pipeline`: a
request with the start of the next one behind it."""
events = st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 7), st.sampled_from([200, 401, 403, 429]),
                            st.sampled_from([0, 0, 5])), max_size=60)


@settings(max_examples=500, deadline=None)
@given(events, st.sampled_from([0.0, 1e9]))
@example([("arrive", 0, 200, 0)] * 3 + [("serve", 0, 200, 0), ("serve", 1, 401, 0), ("serve", 2, 200, 0),
          ("arrive", 0, 200, 0)], 0.0)  # the refused one goes, though a served one has been idle longer
@example([("arrive", 0, 200, 0)] * 3 + [("serve", 0, 401, 0), ("request", 0, 200, 0), ("request", 1, 200, 0),
          ("pipeline", 2, 200, 0), ("arrive", 0, 200, 0), ("arrive", 0, 200, 0), ("answer", 0, 200, 0),
          ("answer", 1, 200, 5), ("arrive", 0, 200, 0)], 1e9)  # busy, refused: after its answer; then busy ones wait
@example([("arrive", 0, 200, 0)] * 3 + [("serve", 0, 200, 0), ("serve", 1, 401, 5), ("serve", 2, 200, 0),
          ("arrive", 0, 200, 0), ("stall", 1, 200, 0), ("arrive", 0, 200, 0)], 0.0)  # refused, answer unsent
@example([("arrive", 0, 200, 0)] * 3 + [("serve", 1, 401, 0), ("request", 1, 200, 0), ("arrive", 0, 200, 0),
          ("serve", 0, 401, 0), ("serve", 1, 200, 0)], 0.0)  # told to go while refused; served, then another refused
def test_room_is_made_only_by_connections_that_may_go(steps: list[tuple[str, int, int, int]], new_s: float) -> None:
    """`new_s`: `NEW_CONNECTION_S`: every unanswered connection is new (protected while a place is coming), or
    none is."""
    async def run() -> None:
        loop = asyncio.get_running_loop()
        guard = guard_of(PLACES)
        violations: list[str] = []
        transports: list[Transport] = []
        try:
            for kind, index, status, unsent in steps:
                live = [t for t in transports if not t.closing and t.protocol._counted]
                chosen = live[index % len(live)] if live else None
                if kind == "arrive":
                    protocol = guard()
                    assert isinstance(protocol, GuardedConnection)
                    transport = Transport(loop, protocol, violations, peers=transports)
                    transports.append(transport)
                    protocol.connection_made(transport)  # type: ignore[arg-type]
                elif chosen is not None:
                    act(chosen, kind, status, unsent)
                for told in transports:  # told to go after its answer in this step: judged as it was told
                    if told.protocol.closing and not told.closing and told.told_served_over_refused is None:
                        told.told_served_over_refused = told.served_over_refused()
                for _ in range(3):
                    await asyncio.sleep(0)
                assert not violations, (violations, steps)
                assert guard.open == len([t for t in transports if t.protocol._counted]) <= PLACES
                assert len(guard.promised) <= PLACES
        finally:
            for transport in transports:
                transport.protocol._release()

    with mock.patch.object(connection_room, "NEW_CONNECTION_S", new_s):
        asyncio.run(run())
