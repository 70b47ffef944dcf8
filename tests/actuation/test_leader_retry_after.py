"""Leader election against an API server that throttles (429 with `Retry-After`, as API Priority and Fairness
answers): a replica must not ask again before the server said it may, and a leader must still stop writing at
its renew deadline when the wait would run past it. The elector runs its real loop against the fake API on a
clock the test steps (each of the elector's sleeps moves it), so what is counted is the Lease calls made at
each moment of that clock, never how long anything took."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import pytest

from autoscaler.actuation.leader import LeaseElector
from autoscaler.actuation.lease_timing import LeaseConfig
from autoscaler.kube.client import JSON, KubeClient
from autoscaler.kube.errors import KubeApiError
from tests.actuation.conftest import SteppedClock
from tests.fakes.kube import FakeKubeApi

LEASE_S, RENEW_S, RETRY_S = 15.0, 10.0, 2.0  # the defaults
T = TypeVar("T")


@dataclass
class LeaseCalls:
    """The Lease calls one replica makes, stamped with its own clock, passed through to the real client."""

    client: KubeClient
    clock: SteppedClock
    calls: list[tuple[float, str, int | None]] = field(default_factory=list)  # (clock, call, status: None = ok)

    async def _call(self, name: str, call: Callable[[], Awaitable[T]]) -> T:
        at = self.clock.now
        try:
            result = await call()
        except KubeApiError as error:
            self.calls.append((at, name, error.status))
            raise
        self.calls.append((at, name, None))
        return result

    async def get_lease(self, namespace: str, name: str) -> JSON | None:
        return await self._call("get", lambda: self.client.get_lease(namespace, name))

    async def create_lease(self, namespace: str, lease: JSON) -> JSON:
        return await self._call("create", lambda: self.client.create_lease(namespace, lease))

    async def replace_lease(self, namespace: str, name: str, lease: JSON) -> JSON:
        return await self._call("replace", lambda: self.client.replace_lease(namespace, name, lease))

    def at(self, start: float, end: float) -> list[tuple[float, str, int | None]]:
        """The calls made at `start <= clock < end`."""
        return [call for call in self.calls if start <= call[0] < end]


class Replica:
    """An elector's real `run()` on a stepped clock: each sleep moves the clock on, lets the rest of the world
    (`on_sleep`, given the clock: another replica's Lease writes) act at that moment, and yields once."""

    def __init__(self, client: KubeClient, identity: str, clock: SteppedClock,
                 on_sleep: Callable[[float], None] = lambda now: None) -> None:
        self.clock = clock
        self._on_sleep = on_sleep
        self.store = LeaseCalls(client, clock)
        config = LeaseConfig(namespace="ml", name="modelmesh-autoscaler", identity=identity,
                             lease_duration_s=LEASE_S, renew_deadline_s=RENEW_S, retry_period_s=RETRY_S)
        self.elector = LeaseElector(self.store, config, clock=clock, wall_clock=lambda: 1.7e9 + clock.now,
                                    sleep=self._sleep, rand=lambda: 0.0)
        self.changes: list[tuple[bool, float]] = []
        self.elector.add_listener(lambda leading: self.changes.append((leading, clock.now)))
        self.task: asyncio.Task[None] | None = None

    async def _sleep(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self._on_sleep(self.clock.now)
        await asyncio.sleep(0.001)  # the API server's turn

    def start(self) -> None:
        self.task = asyncio.create_task(self.elector.run())

    async def stop(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await self.task


@pytest.fixture
async def replicas() -> AsyncIterator[list[Replica]]:
    started: list[Replica] = []
    yield started
    for replica in started:
        await replica.stop()


async def until(condition: Callable[[], bool], what: str) -> None:
    try:
        async with asyncio.timeout(30):
            while not condition():
                await asyncio.sleep(0.005)
    except TimeoutError:
        raise AssertionError(f"never: {what}") from None


def throttled(replica: Replica) -> float:
    """The clock of the replica's throttled call (the first 429)."""
    return next(at for at, _, status in replica.store.calls if status == 429)


async def test_a_follower_asks_for_the_lease_again_only_after_the_servers_retry_after(
    kube: FakeKubeApi, kube_client: KubeClient, replicas: list[Replica]
) -> None:
    clock = SteppedClock()
    holder = Replica(kube_client, "a", clock)
    assert await holder.elector.try_acquire_or_renew()  # "a" holds the Lease and is not running: b waits
    follower = Replica(kube_client, "b", clock)
    kube.fail("/leases", 429, times=1, method="GET", retry_after=7)
    follower.start()
    replicas.append(follower)

    await until(lambda: len(follower.store.calls) >= 3, "the follower tries again after the 429")

    start = throttled(follower)
    assert follower.store.at(start, start + 7) == [(start, "get", 429)], \
        f"asked again before the server's Retry-After of 7 s: {follower.store.calls}"


@pytest.mark.parametrize(
    ("retry_after", "leads_on"),
    [(5, True), (30, False)],
    ids=["over before the renew deadline: renews after it", "past the renew deadline: stops at the deadline"],
)
async def test_a_leader_renews_only_after_the_servers_retry_after_and_stops_at_its_renew_deadline(
    kube: FakeKubeApi, kube_client: KubeClient, replicas: list[Replica], retry_after: int, leads_on: bool
) -> None:
    clock = SteppedClock()
    leader = Replica(kube_client, "a", clock)
    leader.start()
    replicas.append(leader)
    await until(lambda: leader.elector.is_leader, "it leads")
    kube.fail("/leases", 429, times=1 if leads_on else None, method="GET", retry_after=retry_after)

    def renewed_after_the_429_or_stopped() -> bool:
        return len(leader.changes) > 1 or any(
            status is None and at > throttled(leader) for at, _, status in leader.store.calls
            if any(s == 429 for *_, s in leader.store.calls))

    await until(renewed_after_the_429_or_stopped, "it renews again, or stops leading")

    start = throttled(leader)
    renewed = max(at for at, call, status in leader.store.calls if call in ("create", "replace") and status is None
                  and at < start)  # the start of the last renewal before the 429 ...
    deadline = renewed + RENEW_S  # ... from which the renew deadline counts
    assert leader.store.at(start, min(start + retry_after, deadline)) == [(start, "get", 429)], \
        f"asked again before the server's Retry-After of {retry_after} s: {leader.store.calls}"
    if leads_on:
        assert [leading for leading, _ in leader.changes] == [True], "it keeps leading"
        assert any(status is None for at, _, status in leader.store.at(start + retry_after, deadline)), \
            "it renews once the Retry-After has passed"
    else:
        assert leader.changes[1][0] is False
        assert leader.changes[1][1] <= deadline, "it stops writing by its renew deadline, not after"
