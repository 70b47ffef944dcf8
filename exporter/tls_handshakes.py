"""The TLS handshakes of the exporter's HTTPS port: each bounded in time, and only so many under way at once.

Served with `loop.create_server(ssl=...)`, a connection was placed by the `ConnectionCap` only once its handshake
was over, and asyncio gave a handshake 60 s: 1,000 clients that opened a TCP connection and never sent a
ClientHello held the sidecar at 361 MiB for that minute (each unfinished handshake holds asyncio's TLS buffers,
some 350 KB), above its 256Mi memory limit, and nothing counted them. So, as the adapter's API does
(`autoscaler/api/guarded_connection.py`, which gives a handshake `--header-read-timeout`), the port is served
over plain TCP and each connection is upgraded here (`loop.start_tls`):

- **A handshake bound** (`HANDSHAKE_TIMEOUT_S`): a handshake not over by then is dropped, counted in
  `modelmesh_exporter_connections_dropped_total{reason="handshake_timeout"}`. A scraper's handshake takes
  milliseconds, a TLS 1.3 one over a congested pod network a few round trips.
- **A bound on handshakes under way** (`HANDSHAKES_PER_PLACE` times `--max-connections`, `HANDSHAKES_AT_LEAST` at
  the least): at it a new connection takes the place of the handshake under way longest if that one has been
  under way `DISPLACE_AFTER_S` (far longer than a real client's), which is dropped, counted as
  `handshake_displaced`; if even the oldest is younger, the new connection is refused (closed, counted as
  `refused`), not a handshake in progress. Displacing the oldest whatever its age reset honest clients: at
  `--max-connections 1` (4 handshakes) 5 scrapers at once lost 20 of 50 scrapes mid-handshake. A flood of
  silent clients holds no more than the bound: 1,000 of them took a sidecar idle at 41 MiB to 115 MiB (the 128
  handshakes the default cap of 32 allows), where they took it to 340 MiB before.

A finished handshake hands its connection to the `ConnectionCap` as a new one (placed, in line, or refused).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Final

from exporter import names
from exporter.connection_cap import (
    REASON_HANDSHAKE_DISPLACED,
    REASON_HANDSHAKE_TIMEOUT,
    REASON_REFUSED,
    ConnectionCap,
)

log = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT_S: Final = 10.0
"""How long a TLS handshake may take: the adapter's `--header-read-timeout` default, which bounds its own."""

HANDSHAKES_PER_PLACE: Final = 4
"""Handshakes that may be under way at once, per place of `--max-connections` (the cap's line holds as many)."""

HANDSHAKES_AT_LEAST: Final = 64
"""Handshakes that may be under way at once whatever `--max-connections`: a small cap (1, 2) would otherwise leave
room for fewer handshakes than a Prometheus pair, the adapter and the probes start together (about 350 KB each)."""

DISPLACE_AFTER_S: Final = 1.0
"""How long a handshake has been under way before a new connection may take its place: a real client's is over
in milliseconds, a few round trips over a congested pod network; one still under way after a second is stuck."""


class TlsHandshakes:
    """A protocol factory for `loop.create_server` (plain TCP) that upgrades each connection to TLS with `context`
    and hands it to `cap` (see the module)."""

    def __init__(self, cap: ConnectionCap, context: ssl.SSLContext,
                 timeout_s: float = HANDSHAKE_TIMEOUT_S) -> None:
        self.cap = cap
        self.context = context
        self.timeout_s = timeout_s
        self.most = max(HANDSHAKES_AT_LEAST, HANDSHAKES_PER_PLACE * cap.max_connections)
        self.under_way: dict[asyncio.Task[None], tuple[asyncio.Transport, float]] = {}
        """The handshakes not over, oldest first, each the task that does it (held here, so that none is collected
        mid-way), its connection and when it began."""
        self._full_said = False
        self._timeout_said = False

    def __call__(self) -> asyncio.Protocol:
        return _Handshaking(self)

    def start(self, raw: asyncio.Transport) -> None:
        """Upgrade `raw`, a connection just accepted; at `most` handshakes under way, the oldest is dropped if it
        is stuck (under way `DISPLACE_AFTER_S`), else `raw` is refused."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        if len(self.under_way) >= self.most:
            oldest, (its_connection, began) = next(iter(self.under_way.items()))
            if now - began < DISPLACE_AFTER_S:
                raw.abort()
                self.cap.counts.dropped[REASON_REFUSED] += 1
                self._say_full()
                return
            del self.under_way[oldest]
            oldest.cancel()
            its_connection.abort()  # here: a task cancelled before it ran does not run
            self.cap.counts.dropped[REASON_HANDSHAKE_DISPLACED] += 1
            self._say_full()
        raw.pause_reading()  # the ClientHello waits in the kernel for start_tls, which reads it
        task = loop.create_task(self._upgrade(raw))
        self.under_way[task] = (raw, now)
        task.add_done_callback(self._over)

    def _say_full(self) -> None:
        if not self._full_said:
            self._full_said = True
            log.warning("%d TLS handshakes under way, the most (%d x --max-connections, at least %d) the exporter "
                        "takes: a new connection takes the place of the oldest if it has been under way %g s, else "
                        "is refused (said once; counted in %s)", self.most, HANDSHAKES_PER_PLACE,
                        HANDSHAKES_AT_LEAST, DISPLACE_AFTER_S, names.CONNECTIONS_DROPPED_TOTAL)

    def _over(self, task: asyncio.Task[None]) -> None:
        self.under_way.pop(task, None)

    async def _upgrade(self, raw: asyncio.Transport) -> None:
        loop = asyncio.get_running_loop()
        connection = self.cap()
        began = loop.time()
        try:
            secured = await loop.start_tls(raw, connection, self.context, server_side=True,
                                           ssl_handshake_timeout=self.timeout_s)
        except (OSError, ssl.SSLError, TimeoutError, ConnectionError, RuntimeError):
            # asyncio logs a refused certificate itself, as it did for `create_server(ssl=...)`; a bound reached
            # is told by the clock, as asyncio's error for it differs across versions.
            if loop.time() - began >= self.timeout_s:
                self._timed_out()
            raw.abort()
            return
        except asyncio.CancelledError:  # the loop's end, or its place taken by a new one
            raw.abort()
            raise
        if secured is None or secured.is_closing():
            return
        connection.connection_made(secured)

    def _timed_out(self) -> None:
        self.cap.counts.dropped[REASON_HANDSHAKE_TIMEOUT] += 1
        if not self._timeout_said:
            self._timeout_said = True
            log.warning("closed a connection whose TLS handshake was not over within %g s (said once; counted in %s)",
                        self.timeout_s, names.CONNECTIONS_DROPPED_TOTAL)


class _Handshaking(asyncio.Protocol):
    """A connection accepted over TCP, before its upgrade: `start_tls` takes its transport over at once."""

    def __init__(self, handshakes: TlsHandshakes) -> None:
        self._handshakes = handshakes

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._handshakes.start(transport)
