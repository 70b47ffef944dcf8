"""What a container's memory limit leaves the run, which `/proc/meminfo` (the node's) does not show.

Read from the process's cgroup and those above it, v2 (`memory.max`, `memory.current`) and v1 (a Docker
`--memory` on a v1 host: `memory.limit_in_bytes`, `memory.usage_in_bytes`), the least room of those with a
limit. Their usage counts the page cache of files read (a pod that has just downloaded its export holds GBs
of it), which the kernel takes back before it kills for memory: the file pages of `memory.stat`, active and
inactive, are counted as room. A file read twice (a `wc -l` first, or a second run) moves its pages to the
active list, so counting the inactive ones alone (the kubelet's working set) warned "100 MB free" of a 4 GiB
pod again at the third run; the kernel's MemAvailable counts both too. Where the cgroup
files live is a parameter, so that a test points it at a tree of its own, as `ProcessCollector(proc=...)` does.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final

MEMBERSHIP: Final = Path("/proc/self/cgroup")
"""Which cgroups the process is in: `0::/path` (v2), `N:memory:/path` (v1's memory controller)."""
MOUNT: Final = Path("/sys/fs/cgroup")
"""Where the cgroup hierarchy is mounted (v1: each controller's under it, `memory/`)."""
V1_NO_LIMIT: Final = 1 << 62
"""v1's memory.limit_in_bytes at or past this is no limit (unset, it reads 9223372036854771712)."""


def cgroup_room(membership: Path = MEMBERSHIP, mount: Path = MOUNT) -> int | None:
    """The least of what the process's cgroups and those above them allow more than they hold (less their
    page cache, which the kernel reclaims first), never below 0 (a group over its limit, as v2 allows for a
    moment); None where none has a limit or none can be read."""
    try:
        lines = membership.read_text().splitlines()
    except OSError:
        return None
    rooms: list[int] = []
    for line in lines:
        number, controllers, path = [*line.split(":", 2), "", ""][:3]
        if number == "0" and not controllers:
            rooms += _rooms(mount, path, _v2_room)
        elif "memory" in controllers.split(","):
            rooms += _rooms(mount / "memory", path, _v1_room)
    return min(rooms) if rooms else None


def _rooms(mount: Path, path: str, room_of: Callable[[Path], int | None]) -> list[int]:
    """The rooms of the group at `path` and of those above it up to the mount (a container without a cgroup
    namespace sees its host's path, and its own group mounted at the root: that is read)."""
    group = mount / path.lstrip("/")
    rooms = []
    for folder in (group, *group.parents):
        if (room := room_of(folder)) is not None:
            rooms.append(room)
        if folder == mount or mount not in folder.parents:
            break
    return rooms


def _v2_room(folder: Path) -> int | None:
    try:
        limit = (folder / "memory.max").read_text().strip()
        used = int((folder / "memory.current").read_text())
    except (OSError, ValueError):
        return None
    if not limit.isdigit():  # "max"
        return None
    return max(0, int(limit) - max(0, used - _stat(folder, "inactive_file") - _stat(folder, "active_file")))


def _v1_room(folder: Path) -> int | None:
    try:
        limit = int((folder / "memory.limit_in_bytes").read_text())
        used = int((folder / "memory.usage_in_bytes").read_text())
    except (OSError, ValueError):
        return None
    if limit >= V1_NO_LIMIT:
        return None
    # total_: the group's and its children's, as its usage is; a kernel without the hierarchy has only its own
    cache = (_stat(folder, "total_inactive_file") + _stat(folder, "total_active_file")
             or _stat(folder, "inactive_file") + _stat(folder, "active_file"))
    return max(0, limit - max(0, used - cache))


def _stat(folder: Path, key: str) -> int:
    """A counter of the group's memory.stat in bytes; 0 where it has none."""
    try:
        text = (folder / "memory.stat").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0
