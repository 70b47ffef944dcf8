"""The leader election's safety margin, step by step with a stepped clock: slow answers from the (fake) API
server count against the leader's term and against the follower's patience, never for them."""

from __future__ import annotations

import asyncio

import pytest

from autoscaler.actuation import lease_timing
from autoscaler.actuation.leader import LeaseElector
from autoscaler.actuation.lease_timing import LeaseConfig
from autoscaler.kube.client import JSON, KubeClient
from tests.actuation.conftest import SteppedClock
from tests.fakes.kube import FakeKubeApi


class SlowStore:
    """The real client against the fake server, with each call taking `seconds` of the stepped clock: the
    write lands at once, the answer arrives `seconds` later."""

    def __init__(self, client: KubeClient, clock: SteppedClock) -> None:
        self.client, self.clock, self.seconds = client, clock, 0.0

    async def get_lease(self, namespace: str, name: str) -> JSON | None:
        lease = await self.client.get_lease(namespace, name)
        self.clock.advance(self.seconds)
        return lease

    async def create_lease(self, namespace: str, lease: JSON) -> JSON:
        created = await self.client.create_lease(namespace, lease)
        self.clock.advance(self.seconds)
        return created

    async def replace_lease(self, namespace: str, name: str, lease: JSON) -> JSON:
        replaced = await self.client.replace_lease(namespace, name, lease)
        self.clock.advance(self.seconds)
        return replaced


def elector(store: SlowStore, identity: str, clock: SteppedClock) -> LeaseElector:
    config = LeaseConfig(namespace="ml", name="modelmesh-autoscaler", identity=identity)  # 15 s, 10 s, 2 s
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.advance(seconds)
        await asyncio.sleep(0)

    return LeaseElector(store, config, clock=clock, wall_clock=lambda: clock.now, sleep=sleep, rand=lambda: 0.0)


@pytest.mark.parametrize(("lease_s", "renew_s", "expected"), [(15, 10, 2.5), (3, 2.5, 0.25), (60, 10, 5.0)])
def test_client_timeout_is_at_most_half_the_margin(lease_s: float, renew_s: float, expected: float) -> None:
    assert lease_timing.client_timeout_s(lease_s, renew_s) == expected


async def test_a_slow_answer_does_not_lengthen_the_leaders_term(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    store = SlowStore(kube_client, clock)
    a = elector(store, "a", clock)
    changes: list[tuple[bool, float]] = []
    a.add_listener(lambda leading: changes.append((leading, clock.now)))
    task = asyncio.create_task(a.run())
    try:
        while not changes:
            await asyncio.sleep(0)
        # Acquired at 1000. The renewal that starts at 1002 takes 3 s per call: its write lands at once, the
        # answer to it comes at 1008. After that the Lease cannot be reached at all.
        store.seconds = 3.0
        while clock.now < 1008:
            await asyncio.sleep(0)
        kube.fail("leases", status=503, times=None)
        while clock.now < 1012 and len(changes) < 2:
            await asyncio.sleep(0)
        # The term runs to 1002 + 10 by the start of the last successful attempt, not to 1008 + 10.
        assert not a.is_leader
        while len(changes) < 2:
            await asyncio.sleep(0)
        assert changes == [(True, 1000.0), (False, 1012.0)]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        kube.clear_faults()


async def test_a_follower_counts_the_lease_from_when_its_read_returned(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    store = SlowStore(kube_client, clock)
    a, b = elector(SlowStore(kube_client, clock), "a", clock), elector(store, "b", clock)
    assert await a.try_acquire_or_renew()  # t=1000
    store.seconds = 4.0
    assert not await b.try_acquire_or_renew()  # b's read returns at 1004: the record may be that recent
    store.seconds = 0.0
    clock.now = 1018.9
    assert not await b.try_acquire_or_renew()  # 14.9 s after the read returned
    clock.now = 1019.0
    assert await b.try_acquire_or_renew()
