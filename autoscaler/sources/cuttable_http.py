"""HTTP connections that a deadline can cut from another thread, for the Prometheus source's blocking queries.

requests bounds each socket read (its read timeout), not an answer: a Prometheus, or a proxy before it, that
sends a byte of its answer every few seconds never trips it, and the thread reading that answer waits for as
long as the backend trickles. The source's deadline (`asyncio.timeout`) stops the source waiting, not the
thread: once its query threads were all in such reads, every later query queued behind them, and the source
failed every refresh until the adapter restarted, whatever the backend did meanwhile.

`CuttableAdapter.cut()` shuts down every connection the adapter has opened: a read blocked on one returns at
once (end of stream), so its thread fails its query and is free for the next round. Idle pooled connections are
shut too; urllib3 sees them dropped when it next takes one from its pool, and opens a new one. Each connection's
socket is kept as it connects: for an answer that will close its connection (`Connection: close`, HTTP/1.0),
http.client drops it from the connection and leaves it to the response alone, where `cut()` did not find it.

SOCKS proxies (`socks5://` in `HTTPS_PROXY`) use urllib3's own pools, whose connections are not tracked: a
trickling answer through one still holds its thread until the backend stops.
"""

from __future__ import annotations

import socket
import threading
import weakref
from collections.abc import Callable
from typing import Any

from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool


def _tracking_pools(note: Callable[[HTTPConnection], None]) -> dict[str, type[HTTPConnectionPool]]:
    """urllib3 pool classes whose connections are passed to `note` as they connect (before the TCP connect
    and the TLS handshake, so that those can be cut too) and once connected (their socket, to be kept)."""

    class Connection(HTTPConnection):
        def connect(self) -> None:
            note(self)
            super().connect()
            note(self)

    class SecureConnection(HTTPSConnection):
        def connect(self) -> None:
            note(self)
            super().connect()
            note(self)

    class Pool(HTTPConnectionPool):
        ConnectionCls = Connection

    class SecurePool(HTTPSConnectionPool):
        ConnectionCls = SecureConnection

    return {"http": Pool, "https": SecurePool}


class CuttableAdapter(HTTPAdapter):
    """A requests transport adapter whose open connections `cut()` shuts down, from any thread."""

    def __init__(self, **kwargs: Any) -> None:
        self._lock = threading.Lock()
        self._connections: weakref.WeakKeyDictionary[HTTPConnection, socket.socket | None] = \
            weakref.WeakKeyDictionary()  # and the socket each last connected with
        self._pools = _tracking_pools(self._note)
        super().__init__(**kwargs)  # builds the pool manager (init_poolmanager), which needs the pools

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = self._pools

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not proxy.lower().startswith("socks"):  # SOCKS pools make their own connections
            manager.pool_classes_by_scheme = self._pools
        return manager

    def cut(self) -> int:
        """Shut down every connection opened through this adapter; how many had a socket to shut."""
        with self._lock:
            connections = list(self._connections.items())
        shut = 0
        for connection, connected in connections:
            sock = connection.sock or connected  # None: handed to an answer that will close it
            # The plain socket under TLS (and under TLS to a proxy, urllib3's SSLTransport keeps it as `socket`):
            # SSLSocket.shutdown would drop its SSL object under a thread still reading through it.
            raw = sock if isinstance(sock, socket.socket) else getattr(sock, "socket", None)
            if not isinstance(raw, socket.socket):
                continue
            try:
                socket.socket.shutdown(raw, socket.SHUT_RDWR)
            except OSError:  # closed already, or not connected yet
                continue
            shut += 1
        return shut

    def _note(self, connection: HTTPConnection) -> None:
        """A connection about to connect (no socket yet: what `cut` finds is its socket being connected), or
        connected: its socket, kept. A socket closed since then has no descriptor left to shut (-1)."""
        with self._lock:
            self._connections[connection] = connection.sock

