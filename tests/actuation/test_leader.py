"""Lease-based leader election against the fake API server: the single steps with stepped clocks (what the
Lease holds, who may take it when), then the loop with short real durations (takeover when the leader dies,
leadership lost when renewal fails, release on shutdown)."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from autoscaler.actuation.leader import LeaseElector
from autoscaler.actuation.lease_timing import LeaseConfig
from autoscaler.kube.client import JSON, KubeClient
from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.timestamps import micro_time
from tests.actuation.conftest import SteppedClock
from tests.fakes.kube import FakeKubeApi

MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def lease_config(identity: str, **durations: float) -> LeaseConfig:
    return LeaseConfig(namespace="ml", name="modelmesh-autoscaler", identity=identity, **durations)


def elector(client: KubeClient, identity: str, *, clock: SteppedClock | None = None) -> LeaseElector:
    if clock is None:
        return LeaseElector(client, lease_config(identity))
    return LeaseElector(client, lease_config(identity), clock=clock, wall_clock=lambda: clock.now)


def spec(kube: FakeKubeApi) -> dict[str, Any]:
    lease = kube.get("leases", "ml", "modelmesh-autoscaler")
    assert lease is not None
    result: dict[str, Any] = lease["spec"]
    return result


@pytest.mark.parametrize(
    ("durations", "message"),
    [
        ({"lease_duration_s": 10, "renew_deadline_s": 10}, "lease-duration must be greater"),
        ({"renew_deadline_s": 2.4, "retry_period_s": 2}, "renew-deadline must be greater than 1.2"),
        ({"retry_period_s": 0}, "retry-period must be greater than 0"),
    ],
    ids=["lease not above renew deadline", "renew deadline within retry jitter", "no retry period"],
)
def test_durations_are_checked_like_client_go(durations: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        lease_config("a", **durations)


def test_micro_time_always_has_six_fraction_digits_in_utc() -> None:
    assert micro_time(1_700_000_000.0) == "2023-11-14T22:13:20.000000Z"
    assert micro_time(1_700_000_000.25) == "2023-11-14T22:13:20.250000Z"


async def test_the_first_candidate_creates_the_lease(kube: FakeKubeApi, kube_client: KubeClient) -> None:
    a = elector(kube_client, "a")

    assert await a.try_acquire_or_renew()

    lease = spec(kube)
    assert lease["holderIdentity"] == "a"
    assert lease["leaseDurationSeconds"] == 15
    assert lease["leaseTransitions"] == 0
    assert MICRO_TIME.match(lease["acquireTime"]) and MICRO_TIME.match(lease["renewTime"])


async def test_renewal_moves_only_the_renew_time(kube: FakeKubeApi, kube_client: KubeClient,
                                                 clock: SteppedClock) -> None:
    clock.now = 1_700_000_000.0
    a = elector(kube_client, "a", clock=clock)
    await a.try_acquire_or_renew()
    clock.advance(2.5)

    assert await a.try_acquire_or_renew()

    assert spec(kube) == {"holderIdentity": "a", "leaseDurationSeconds": 15, "leaseTransitions": 0,
                          "acquireTime": "2023-11-14T22:13:20.000000Z", "renewTime": "2023-11-14T22:13:22.500000Z"}


async def test_a_held_lease_is_taken_only_after_a_lease_duration_without_change(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    a = elector(kube_client, "a", clock=clock)
    b = elector(kube_client, "b", clock=clock)
    await a.try_acquire_or_renew()

    assert not await b.try_acquire_or_renew()  # t=0: b sees a's record
    clock.advance(10)
    await a.try_acquire_or_renew()  # t=10: a renews
    clock.advance(10)
    assert not await b.try_acquire_or_renew()  # t=20: b sees the renewal; its 15 s start again from here
    clock.advance(14.9)
    assert not await b.try_acquire_or_renew()
    clock.advance(0.1)
    assert await b.try_acquire_or_renew()  # t=35: no change seen for 15 s on b's own clock

    lease = spec(kube)
    assert lease["holderIdentity"] == "b"
    assert lease["leaseTransitions"] == 1
    assert lease["acquireTime"] == lease["renewTime"]


async def test_a_deleted_lease_is_taken_by_a_follower_only_after_a_lease_duration(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    """Someone deletes the Lease (a cleanup script, a namespace being re-created) while `a` leads. `a` still
    takes itself for the leader until its next attempt, up to a retry period (or a renew deadline) later: a
    follower that created the Lease at once led beside it, both writing. The follower treats the holder it last
    saw as holding until a lease duration has passed on its own clock; `a` creates the Lease again meanwhile."""
    a = elector(kube_client, "a", clock=clock)
    b = elector(kube_client, "b", clock=clock)
    await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()  # t=0: b sees a's record
    kube.delete_object("leases", "ml", "modelmesh-autoscaler")
    clock.advance(1)
    assert not await b.try_acquire_or_renew()  # t=1: the Lease is gone; a may still be writing
    assert kube.get("leases", "ml", "modelmesh-autoscaler") is None
    clock.advance(14)
    assert await b.try_acquire_or_renew()  # t=15: a lease duration since a was last seen holding it
    assert spec(kube)["holderIdentity"] == "b"


async def test_two_candidates_racing_for_a_free_lease_yield_one_leader(
    kube: FakeKubeApi, kube_client: KubeClient
) -> None:
    for _ in range(2):  # once creating the Lease, once taking over a released one
        results = await asyncio.gather(*(elector(kube_client, name).try_acquire_or_renew() for name in "abcd"))
        assert sorted(results) == [False, False, False, True]
        winner = spec(kube)["holderIdentity"]
        assert await elector(kube_client, winner).release()


async def test_release_lets_a_follower_take_over_at_once(kube: FakeKubeApi, kube_client: KubeClient,
                                                         clock: SteppedClock) -> None:
    a = elector(kube_client, "a", clock=clock)
    b = elector(kube_client, "b", clock=clock)
    await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()

    assert await a.release()
    released = spec(kube)
    assert released.get("holderIdentity") in (None, "")
    assert released["leaseDurationSeconds"] == 1
    assert released["leaseTransitions"] == 0
    assert await b.try_acquire_or_renew()
    assert spec(kube)["leaseTransitions"] == 1


async def test_release_leaves_a_lease_held_by_another_alone(kube: FakeKubeApi, kube_client: KubeClient) -> None:
    await elector(kube_client, "a").try_acquire_or_renew()

    assert not await elector(kube_client, "b").release()
    assert spec(kube)["holderIdentity"] == "a"


async def test_api_failures_are_a_failed_attempt_not_an_exception(kube: FakeKubeApi, kube_client: KubeClient) -> None:
    kube.fail("/leases", 500, times=None)

    assert not await elector(kube_client, "a").try_acquire_or_renew()


async def test_a_failure_that_repeats_is_logged_once_and_the_recovery_too(
    kube: FakeKubeApi, kube_client: KubeClient, caplog: pytest.LogCaptureFixture,
) -> None:
    """An elector retries every 2 s or so: missing RBAC on Leases, or an API server down for an hour, must not
    write a warning each time, only when the failure starts or changes, and a line when the API answers again."""
    candidate = elector(kube_client, "a")
    kube.fail("/leases", 403, times=None, message="leases.coordination.k8s.io is forbidden")
    with caplog.at_level(logging.INFO, logger="autoscaler"):
        for _ in range(5):
            assert not await candidate.try_acquire_or_renew()
        kube.clear_faults()
        kube.fail("/leases", 503, times=None)
        for _ in range(3):
            assert not await candidate.try_acquire_or_renew()
        kube.clear_faults()
        assert await candidate.try_acquire_or_renew()
    shown = [(r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.INFO]
    assert [level for level, _ in shown] == ["WARNING", "WARNING", "INFO"], shown
    assert "forbidden" in shown[0][1] and "503" in shown[1][1] and "answers again" in shown[2][1]


# ---- the loop, with short real durations ------------------------------------------------------------------

LEASE_S, RENEW_S, RETRY_S = 1.0, 0.6, 0.1


def short_lease(identity: str) -> LeaseConfig:
    return lease_config(identity, lease_duration_s=LEASE_S, renew_deadline_s=RENEW_S, retry_period_s=RETRY_S)


class Switchable:
    """Passes Lease calls through until `dead`: then every call fails, as from a crashed or cut-off replica."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.dead = False

    async def _call(self, call: Callable[[], Any]) -> Any:
        if self.dead:
            raise KubeApiError("replica is gone")
        return await call()

    async def get_lease(self, namespace: str, name: str) -> JSON | None:
        result: JSON | None = await self._call(lambda: self.client.get_lease(namespace, name))
        return result

    async def create_lease(self, namespace: str, lease: JSON) -> JSON:
        result: JSON = await self._call(lambda: self.client.create_lease(namespace, lease))
        return result

    async def replace_lease(self, namespace: str, name: str, lease: JSON) -> JSON:
        result: JSON = await self._call(lambda: self.client.replace_lease(namespace, name, lease))
        return result


class Running:
    """An elector's `run()` as a task, with its leadership changes recorded."""

    def __init__(self, elector: LeaseElector) -> None:
        self.elector = elector
        self.changes: list[tuple[bool, float]] = []
        elector.add_listener(lambda leading: self.changes.append((leading, time.monotonic())))
        self.task = asyncio.create_task(elector.run())

    async def stop(self) -> None:
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task


async def wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> float:
    """Poll until true; the monotonic time it became true."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)
    return time.monotonic()


@pytest.fixture
async def running() -> AsyncIterator[list[Running]]:
    started: list[Running] = []
    yield started
    for run in started:
        if not run.task.done():
            await run.stop()


async def test_one_of_two_candidates_leads_and_shutdown_releases(
    kube: FakeKubeApi, kube_client: KubeClient, running: list[Running]
) -> None:
    a = Running(LeaseElector(kube_client, short_lease("a")))
    running.append(a)
    await wait_for(lambda: a.elector.is_leader)
    b = Running(LeaseElector(kube_client, short_lease("b")))
    running.append(b)
    await asyncio.sleep(0.5)
    assert a.elector.is_leader and not b.elector.is_leader
    assert [leading for leading, _ in a.changes] == [True]

    await a.stop()

    assert [leading for leading, _ in a.changes] == [True, False]
    await wait_for(lambda: b.elector.is_leader, timeout=1.0)  # released: no need to wait out the lease


async def test_a_follower_takes_over_within_a_lease_duration_when_the_leader_dies(
    kube: FakeKubeApi, kube_client: KubeClient, running: list[Running]
) -> None:
    store = Switchable(kube_client)
    a = Running(LeaseElector(store, short_lease("a")))
    running.append(a)
    await wait_for(lambda: a.elector.is_leader)
    b = Running(LeaseElector(kube_client, short_lease("b")))
    running.append(b)
    await asyncio.sleep(0.3)

    store.dead = True
    died = time.monotonic()
    a_stopped = await wait_for(lambda: not a.elector.is_leader)
    b_leads = await wait_for(lambda: b.elector.is_leader)

    assert a_stopped - died <= RENEW_S + RETRY_S + 0.3
    assert a_stopped < b_leads  # never two writers
    # b counts the lease duration from when it first saw a's last renewal (up to one jittered retry period
    # late) and notices the expiry at its next retry: one lease duration plus two retry periods at most.
    assert b_leads - died <= LEASE_S + 2 * 2.2 * RETRY_S + 0.3
    assert spec(kube)["holderIdentity"] == "b"
    assert spec(kube)["leaseTransitions"] == 1


async def test_the_leader_stops_when_it_cannot_renew_and_leads_again_when_it_can(
    kube: FakeKubeApi, kube_client: KubeClient, running: list[Running]
) -> None:
    a = Running(LeaseElector(kube_client, short_lease("a")))
    running.append(a)
    await wait_for(lambda: a.elector.is_leader)

    kube.fail("/leases", 503, times=None)
    await wait_for(lambda: not a.elector.is_leader, timeout=RENEW_S + 0.5)
    kube.clear_faults()
    await wait_for(lambda: a.elector.is_leader)

    assert [leading for leading, _ in a.changes] == [True, False, True]


async def test_a_leader_that_finds_another_holder_stops_at_once(
    kube: FakeKubeApi, kube_client: KubeClient, running: list[Running]
) -> None:
    patient = lease_config("a", lease_duration_s=30, renew_deadline_s=20, retry_period_s=0.1)
    a = Running(LeaseElector(kube_client, patient))
    running.append(a)
    await wait_for(lambda: a.elector.is_leader)

    def usurp(lease: dict[str, Any]) -> None:
        lease["spec"]["holderIdentity"] = "intruder"

    kube.update_object("leases", "ml", "modelmesh-autoscaler", usurp)
    await wait_for(lambda: not a.elector.is_leader, timeout=1.0)  # not after the 20 s renew deadline
