"""A process on a node whose clock is off: libfaketime (Debian's `faketime`, installed by `./run test`).

Preloaded into a process, libfaketime shifts what the wall clock reads (`time.time()`, `clock_gettime`
with CLOCK_REALTIME) by a fixed offset, as a node with broken time sync would. The monotonic clock is left
alone, as it is on such a node: timeouts and rate windows keep working.
"""

from __future__ import annotations

import glob
from pathlib import Path

LIBRARY_PATTERN = "/usr/lib/*/faketime/libfaketime.so.1"


def clock_off_env(seconds: float) -> dict[str, str]:
    """Environment for a child process whose wall clock reads `seconds` off the real one (negative: behind)."""
    return {"LD_PRELOAD": _library(), "FAKETIME": f"{seconds:+g}s", "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "FAKETIME_NO_CACHE": "1"}


def steppable_clock_env(offset_file: Path) -> dict[str, str]:
    """Environment for a child process whose wall clock reads the offset in `offset_file`, read again on every
    call: `step_clock` moves it while the process runs, as an NTP step or a resumed VM moves a node's clock."""
    step_clock(offset_file, 0.0)
    return {"LD_PRELOAD": _library(), "FAKETIME_TIMESTAMP_FILE": str(offset_file),
            "FAKETIME_DONT_FAKE_MONOTONIC": "1", "FAKETIME_NO_CACHE": "1"}


def step_clock(offset_file: Path, seconds: float) -> None:
    """Set the wall clock of the processes started with `steppable_clock_env(offset_file)` `seconds` off."""
    written = offset_file.with_name(offset_file.name + ".new")
    written.write_text(f"{seconds:+g}\n")
    written.replace(offset_file)  # whole: a process reading it mid-write would see no offset


def _library() -> str:
    found = sorted(glob.glob(LIBRARY_PATTERN))
    if not found:
        raise RuntimeError(f"libfaketime not found ({LIBRARY_PATTERN}): apt-get install -y faketime "
                           "(./run test installs it)")
    return found[0]
