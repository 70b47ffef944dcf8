"""A process on a node whose clock is off: libfaketime (Debian's `faketime`, installed by `./run test`).

Preloaded into a process, libfaketime shifts what the wall clock reads (`time.time()`, `clock_gettime`
with CLOCK_REALTIME) by a fixed offset, as a node with broken time sync would. The monotonic clock is left
alone, as it is on such a node: timeouts and rate windows keep working.
"""

from __future__ import annotations

import glob

LIBRARY_PATTERN = "/usr/lib/*/faketime/libfaketime.so.1"


def clock_off_env(seconds: float) -> dict[str, str]:
    """Environment for a child process whose wall clock reads `seconds` off the real one (negative: behind)."""
    found = sorted(glob.glob(LIBRARY_PATTERN))
    if not found:
        raise RuntimeError(f"libfaketime not found ({LIBRARY_PATTERN}): apt-get install -y faketime "
                           "(./run test installs it)")
    return {"LD_PRELOAD": found[0], "FAKETIME": f"{seconds:+g}s", "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "FAKETIME_NO_CACHE": "1"}
