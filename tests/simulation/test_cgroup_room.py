"""A container's memory limit as `simulate --trace` counts it, read from a cgroup tree written as the kernel
lays it out (v2: `0::/path`, `memory.max`; v1: `N:memory:/path`, `memory.limit_in_bytes`), pointed at in place
of /proc/self/cgroup and /sys/fs/cgroup.

A pod that had just downloaded its export was warned it had ~100 MB free where 3.6 GiB of it was page cache the
kernel gives back; a Docker `--memory` limit on a cgroup v1 host was not counted at all."""

from __future__ import annotations

import tempfile
from functools import partial
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.simulation.cgroup_room import cgroup_room
from autoscaler.simulation.memory_room import MemoryWatch

MIB = 1 << 20
GIB = 1 << 30
V1_UNLIMITED = "9223372036854771712"
"""What v1's memory.limit_in_bytes reads where no limit is set (PAGE_COUNTER_MAX pages, 4 KiB each)."""


def tree(root: Path, membership: str, files: dict[str, str]) -> int | None:
    """Writes /proc/self/cgroup (`membership`) and the cgroup files (paths under the mount) under `root`, and
    reads the room from them."""
    (root / "cgroup").write_text(membership + "\n")
    for path, text in files.items():
        where = root / "fs" / path.lstrip("/")
        where.parent.mkdir(parents=True, exist_ok=True)
        where.write_text(text + "\n")
    return cgroup_room(root / "cgroup", root / "fs")


def v2_stat(anon: int, inactive_file: int, active_file: int = 0) -> str:
    return f"anon {anon}\nfile {inactive_file + active_file}\nactive_file {active_file}\n" \
           f"inactive_file {inactive_file}\nshmem 0"


def v1_stat(rss: int, total_inactive_file: int, other: int = 0) -> str:
    """A v1 memory.stat: the cgroup's own counters, then the hierarchy's totals (`other`: the cgroup's own
    inactive file pages, fewer than the total where children hold them)."""
    return f"cache {total_inactive_file}\nrss {rss}\ninactive_file {other}\n" \
           f"total_cache {total_inactive_file}\ntotal_rss {rss}\n" \
           f"total_inactive_file {total_inactive_file}"


ROOMS = [
    pytest.param("0::/kubepods/pod-a/ctr",
                 {"kubepods/pod-a/ctr/memory.max": "max", "kubepods/pod-a/ctr/memory.current": str(3996 * MIB),
                  "kubepods/pod-a/ctr/memory.stat": v2_stat(412 * MIB, 3584 * MIB),
                  "kubepods/pod-a/memory.max": str(4 * GIB), "kubepods/pod-a/memory.current": str(3996 * MIB),
                  "kubepods/pod-a/memory.stat": v2_stat(412 * MIB, 3584 * MIB)},
                 3684 * MIB, id="v2 pod whose usage is mostly the download's page cache"),
    pytest.param("0::/kubepods/pod-a/ctr",
                 {"kubepods/pod-a/ctr/memory.max": str(4 * GIB), "kubepods/pod-a/ctr/memory.current": str(GIB),
                  "kubepods/pod-a/ctr/memory.stat": v2_stat(GIB, 0, active_file=0),
                  "kubepods/pod-a/memory.max": str(2 * GIB), "kubepods/pod-a/memory.current": str(1536 * MIB),
                  "kubepods/pod-a/memory.stat": v2_stat(1536 * MIB, 0)},
                 GIB // 2, id="v2 the pod's limit below the container's: the least room"),
    pytest.param("0::/kubepods/pod-a",
                 {"kubepods/pod-a/memory.max": str(4 * GIB), "kubepods/pod-a/memory.current": str(4 * GIB),
                  "kubepods/pod-a/memory.stat": v2_stat(410 * MIB, 410 * MIB, active_file=3276 * MIB)},
                 3686 * MIB, id="v2 pod whose download was read twice: its page cache on the active list"),
    pytest.param("0::/", {"memory.max": str(4 * GIB), "memory.current": str(5 * GIB)}, 0,
                 id="v2 a group over its limit for a moment: no room, not less"),
    pytest.param("0::/docker/abc", {"memory.max": str(2 * GIB), "memory.current": str(GIB)},
                 GIB, id="v2 no cgroup namespace: the container's own group mounted at the root"),
    pytest.param("0::/", {"memory.max": "max", "memory.current": str(GIB)}, None, id="v2 no limit"),
    pytest.param("4:memory:/docker/abc\n0::/",
                 {"memory/docker/abc/memory.limit_in_bytes": str(2 * GIB),
                  "memory/docker/abc/memory.usage_in_bytes": str(1946 * MIB),
                  "memory/docker/abc/memory.stat": v1_stat(1844 * MIB, 102 * MIB),
                  "memory/docker/memory.limit_in_bytes": V1_UNLIMITED,
                  "memory/docker/memory.usage_in_bytes": str(3 * GIB),
                  "memory/memory.limit_in_bytes": V1_UNLIMITED},
                 204 * MIB, id="v1 docker --memory 2g"),
    pytest.param("11:cpuacct,memory:/ctr", {"memory/ctr/memory.limit_in_bytes": str(GIB),
                                            "memory/ctr/memory.usage_in_bytes": str(GIB),
                                            "memory/ctr/memory.stat": v1_stat(256 * MIB, 768 * MIB, other=0)},
                 768 * MIB, id="v1 memory listed with another controller, the hierarchy's cache counted"),
    pytest.param("4:memory:/ctr", {"memory/ctr/memory.limit_in_bytes": V1_UNLIMITED,
                                   "memory/ctr/memory.usage_in_bytes": str(GIB)}, None, id="v1 no limit"),
    pytest.param("4:memory:/gone", {}, None, id="nothing readable"),
]


@pytest.mark.parametrize(("membership", "files", "room"), ROOMS)
def test_a_containers_room_is_its_limit_less_what_it_cannot_give_back(
        tmp_path: Path, membership: str, files: dict[str, str], room: int | None) -> None:
    assert tree(tmp_path, membership, files) == room


def test_a_pod_that_just_downloaded_its_trace_is_not_warned_for_its_page_cache(tmp_path: Path) -> None:
    """3 M rows (330 MB) in a 4 GiB pod that holds 3.5 GiB of the download's page cache: no warning; the same
    pod holding it as its own memory is warned, with what it has left."""
    warned: list[str] = []
    for anon, cache in ((412 * MIB, 3584 * MIB), (3996 * MIB, 0)):
        files = {"memory.max": str(4 * GIB), "memory.current": str(anon + cache),
                 "memory.stat": v2_stat(anon, cache)}
        watch = MemoryWatch("day.csv", warned.append, room=partial(tree, tmp_path, "0::/", files))
        watch(1 << 16, 3_000_000, 3_000_000 * 3_000_000 // (1 << 16))
    [said] = warned
    assert "about 3 million rows" in said and "needs about 330 MB" in said and "and 105 MB is free here" in said, said


def test_a_docker_memory_limit_on_a_cgroup_v1_host_is_warned_about(tmp_path: Path) -> None:
    warned: list[str] = []
    files = {"memory/docker/abc/memory.limit_in_bytes": str(256 << 20),
             "memory/docker/abc/memory.usage_in_bytes": str(100 << 20),
             "memory/docker/abc/memory.stat": v1_stat(90 << 20, 10 << 20),
             "memory/memory.limit_in_bytes": V1_UNLIMITED}
    watch = MemoryWatch("day.csv", warned.append, room=lambda: tree(tmp_path, "4:memory:/docker/abc", files))
    watch(1 << 16, 1_000_000, 3_000_000 * 1_000_000 // (1 << 16))
    [said] = warned
    assert "and 174 MB is free here" in said, said


SIZES = st.integers(min_value=0, max_value=64 * GIB)


@settings(max_examples=60, deadline=None)
@given(limit=SIZES, anon=SIZES, cache=SIZES, freed=SIZES)
def test_page_cache_only_ever_adds_room_up_to_the_limit(limit: int, anon: int, cache: int, freed: int) -> None:
    """Whatever the limit and use: the room is at least what the limit less the whole usage leaves, at most the
    limit itself, and cache that the same usage holds in place of its own memory never leaves less."""
    with tempfile.TemporaryDirectory() as root:
        def room(cached: int) -> int | None:
            return tree(Path(root), "0::/", {"memory.max": str(limit), "memory.current": str(anon + cache),
                                             "memory.stat": v2_stat(anon + cache - cached, cached)})

        found, more = room(cache), room(min(anon + cache, cache + freed))
    assert found is not None and more is not None
    assert limit - (anon + cache) <= found <= limit
    assert more >= found
