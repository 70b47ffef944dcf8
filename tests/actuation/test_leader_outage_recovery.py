"""After an outage of the Kubernetes API, a replica leads again within a try or two of the API's return, whatever
the outage's length and a 503 at the return (an API server still starting) included: the elector tries the Lease
every retry period (2 s, plus up to 1.2 x 2 s of jitter while it waits to acquire), never backing off by the
failures in a row, so no count of the outage's tries delays leadership past what docs/operations.md promises
(a follower's next try, within 4.4 s). The writers' and watches' backoff after an outage
(`backoff.FailuresInARow`) has no counterpart here to get wrong; this holds it so.

The elector's real loop on a clock the test steps (`tests.actuation.lease_replica`); the outage is its Lease calls
going to an address nobody listens on (connection refused: no answer) from one moment of that clock to another.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from autoscaler.kube.client import KubeClient
from tests.actuation.conftest import SteppedClock, connect
from tests.actuation.lease_replica import LeaseCalls, Replica, until
from tests.fakes.kube import FakeKubeApi
from tests.support.ports import free_port

OUTAGE_S = 40.0
NEXT_TRY_S = 4.4
"""A replica's next try of the Lease (docs/operations.md: every 2 s plus up to 1.2 x 2 s of jitter)."""


@pytest.fixture
async def refused(tmp_path: Path) -> AsyncIterator[KubeClient]:
    """A client of an API server that is down: every call refused, no answer."""
    dead = FakeKubeApi(port=free_port())
    client = await connect(dead.write_kubeconfig(tmp_path / "down"), timeout_s=1.0)
    yield client
    await client.close()


class Outage:
    """What the world does at each of a replica's sleeps: its Lease calls (`calls`, set once the replica is made)
    get no answer from `start` for `OUTAGE_S`, then the server answers again, the first Lease call with
    `answers_first` where given."""

    def __init__(self, kube: FakeKubeApi, live: KubeClient, down: KubeClient, start: float,
                 answers_first: int | None) -> None:
        self.kube, self.live, self.down = kube, live, down
        self.start, self.end = start, start + OUTAGE_S
        self.answers_first = answers_first
        self.calls: LeaseCalls | None = None
        self.back = False

    def __call__(self, now: float) -> None:
        assert self.calls is not None
        if self.start <= now < self.end:
            self.calls.client = self.down
        elif now >= self.end and not self.back:
            self.back = True
            self.calls.client = self.live
            if self.answers_first is not None:
                self.kube.fail("/leases", self.answers_first, times=1)


@pytest.mark.parametrize("answers_first", [None, 503], ids=["then-ok", "then-a-503"])
async def test_the_leader_leads_again_within_a_try_or_two_of_the_api_s_return(
    kube: FakeKubeApi, kube_client: KubeClient, refused: KubeClient, replicas: list[Replica],
    answers_first: int | None,
) -> None:
    """It stops leading at its renew deadline during the outage (it cannot renew), and renews its own Lease at its
    first try the server answers with success."""
    clock = SteppedClock()
    start = clock.now + 5.0
    world = Outage(kube, kube_client, refused, start, answers_first)
    leader = Replica(kube_client, "a", clock, on_sleep=world)
    world.calls = leader.store
    leader.start()
    replicas.append(leader)
    await until(lambda: len(leader.changes) >= 3, "it stops leading in the outage and leads again after it")
    assert [leading for leading, _ in leader.changes[:3]] == [True, False, True], leader.changes
    assert leader.changes[1][1] < world.end, "it stopped writing during the outage, at its renew deadline"
    back_after = leader.changes[2][1] - world.end
    tries = 1 if answers_first is None else 2
    assert back_after <= tries * NEXT_TRY_S, f"led again {back_after:.1f} s after the API's return"


@pytest.mark.parametrize("answers_first", [None, 503], ids=["then-ok", "then-a-503"])
async def test_a_follower_takes_over_within_a_try_or_two_of_the_api_s_return(
    kube: FakeKubeApi, kube_client: KubeClient, refused: KubeClient, replicas: list[Replica],
    answers_first: int | None,
) -> None:
    """The holder died as the outage began: the follower saw its Lease before it, and after it (the Lease long
    expired by its own clock) takes over at its first try the server answers with success."""
    clock = SteppedClock()
    holder = Replica(kube_client, "a", clock)
    assert await holder.elector.try_acquire_or_renew()  # "a" holds the Lease, then is gone
    start = clock.now + 1.0
    world = Outage(kube, kube_client, refused, start, answers_first)
    follower = Replica(kube_client, "b", clock, on_sleep=world)
    world.calls = follower.store
    follower.start()
    replicas.append(follower)
    await until(lambda: follower.elector.is_leader, "the follower takes over")
    assert follower.store.calls[0][0] < start, "the follower saw the Lease held before the outage"
    back_after = follower.changes[0][1] - world.end
    tries = 1 if answers_first is None else 2
    assert 0 <= back_after <= tries * NEXT_TRY_S, f"took over {back_after:.1f} s after the API's return"
