"""Leader election against what happens to a Lease in a real cluster: replicas whose wall clocks disagree, and
a Lease deleted by a user (`kubectl delete lease`) while it is held."""

from __future__ import annotations

from autoscaler.actuation.leader import LeaseElector
from autoscaler.actuation.lease_timing import LeaseConfig
from autoscaler.kube.client import KubeClient
from tests.actuation.conftest import SteppedClock
from tests.fakes.kube import FakeKubeApi


def elector(client: KubeClient, identity: str, clock: SteppedClock, wall_offset_s: float = 0.0) -> LeaseElector:
    config = LeaseConfig(namespace="ml", name="modelmesh-autoscaler", identity=identity)
    return LeaseElector(client, config, clock=clock, wall_clock=lambda: 1_700_000_000.0 + clock.now + wall_offset_s)


async def lease_deleted_under(kube: FakeKubeApi, kube_client: KubeClient,
                              clock: SteppedClock) -> tuple[LeaseElector, LeaseElector]:
    """"a" leads and "b" has seen it lead; then the Lease is deleted (a cleanup, a namespace recreated):
    (leader, follower)."""
    leader = elector(kube_client, "a", clock)
    follower = elector(kube_client, "b", clock)
    assert await leader.try_acquire_or_renew()
    assert not await follower.try_acquire_or_renew()
    kube.delete_object("leases", "ml", "modelmesh-autoscaler")
    return leader, follower


async def test_wall_clocks_an_hour_apart_neither_steal_nor_delay_a_takeover(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    """The leader's clock is an hour behind, the follower's an hour ahead: the renewTime the follower reads is
    two hours old by its clock. Only the follower's own count of how long the record stood still counts."""
    leader = elector(kube_client, "behind", clock, wall_offset_s=-3600)
    follower = elector(kube_client, "ahead", clock, wall_offset_s=+3600)
    assert await leader.try_acquire_or_renew()
    for _ in range(30):  # a minute of renewals
        assert not await follower.try_acquire_or_renew()
        clock.advance(2)
        assert await leader.try_acquire_or_renew()

    # The leader dies after that last renewal: the follower, trying every 2 s, takes over one lease duration
    # (15 s) after it first saw that renewal on its own clock: between 15 and 17 s after the renewal.
    last_renewal = clock.now
    while not await follower.try_acquire_or_renew():
        clock.advance(2)
    assert 15 <= clock.now - last_renewal <= 17


async def test_a_lease_deleted_while_held_is_recreated_by_its_leader(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    leader, follower = await lease_deleted_under(kube, kube_client, clock)
    clock.advance(2)
    assert await leader.try_acquire_or_renew()
    assert not await follower.try_acquire_or_renew()
    lease = kube.get("leases", "ml", "modelmesh-autoscaler")
    assert lease is not None and lease["spec"]["holderIdentity"] == "a"


async def test_a_lease_deleted_and_taken_by_a_follower_first_ends_the_old_term_at_its_next_attempt(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    leader, follower = await lease_deleted_under(kube, kube_client, clock)
    assert not await follower.try_acquire_or_renew()  # no Lease, but "a" was seen holding it just now
    clock.advance(15)  # a lease duration in which the leader made no attempt (stalled, cut off)
    assert await follower.try_acquire_or_renew()  # created
    clock.advance(2)
    assert not await leader.try_acquire_or_renew()
    assert leader.holder == "b"
