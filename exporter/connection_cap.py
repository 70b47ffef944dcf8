"""What a client that never reads its answer can cost the exporter: a bounded number of connections, each for
seconds.

aiohttp hands a whole `/metrics` answer to the transport at once, and a client that stops reading (or never
reads: a raw socket that sends `GET /metrics` and waits) pins that answer, rendered for it alone, in the
process's buffers for as long as it keeps the connection open: no write timeout ends it, and nothing bounds
how many there are. With 3,000 models (a 346 KB plain answer) 800 such clients held 327 MiB, above the
sidecar's 256Mi memory limit: the kubelet OOM-kills the exporter, and every runtime pod's autoscaling signals go
with it. So, as the adapter's API does (`autoscaler/api/connections.py`, whose stalled-answer timeout and "who
makes room" rules this follows, in the small: the exporter's clients are one Prometheus, the adapter and the
kubelet's probes):

- **A write deadline**: an answer that stays backed up (the client takes nothing) for `WRITE_DEADLINE_S` is
  dropped with its connection. A scraper that reads at all takes a few hundred KB in milliseconds.
- **A cap on open connections** (`--max-connections`): at the cap, a new connection takes the place of one whose
  client stopped reading, else of one with no whole request to answer: first one that never completed a request
  (a client sending nothing, or its headers a byte at a time), open longest (but not one made in the last
  `FRESH_S`: its request may be on its way), then a keep-alive connection between scrapes, idle longest (its
  client reopens it); while every place is busy answering, or new, the new one waits, its request unread (a
  socket and no more), in a line of `LINE_PER_PLACE` times the cap, for the next place to free, `LINE_WAIT_S`
  at most; it is closed only when the line is full or its wait is over. So a probe's /healthz and a scraper's
  /metrics keep being answered whatever the stuck clients hold, and a burst of scrapers is answered in turn.
  The first time the cap is reached the log says so, once.

Each drop is counted in `modelmesh_exporter_connections_dropped_total{reason}` (`ConnectionCounts`), the open
connections in `modelmesh_exporter_connections_open`. Over TLS a connection comes here once its handshake is over;
the handshakes are bounded before that, in time and in number (`exporter.tls_handshakes`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from exporter import names
from exporter.settings import MAX_CONNECTIONS

if TYPE_CHECKING:  # aiohttp's client and server: a third of a second, which `--help` and a refused flag need not wait
    from aiohttp.web_protocol import RequestHandler

log = logging.getLogger(__name__)

WRITE_DEADLINE_S: Final = 10.0
"""How long an answer may stay backed up before its connection is dropped (the adapter's `write_stall_timeout_s`)."""

QUIET_S: Final = 1.0
"""At a stop, how long a connection just made is waited for to send its request (`CappedConnection.answering`)."""

FRESH_S: Final = 0.25
"""A connection made this recently with no request yet is not closed for another: a scraper sends its request as
it connects, but a burst of them is accepted in one wake-up, before any request is read. A flood of connections
sending nothing, up to `--max-connections` / `FRESH_S` a second (128 at 32), always leaves an older one to close;
beyond that the new ones wait in the line."""

LINE_PER_PLACE: Final = 4
"""New connections that may wait for a place, per place: a waiting one holds a socket, its request left unread."""

LINE_WAIT_S: Final = 10.0
"""How long a new connection waits for a place before it is closed (a probe's timeout is 1 s by default, but a
place frees as soon as an answer is handed over: milliseconds)."""

LINE_TICK_S: Final = 0.1
"""While connections wait, how often places held by idle or stuck connections are looked for."""

REASON_WRITE_DEADLINE: Final = "write_deadline"
REASON_MADE_ROOM: Final = "made_room"
REASON_REFUSED: Final = "refused"
REASON_HANDSHAKE_TIMEOUT: Final = "handshake_timeout"
"""Over TLS, a handshake not over within its bound (`exporter.tls_handshakes`)."""
REASON_HANDSHAKE_DISPLACED: Final = "handshake_displaced"
"""Over TLS, a handshake under way a second or more, dropped for a new connection at the most under way."""
REASONS: Final = (REASON_WRITE_DEADLINE, REASON_MADE_ROOM, REASON_REFUSED, REASON_HANDSHAKE_TIMEOUT,
                  REASON_HANDSHAKE_DISPLACED)


class ConnectionCounts(Collector):
    """The exporter's own connection figures, as /metrics publishes them: open now, and dropped by reason."""

    def __init__(self) -> None:
        self.open = 0
        self.dropped: Counter[str] = Counter()

    def describe(self) -> Iterable[Metric]:
        yield GaugeMetricFamily(names.CONNECTIONS_OPEN, "")
        yield CounterMetricFamily(names.CONNECTIONS_DROPPED_TOTAL, "")

    def collect(self) -> Iterable[Metric]:
        yield GaugeMetricFamily(
            names.CONNECTIONS_OPEN,
            "Connections holding a place at the exporter's port, at most --max-connections: not those waiting in its "
            "line for one (up to four times the bound), nor, over TLS, those whose handshake is not over.",
            value=self.open)
        dropped = CounterMetricFamily(
            names.CONNECTIONS_DROPPED_TOTAL,
            "Connections the exporter closed: write_deadline (the client did not read its answer), made_room "
            "(idle or stuck, at --max-connections, for a new one), refused (new, at --max-connections: the line "
            "of those waiting for a place was full, or its wait was over; over TLS also a new connection while the "
            "most handshakes are under way, none for a second), handshake_timeout (over TLS, its handshake was not "
            "over in time), handshake_displaced (over TLS, a handshake under way a second or more, dropped for a new "
            "connection while the most are under way: four times --max-connections, at least 64).",
            labels=["reason"])
        for reason in REASONS:
            dropped.add_metric([reason], self.dropped[reason])
        yield dropped


class ConnectionCap:
    """A protocol factory for `loop.create_server` around aiohttp's `web.Server` (or what makes its request
    handlers, `server_name.nameless_handlers`): the cap and the write deadline (see the module)."""

    def __init__(self, server: Callable[[], RequestHandler], counts: ConnectionCounts,
                 max_connections: int = MAX_CONNECTIONS, write_deadline_s: float = WRITE_DEADLINE_S) -> None:
        self.server = server
        self.counts = counts
        self.max_connections = max_connections
        self.write_deadline_s = write_deadline_s
        self.connections: dict[CappedConnection, None] = {}
        """Every connection holding a place, oldest first."""
        self.line: dict[CappedConnection, None] = {}
        """New connections waiting for a place, first come first."""
        self._tick: asyncio.TimerHandle | None = None
        self._cap_said = False
        self._deadline_said = False

    def __call__(self) -> asyncio.Protocol:
        return CappedConnection(self)

    def admit(self, connection: CappedConnection) -> str:
        """"placed", "waiting" (in line for a place) or "refused" (to be closed) for a new connection; at the cap a
        place is made by closing a stuck or idle one."""
        if len(self.connections) >= self.max_connections:
            if not self._cap_said:
                self._cap_said = True
                log.warning("%d connections open, the most --max-connections (EXPORTER_MAX_CONNECTIONS) allows: a "
                            "new one takes the place of one whose client stopped reading or that has no request to "
                            "answer (idle, or its request unfinished), or waits up to %g s for one (said once; "
                            "counted in %s)", self.max_connections, LINE_WAIT_S,
                            names.CONNECTIONS_DROPPED_TOTAL)
            if self.line or not self._make_room():
                if len(self.line) >= LINE_PER_PLACE * self.max_connections:
                    self.counts.dropped[REASON_REFUSED] += 1
                    return "refused"
                self.line[connection] = None
                self._tick_while_waiting()
                return "waiting"
        self.connections[connection] = None
        self.counts.open = len(self.connections)
        return "placed"

    def _make_room(self) -> bool:
        """Close the stuck or idle connection `_room` chooses, if any: its place is free at once."""
        victim = self._room()
        if victim is None:
            return False
        self.counts.dropped[REASON_MADE_ROOM] += 1
        victim.abort()
        return True

    def serve_line(self) -> None:
        """Give the free places, and those of stuck or idle connections, to the line, first come first."""
        while self.line and (len(self.connections) < self.max_connections or self._make_room()):
            first = next(iter(self.line))
            del self.line[first]
            if first.take_place():
                self.connections[first] = None
                self.counts.open = len(self.connections)

    def _tick_while_waiting(self) -> None:
        if self._tick is None and self.line:
            self._tick = asyncio.get_running_loop().call_later(LINE_TICK_S, self._ticked)

    def _ticked(self) -> None:
        self._tick = None
        self.serve_line()
        self._tick_while_waiting()

    def wait_over(self, connection: CappedConnection) -> None:
        """`connection` waited `LINE_WAIT_S` for a place: closed, counted as refused."""
        if connection in self.line:
            del self.line[connection]
            self.counts.dropped[REASON_REFUSED] += 1

    def close_line(self) -> None:
        """At the end of a stop: what still waits is closed."""
        for waiting in list(self.line):
            waiting.abort()
        self.line.clear()

    def _room(self) -> CappedConnection | None:
        """Which connection goes: the one stalled longest, else the first not busy in `unasked_for`'s order, else
        none."""
        stalled = [connection for connection in self.connections if connection.stalled_since is not None]
        if stalled:
            return min(stalled, key=lambda connection: connection.stalled_since or 0.0)
        now = asyncio.get_running_loop().time()
        quiet = [connection for connection in self.connections if not connection.busy() and not connection.fresh(now)]
        return min(quiet, key=CappedConnection.unasked_for, default=None)

    def release(self, connection: CappedConnection) -> None:
        """`connection` holds no place, nor waits for one, any more (the line is served by the caller)."""
        self.connections.pop(connection, None)
        self.line.pop(connection, None)
        self.counts.open = len(self.connections)

    def missed_deadline(self) -> None:
        self.counts.dropped[REASON_WRITE_DEADLINE] += 1
        if not self._deadline_said:
            self._deadline_said = True
            log.warning("closed a connection whose client read none of its answer for %g s (said once; counted in "
                        "%s)", self.write_deadline_s, names.CONNECTIONS_DROPPED_TOTAL)

    def busy(self) -> bool:
        """Some connection has a request arriving, under way, or its answer still being sent (`stop_grace_s`)."""
        now = asyncio.get_running_loop().time()
        return bool(self.line) or any(connection.answering(now) for connection in self.connections)


class CappedConnection(asyncio.Protocol):
    """One accepted connection: aiohttp's request handler serves it; this holds its place and its write clock."""

    def __init__(self, cap: ConnectionCap) -> None:
        self._cap = cap
        self._loop = asyncio.get_running_loop()
        self._handler = cap.server()
        self._transport: asyncio.BaseTransport | None = None
        self._admitted = False
        self._deadline: asyncio.TimerHandle | None = None
        self._waiting: asyncio.TimerHandle | None = None  # closes it when its wait for a place is over
        self.stalled_since: float | None = None
        """When its answer backed up (the client stopped reading), until it drains."""
        self.opened = self._loop.time()
        self.asked = float("-inf")
        """When a whole request last arrived (aiohttp parsed it)."""
        self.unanswered = False
        """A whole request has arrived since aiohttp last waited for one (`_request_to_answer`)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        admitted = self._cap.admit(self)
        if admitted == "refused":
            transport.abort()  # type: ignore[attr-defined]
        elif admitted == "waiting":
            transport.pause_reading()  # type: ignore[attr-defined]  # its request waits in the kernel
            self._waiting = self._loop.call_later(LINE_WAIT_S, self._wait_over)
        else:
            self._start()

    def _start(self) -> None:
        self._admitted = True
        self._handler.connection_made(self._transport)  # type: ignore[arg-type]

    def take_place(self) -> bool:
        """Given a place it waited for (`ConnectionCap.serve_line`); False when it has gone meanwhile."""
        if self._waiting is not None:
            self._waiting.cancel()
            self._waiting = None
        transport = self._transport
        if transport is None or transport.is_closing():
            return False
        self.opened = self._loop.time()
        self._start()
        transport.resume_reading()  # type: ignore[attr-defined]
        return True

    def _wait_over(self) -> None:
        self._waiting = None
        self._cap.wait_over(self)
        self.abort()

    def busy(self) -> bool:
        """Not to be closed for another: a whole request under way or parsed and queued (pipelined), or an answer
        being handed over (not stalled). Nothing else is: an idle keep-alive connection, one with no request yet,
        one whose headers dribble in. A line ending in a newline once counted as a request arriving: clients
        sending a header line every 0.1 s held every place for good, and the kubelet's /healthz timed out."""
        if self.stalled_since is not None:
            return False
        if self._request_to_answer():
            return True
        transport = self._transport
        return transport is not None and not transport.is_closing() and bool(
            transport.get_write_buffer_size())  # type: ignore[attr-defined]

    def fresh(self, now: float) -> bool:
        """Made (or given its place) within `FRESH_S`, no request yet: its request may be on its way."""
        return self.asked == float("-inf") and now - self.opened < FRESH_S

    def _in_request(self) -> bool:
        """aiohttp's own marks (`RequestHandler._request_in_progress`, `_messages`; `tests/exporter/
        test_exporter_aiohttp_internals.py` fails if an upgrade removes them): a request being answered, or parsed
        and waiting its turn."""
        handler = self._handler
        return bool(getattr(handler, "_request_in_progress", False) or getattr(handler, "_messages", None))

    def _request_to_answer(self) -> bool:
        """A whole request arrived and its answer is not handed over yet. aiohttp's marks alone miss a turn: its
        connection loop takes a request off `_messages` and starts a task for the handler, which (Python 3.11)
        sets `_request_in_progress` a loop turn later; a connection closed in between as idle lost its scrape
        (121 of 960 in bursts of 60 fresh HTTPS scrapes at the default cap). So a request that arrived keeps the
        connection busy until aiohttp's loop waits for the next one (its `_waiter`, pending), or the connection
        closes."""
        if self._in_request():
            return True
        if not self.unanswered:
            return False
        waiter = getattr(self._handler, "_waiter", None)
        transport = self._transport
        if (waiter is not None and not waiter.done()) or transport is None or transport.is_closing():
            self.unanswered = False
        return self.unanswered

    def unasked_for(self) -> tuple[bool, float]:
        """How `ConnectionCap._room` orders the connections it may close, first the first: those that never
        completed a request (a dribbler, a silent one), open longest, then the idle keep-alive ones, longest without
        a request. A fresh scraper's request comes within milliseconds; closing a kept-alive one resets its
        client's next scrape."""
        if self.asked == float("-inf"):
            return (False, self.opened)
        return (True, self.asked)

    def answering(self, now: float) -> bool:
        """A request to answer before a stop closes it: one under way or parsed and queued, an answer being handed
        over, or a connection just made (within `QUIET_S`) whose request has not come yet."""
        if self._request_to_answer():
            return True
        if self.asked == float("-inf") and now - self.opened < QUIET_S:
            return True
        transport = self._transport
        return transport is not None and not transport.is_closing() and bool(
            transport.get_write_buffer_size())  # type: ignore[attr-defined]

    def abort(self) -> None:
        """Close at once; its place is free now (its `connection_lost` comes a loop turn later, after other accepts
        of the same wake-up may have looked for room)."""
        self._cap.release(self)
        if self._transport is not None:
            self._transport.abort()  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self._handler.data_received(data)
        if self._in_request():
            self.asked = self._loop.time()
            self.unanswered = True

    def eof_received(self) -> bool | None:
        self._handler.eof_received()
        return None

    def pause_writing(self) -> None:
        if self.stalled_since is None:
            self.stalled_since = self._loop.time()
            self._deadline = self._loop.call_later(self._cap.write_deadline_s, self._deadline_missed)
        self._handler.pause_writing()

    def resume_writing(self) -> None:
        self.stalled_since = None
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._handler.resume_writing()

    def _deadline_missed(self) -> None:
        self._deadline = None
        self._cap.missed_deadline()
        self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self._deadline, self._waiting):
            if timer is not None:
                timer.cancel()
        self._deadline = self._waiting = None
        self._cap.release(self)
        self._cap.serve_line()
        if self._admitted:
            self._handler.connection_lost(exc)
