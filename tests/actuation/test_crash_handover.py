"""The leader's pod crashes the ways pods crash: the kernel's OOM killer takes one process of the container (a
serving worker, or the refresh process that holds the Lease). Two real adapter processes on one Lease; how long
the other replica waits is counted in its own Lease attempts, not timed.

A follower tries the Lease every retry period (jittered up to 2.2 x); an expired Lease takes it
`lease duration / (2.2 x retry period)` attempts at least, a released one a single attempt."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.actuation.test_two_adapters import (
    LOAD,
    Adapter,
    exporters,
    healthy,
    holder,
    runtime_files,
    start_adapter,
    wait_for,
)
from tests.fakes.kube import FakeKubeApi
from tests.fakes.kube.faults import RecordedRequest
from tests.support.processes import serving_workers

__all__ = ["exporters"]  # the fixture, used by name

pytestmark = pytest.mark.slow

LEASE_S, RENEW_S, RETRY_S = 8.0, 5.0, 0.25
LONG_LEASE = ["--leader-elect-lease-duration", str(LEASE_S), "--leader-elect-renew-deadline", str(RENEW_S),
              "--leader-elect-retry-period", str(RETRY_S)]
EXPIRY_ATTEMPTS = int(LEASE_S / (2.2 * RETRY_S))  # 14: the fewest attempts that outlast an unreleased Lease


def lease_reads(requests: list[RecordedRequest], adapter: Adapter) -> int:
    return sum(1 for r in requests if r.resource == "leases" and r.method == "GET"
               and f"({adapter.identity})" in r.headers.get("User-Agent", ""))


def released_by(requests: list[RecordedRequest], adapter: Adapter) -> bool:
    """Whether `adapter` wrote the Lease with no holder (its release)."""
    return any(r.resource == "leases" and r.method == "PUT" and r.status == 200 and isinstance(r.body, dict)
               and not (r.body.get("spec") or {}).get("holderIdentity")
               and f"({adapter.identity})" in r.headers.get("User-Agent", "") for r in requests)


def running(pid: int) -> bool:
    """Alive and not a zombie (an exited child not yet reaped by whoever inherited it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@contextlib.asynccontextmanager
async def leader_and_follower(kube: FakeKubeApi, exporters: str, tmp_path: Path,
                              *args: str) -> AsyncIterator[tuple[Adapter, Adapter]]:
    """Two real adapters on one Lease (`args` their flags), once one leads: (leader, follower); both killed after."""
    targets, kubeconfig = runtime_files(kube, exporters, tmp_path)
    adapters = [await start_adapter(tmp_path, i, targets, kubeconfig, *args) for i in range(2)]
    try:
        for adapter in adapters:
            await healthy(adapter)
        await wait_for(lambda: all(a.identity for a in adapters) and holder(kube) is not None, 15, "one leads")
        leader = next(a for a in adapters if a.identity == holder(kube))
        yield leader, next(a for a in adapters if a is not leader)
    finally:
        for adapter in adapters:
            await adapter.stop(signal.SIGKILL)


async def test_an_oom_killed_serving_worker_hands_the_lease_over_at_the_followers_next_attempt(
    kube: FakeKubeApi, exporters: str, tmp_path: Path
) -> None:
    async with leader_and_follower(kube, exporters, tmp_path, *LONG_LEASE) as (leader, follower):
        await wait_for(lambda: f"held by {leader.identity}, renewed " in follower.log.read_text(), 15,
                       "the follower names the leader it waits for")
        mark = len(kube.requests)
        os.kill(serving_workers(leader.process.pid)[0], signal.SIGKILL)
        await wait_for(lambda: leader.process.returncode is not None, 20, "the leader's pod restarts")
        assert leader.process.returncode == 1, "Kubernetes restarts a container that exits non-zero"
        await wait_for(lambda: holder(kube) == follower.identity, 3 * LEASE_S, "the follower takes over")
        assert released_by(kube.requests[mark:], leader), "the dying leader released the Lease"
        attempts = lease_reads(kube.requests[mark:], follower)
        assert attempts < EXPIRY_ATTEMPTS, f"{attempts} attempts: the follower waited for the Lease to expire"
        # Said once the follower has read its write's answer, which the fake API stores before answering: read as
        # soon as the fake held the follower's name, the line was not yet said on a loaded machine.
        taken = f"became the leader, taking over the Lease {leader.identity} released"
        await wait_for(lambda: taken in follower.log.read_text(), 15, "the follower says whose released Lease it took")


async def test_an_oom_killed_leader_is_replaced_once_its_lease_expires_and_its_workers_stop_serving(
    kube: FakeKubeApi, exporters: str, tmp_path: Path
) -> None:
    async with leader_and_follower(kube, exporters, tmp_path, *LONG_LEASE) as (leader, follower):
        workers = serving_workers(leader.process.pid)
        mark = len(kube.requests)
        await leader.stop(signal.SIGKILL)
        await wait_for(lambda: holder(kube) == follower.identity, 4 * LEASE_S, "the follower takes over")
        # A killed process releases nothing: the follower took over only once the Lease had expired.
        assert not released_by(kube.requests[mark:], leader)
        assert lease_reads(kube.requests[mark:], follower) >= EXPIRY_ATTEMPTS
        # Its log says whom it waited for, and that the Lease expired: a replica died (a WARNING). Said once it has
        # read its write's answer, which the fake API stores before answering: waited for, not read at once.
        taken = f"became the leader, taking over from {leader.identity}: the Lease expired (not renewed for "
        await wait_for(lambda: taken in follower.log.read_text(), 15, "the follower says whose expired Lease it took")
        said = follower.log.read_text()
        assert f"held by {leader.identity}, renewed " in said
        assert any("WARNING" in line and taken in line for line in said.splitlines()), said
        # Its serving worker does not go on serving values that no longer change: the pod's container ends.
        await wait_for(lambda: not any(running(pid) for pid in workers), 20, "the killed leader's workers exit")


async def test_a_frozen_leader_that_wakes_after_the_takeover_writes_nothing_more(
    kube: FakeKubeApi, exporters: str, tmp_path: Path
) -> None:
    # A node that freezes (a live migration, a hung hypervisor) stops the leader's processes without a signal
    # they could act on; when it thaws, another replica has led for a while and the old one must not write.
    async with leader_and_follower(kube, exporters, tmp_path) as (leader, follower):
        await wait_for(lambda: len(pod_writes(kube.requests, leader)) >= len(LOAD), 15, "the leader writes the pods")
        frozen = [leader.process.pid, *serving_workers(leader.process.pid)]
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        try:
            await wait_for(lambda: holder(kube) == follower.identity, 30, "the follower takes over")
            await wait_for(lambda: len(pod_writes(kube.requests, follower)) >= len(LOAD), 15,
                           "the new leader writes the pods")
        finally:
            for pid in frozen:
                os.kill(pid, signal.SIGCONT)
        thawed = len(kube.requests)
        await wait_for(lambda: lease_reads(kube.requests[thawed:], leader) >= 5, 15,
                       "the thawed replica tries the Lease again, as a follower")
        assert pod_writes(kube.requests[thawed:], leader) == []
        assert holder(kube) == follower.identity


def pod_writes(requests: list[RecordedRequest], adapter: Adapter) -> list[str]:
    return [r.path for r in requests if r.resource == "pods" and r.method == "PATCH"
            and f"({adapter.identity})" in r.headers.get("User-Agent", "")]
