"""Ports for servers that tests start in another process.

A port found by binding port 0 lies in the kernel's ephemeral range, and between the moment it is chosen and
the moment the child process binds it, any outgoing connection on this machine (a scrape, a test client,
Prometheus itself) may take it as its local port: with two test processes running at once that happened in CI
("Address already in use"). So ports come from below the ephemeral range, where the kernel never hands out
local ports, from a block of its own for each pytest-xdist worker, so that two workers never pick the same one.

Blocks are per worker of one run; two checkouts testing on one machine at once are kept apart by
`TEST_PORT_BLOCK_OFFSET`, which wraps, and in CI two runs shared a block: one's ModelMesh stand-in took the port
the other had just chosen for an exporter. So each port handed out is also claimed machine-wide (a lock on a
file named after it) until its server has long bound it; a run never hands out a port another run has claimed.
What still slips through (a run of an older checkout, a process outside the tests) is refused at readiness
(tests/support/port_owner.py).
"""

from __future__ import annotations

import collections
import fcntl
import itertools
import os
import socket
import tempfile
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


_CLAIMS = Path(tempfile.gettempdir()) / "modelmesh-autoscaler-test-ports"
_CLAIMS_HELD = 64
"""Claims this process keeps, the newest: a server binds its port within seconds, by when a test has asked for
a few ports more, never 64; and a bound port needs no claim (nobody else can bind it)."""
_claims: collections.deque[int] = collections.deque()


def _claimed(port: int) -> bool:
    """Claim `port` for this process unless another process has; the lock goes with the descriptor, so a run
    that dies leaves nothing claimed."""
    try:
        _CLAIMS.mkdir(mode=0o777, exist_ok=True)
        descriptor = os.open(_CLAIMS / str(port), os.O_CREAT | os.O_RDWR, 0o666)
    except OSError:  # another user's folder: no claim to take here; readiness still refuses a stranger
        return True
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(descriptor)
        return False
    _claims.append(descriptor)
    if len(_claims) > _CLAIMS_HELD:
        os.close(_claims.popleft())
    return True


def free_port() -> int:
    """A port on 127.0.0.1 that nothing holds now and that no other test process and no outgoing connection
    will take before the server this test starts binds it."""
    for _ in range(_BLOCK):
        port = next(_candidates)
        if _bindable(port) and _claimed(port):
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
