"""The guarded listener's header clock (`guarded_connection.GuardedConnection.data_received`) reads the usual request,
whose headers end exactly at the end of a read, without joining and searching the bytes; on any stream of reads,
cut anywhere, it must judge each read as the general reading does: whether the connection still waits for
headers (its clock running, evictable) or has them all, and what it keeps of the read's end."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.api.connections import ConnectionLimits
from autoscaler.api.guarded_connection import GuardedConnection

HEADER_END = b"\r\n\r\n"


@dataclass
class Guard:
    """What a connection reads of its `ConnectionGuard` when data arrives."""

    limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    waiting: dict[object, None] = field(default_factory=dict)


@dataclass
class General:
    """The general reading, as `data_received` did it for every read: the bytes joined with the previous read's
    last three and searched for the last end of a header block."""

    tail: bytes = b""
    awaiting: bool = True  # a new connection waits for its first request's headers

    def read(self, data: bytes) -> None:
        seen = self.tail + data
        end = seen.rfind(HEADER_END)
        if end >= 0:
            self.awaiting = end + len(HEADER_END) < len(seen)
        elif not self.awaiting:
            self.awaiting = True
        self.tail = seen[-3:]


class Recorder:
    def __init__(self) -> None:
        self.reads: list[bytes] = []

    def data_received(self, data: bytes) -> None:
        self.reads.append(data)


pieces = st.sampled_from([b"GET / HTTP/1.1", b"\r\n", b"\r", b"\n", b"Host: a", HEADER_END, b"x", b"\r\n\r",
                          b"\n\r\n", b"GET /b HTTP/1.1\r\nHost: b\r\n\r\n"])
reads = st.lists(st.lists(pieces, min_size=1, max_size=6).map(b"".join), min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(reads)
def test_every_read_is_judged_as_the_general_reading_judges_it(stream: list[bytes]) -> None:
    async def run() -> None:
        guard = Guard()
        connection = GuardedConnection(guard)  # type: ignore[arg-type]
        handler = Recorder()
        connection._handler = handler  # type: ignore[assignment]
        connection._awaiting(asyncio.get_running_loop().time())  # as `connection_made` starts the clock
        general = General()
        try:
            for data in stream:
                connection.data_received(data)
                general.read(data)
                assert (connection._awaiting_since is not None) == general.awaiting, (stream, data)
                assert (connection in guard.waiting) == general.awaiting, (stream, data)
                assert connection._tail == general.tail, (stream, data)
            assert handler.reads == stream  # every byte handed on, in order
        finally:
            connection._release()

    asyncio.run(run())
