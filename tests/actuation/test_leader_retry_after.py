"""Leader election against an API server that throttles (429 with `Retry-After`, as API Priority and Fairness
answers): a replica must not ask again before the server said it may, and a leader must still stop writing at
its renew deadline when the wait would run past it. The elector runs its real loop against the fake API on a
clock the test steps (each of the elector's sleeps moves it), so what is counted is the Lease calls made at
each moment of that clock, never how long anything took."""

from __future__ import annotations

import pytest

from autoscaler.kube.client import KubeClient
from tests.actuation.conftest import SteppedClock
from tests.actuation.lease_replica import RENEW_S, Replica, until
from tests.fakes.kube import FakeKubeApi


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
