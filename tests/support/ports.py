"""Ports for servers that tests start in another process.

A port found by binding port 0 lies in the kernel's ephemeral range, and between the moment it is chosen and
the moment the child process binds it, any outgoing connection on this machine (a scrape, a test client,
Prometheus itself) may take it as its local port: with two test processes running at once that happened in CI
("Address already in use"). So ports come from below the ephemeral range, where the kernel never hands out
local ports, from a block of its own for each pytest-xdist worker, so that two workers never pick the same one.
"""

from __future__ import annotations

import itertools
import os
import socket
from pathlib import Path

_BLOCK = 500
_LOWEST = 10_000


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _worker_index() -> int:
    """This process's block: its xdist worker's, moved by `TEST_PORT_BLOCK_OFFSET` (blocks) when several
    checkouts of the project run tests on one machine at once."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    digits = name.removeprefix("gw")
    offset = os.environ.get("TEST_PORT_BLOCK_OFFSET", "0")
    return (int(digits) if digits.isdigit() else 0) + (int(offset) if offset.isdigit() else 0)


_BLOCKS = max(1, (_ephemeral_low() - _LOWEST) // _BLOCK)
_FIRST = _LOWEST + (_worker_index() % _BLOCKS) * _BLOCK
_candidates = itertools.cycle(range(_FIRST, _FIRST + _BLOCK))


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A port on 127.0.0.1 that nothing holds now and that no other test process and no outgoing connection
    will take before the server this test starts binds it."""
    for _ in range(_BLOCK):
        port = next(_candidates)
        if _bindable(port):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        fallback: int = sock.getsockname()[1]
        return fallback


def machine_has_ipv6() -> bool:
    """Whether this kernel lets a socket bind IPv6's loopback (a container may run with IPv6 turned off): the
    tests of listening on every family check `[::1]` only where it exists."""
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True
