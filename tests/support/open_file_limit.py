"""What the open-file-limit tests of the exporter and of `serve` share: the limit a process runs under, as the
kernel shows it, idle connections that use up its files, and the words its log says the outage in."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

SAID = "out of file descriptors: new connections to"
"""What the exporter and the adapter log when they can accept no connection for want of files (a serving worker's
own line about the refresh's values, said when they arrive while it is out of files, begins the same and is another
outage: `test_serve_open_files`)."""


def open_files_limit(pid: int) -> tuple[int, int]:
    """(soft, hard) as the kernel shows them in /proc/PID/limits, what `cat /proc/PID/limits` tells an operator."""
    line = next(line for line in Path(f"/proc/{pid}/limits").read_text().splitlines()
                if line.startswith("Max open files"))
    soft, hard = re.findall(r"\d+", line)[:2]
    return int(soft), int(hard)


@contextmanager
def held_connections(port: int, count: int) -> Iterator[None]:
    """`count` connections to the port that send nothing, as a client that leaks its connections holds them."""
    with ExitStack() as held:
        for _ in range(count):
            held.enter_context(socket.create_connection(("127.0.0.1", port), timeout=10))
        yield


def lines(log: Path) -> list[str]:
    """The log's lines so far (a process may be writing it: a cut last character is no error)."""
    return log.read_text(errors="replace").splitlines()
