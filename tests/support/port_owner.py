"""Who listens on a port: the process a test started, or someone else.

A test server's readiness poll only asks whether *something* answers at its URL. When two checkouts' test runs
share a port block (tests/support/ports.py), another run's server can take the port between `free_port()` and
the bind of the process the test started; that process then fails to bind, and meanwhile the other server
answers the poll. In CI an exporter test read a ModelMesh stand-in's body (camelCase labels, every path answered,
/healthz included) and asserted on it. The kernel knows who owns the listening socket: /proc/net/tcp{,6} gives
its inode, /proc/PID/fd the process holding it; comparing them costs a few file reads, not a sleep.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
from pathlib import Path
from urllib.parse import urlsplit

_PROC = Path("/proc")
_LISTEN = "0A"
_LOOPBACK_NAMES = {"localhost": ("127.0.0.1", "::1")}


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """/proc/net/tcp prints each 32-bit word of the address in the machine's own byte order."""
    words = [int(hex_address[start:start + 8], 16) for start in range(0, len(hex_address), 8)]
    packed = b"".join(struct.pack("=I", word) for word in words)
    return ipaddress.ip_address(socket.inet_ntop(socket.AF_INET if len(words) == 1 else socket.AF_INET6, packed))


def _covers(listener: ipaddress.IPv4Address | ipaddress.IPv6Address,
            wanted: set[ipaddress.IPv4Address | ipaddress.IPv6Address]) -> bool:
    """Whether a connection to one of `wanted` reaches a socket listening on `listener` (a wildcard reaches every
    address; `::` also IPv4 ones, as a dual-stack socket does)."""
    if listener.is_unspecified:
        return listener.version == 6 or any(address.version == 4 for address in wanted)
    if isinstance(listener, ipaddress.IPv6Address) and listener.ipv4_mapped is not None:
        return listener.ipv4_mapped in wanted
    return listener in wanted


def _listening_inodes(addresses: set[ipaddress.IPv4Address | ipaddress.IPv6Address], port: int) -> set[int]:
    found: set[int] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (_PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], int(fields[9])
            hex_address, _, hex_port = local.partition(":")
            if state == _LISTEN and int(hex_port, 16) == port and _covers(_address(hex_address), addresses):
                found.add(inode)
    return found


def _socket_inodes(pid: int) -> set[int]:
    inodes: set[int] = set()
    try:
        descriptors = list((_PROC / str(pid) / "fd").iterdir())
    except OSError:  # gone, or another user's
        return inodes
    for descriptor in descriptors:
        try:
            target = descriptor.readlink().name
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[len("socket:["):-1]))
    return inodes


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants: a server may listen from a worker it forked (the adapter's serving workers)."""
    children: dict[int, list[int]] = {}
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    tree, pending = [], [pid]
    while pending:
        current = pending.pop()
        tree.append(current)
        pending.extend(children.get(current, []))
    return tree


def _describe_holders(inodes: set[int]) -> str:
    holders = []
    for entry in _PROC.iterdir():
        if entry.name.isdigit() and _socket_inodes(int(entry.name)) & inodes:
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                command = "?"
            holders.append(f"pid {entry.name}: {' '.join(command.split())[:200]}")
    return "; ".join(holders) or "a process this user cannot see"


def _addresses(host: str) -> set[ipaddress.IPv4Address | ipaddress.IPv6Address] | None:
    try:
        return {ipaddress.ip_address(host)}
    except ValueError:
        names = _LOOPBACK_NAMES.get(host.lower())
        return {ipaddress.ip_address(name) for name in names} if names else None


def someone_else_listens(url: str, pid: int) -> str | None:
    """Who, other than process `pid` and its descendants, listens where `url` connects ("pid Q: cmdline"), or
    None where only they do (or where this machine cannot tell: no /proc, a host name not an address).

    Any foreign listener counts, even beside one of ours (two sockets with SO_REUSEPORT): the answer a poll got
    may have come from either."""
    parts = urlsplit(url)
    addresses = _addresses(parts.hostname or "")
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    if addresses is None or port is None or not (_PROC / "net" / "tcp").exists():
        return None
    listening = _listening_inodes(addresses, port)
    if not listening:
        return None  # the listener closed between the answer and this look: nothing to say who it was
    mine = _socket_inodes(pid)
    if not listening - mine:
        return None  # the happy path: the started process itself holds every listener
    foreign = listening - mine
    for descendant in _tree(pid)[1:]:
        foreign -= _socket_inodes(descendant)
    return _describe_holders(foreign) if foreign else None
