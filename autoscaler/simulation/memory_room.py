"""Whether a trace file is too big for the memory this machine has left, said while its first rows are read.

A day at 1 s of 500 models is 43 million rows; `simulate` holds about `ROW_BYTES` a row (the trace's arrays, the
replay's buckets and numpy's temporaries together), several GB, and a machine without them killed the run after
minutes of reading, with nothing said before. The file's size and the rows read so far estimate its rows (a
`.gz`'s bytes read are compressed ones: the estimate holds as well); where those need more than the memory
left (`room_bytes`), one warning says so early, with what to do, and the run goes on: the estimate is rough,
and the machine may free memory.
"""

from __future__ import annotations

import os
import re
import resource
from collections.abc import Callable
from pathlib import Path
from typing import Final

from autoscaler.simulation.cgroup_room import cgroup_room

ROW_BYTES: Final = 110
"""The most a trace row takes over a whole run, as measured (6 December 2026, docs/simulation.md): 2.5 M rows of
500 models at 60 s 94 bytes a row (max RSS less a three-row run's), 2 M rows at 1 s 72; reading rows not in time
order peaks at 101."""
ROWS_BEFORE_ESTIMATE: Final = 1 << 16
"""Rows read before the file's rows are estimated from the bytes read: fewer, and the reader's read-ahead (a
gzip block) is much of the bytes."""


def _meminfo_available() -> int | None:
    """MemAvailable of /proc/meminfo in bytes (Linux), else the free physical pages (None where neither is known)."""
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        text = ""
    if found := re.search(r"^MemAvailable:\s+(\d+) kB", text, re.MULTILINE):
        return int(found.group(1)) * 1024
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _address_space_room() -> int | None:
    """What the address-space limit (`ulimit -v`, RLIMIT_AS) leaves past the process's present size; None where it
    has none."""
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit == resource.RLIM_INFINITY:
        return None
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return None
    found = re.search(r"^VmSize:\s+(\d+) kB", status, re.MULTILINE)
    return None if found is None else limit - int(found.group(1)) * 1024


def room_bytes() -> int | None:
    """The memory the run may still take: the least of the machine's available memory, the cgroup's room and the
    address-space limit's; None where none is known."""
    rooms = [room for room in (_meminfo_available(), cgroup_room(), _address_space_room()) if room is not None]
    return max(0, min(rooms)) if rooms else None


ADVICE: Final = ("give it a coarser step (sum the rows into 10 s or 60 s intervals: pandas "
                  "df.assign(timestamp_s=df.timestamp_s // 60 * 60).groupby(['timestamp_s', 'model'], "
                  "as_index=False).sum()), fewer models (the busiest) or a shorter stretch of it, or run it where "
                  "more memory is free")
"""What to do about a trace too big for the memory there is: in the warning, and in the error where it ran out."""
SYNTHETIC_ADVICE: Final = "give it fewer --models or --hours, or run it where more memory is free"
"""What to do where a `--synthetic` run ran out: it has no rows to make coarser."""
LIMITS: Final = "what this machine, the container's memory limit and `ulimit -v` leave"


def size_text(size: float) -> str:
    """Bytes as the warning writes them: `4.7 GB`, `310 MB`."""
    return f"{size / 1e9:.2g} GB" if size >= 1e9 else f"{size / 1e6:.3g} MB"


class MemoryWatch:
    """Called as rows are read (`rows` so far, `done` bytes of the file's `size`): warns once, through `warn`,
    where the file's estimated rows need more than the memory there was when reading began."""

    def __init__(self, name: str, warn: Callable[[str], None], room: Callable[[], int | None] = room_bytes) -> None:
        self.name, self.warn = name, warn
        self.room = room()
        self.warned = False

    def __call__(self, rows: int, done: int, size: int) -> None:
        if self.warned or self.room is None or rows < ROWS_BEFORE_ESTIMATE or done <= 0:
            return
        estimate = rows * max(size, done) / done
        need = estimate * ROW_BYTES
        if need <= self.room:
            return
        self.warned = True
        self.warn(f"{self.name}: {size_text(size)} of trace, about {estimate / 1e6:.2g} million rows from its first "
                  f"{rows:,}, needs about {size_text(need)} of memory to simulate ({ROW_BYTES} bytes a row) and "
                  f"{size_text(self.room)} is free here ({LIMITS}): the run may be killed for memory partway; "
                  f"{ADVICE}")
