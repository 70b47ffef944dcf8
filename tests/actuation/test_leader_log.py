"""What an on-call engineer reads in the surviving replica's log after a failover.

A reviewer killed the leader of two replicas and read the other's log: `replica-b trying to acquire`, 19 s of
nothing, then `replica-b became the leader`. Neither who had held the Lease nor why it changed hands (released by
a clean stop, or left to expire by a replica that died) was in it. The follower now names the holder once (and
when its record expires: its `renewTime` plus `leaseDurationSeconds`), again only when the holder changes, and the
takeover line names the previous holder and why: released (INFO), or expired (a WARNING: a replica died or lost
the API server).

The follower runs its real loop against the fake API on a clock the test steps (each of its sleeps is one retry
period, 2 s, no jitter); the other replicas are Lease records the test writes at those moments, as
coordination.k8s.io/v1 holds them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.actuation.leader import LeaseElector
from autoscaler.actuation.lease_timing import LeaseConfig
from autoscaler.kube.client import KubeClient
from tests.actuation.conftest import SteppedClock
from tests.actuation.lease_replica import Replica, until
from tests.fakes.kube import FakeKubeApi
from tests.support.log_lines import LineCatcher

LEASE = "lease ml/modelmesh-autoscaler"
START = SteppedClock().now


def record(holder: str, renewed: str, transitions: int, duration: int = 15) -> dict[str, Any]:
    """A Lease's spec as a replica writes it (client-go's record; `holder` "" is a released Lease)."""
    spec: dict[str, Any] = {"leaseDurationSeconds": duration, "acquireTime": renewed, "renewTime": renewed,
                            "leaseTransitions": transitions}
    if holder:
        spec["holderIdentity"] = holder
    return spec


def write(kube: FakeKubeApi, spec: dict[str, Any]) -> None:
    kube.put_object("leases", {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                               "metadata": {"name": "modelmesh-autoscaler", "namespace": "ml"}, "spec": spec})


class Log:
    """The elector's lines at INFO and above, with their level, as the log shows them."""

    def __init__(self, caplog: pytest.LogCaptureFixture) -> None:
        self._caplog = caplog

    def lines(self) -> list[tuple[str, str]]:
        return [(r.levelname, r.getMessage()) for r in self._caplog.records
                if r.name == "autoscaler.actuation.leader" and r.levelno >= logging.INFO]


@pytest.fixture
def log(caplog: pytest.LogCaptureFixture) -> Log:
    caplog.set_level(logging.INFO, logger="autoscaler.actuation.leader")
    return Log(caplog)


async def follow(kube_client: KubeClient, replicas: list[Replica], world: Callable[[float], None]) -> Replica:
    """replica-b's real loop until it leads; `world(seconds since it started)` writes the others' Lease."""
    clock = SteppedClock()
    follower = Replica(kube_client, "replica-b", clock, on_sleep=lambda now: world(now - START))
    follower.start()
    replicas.append(follower)
    await until(lambda: follower.elector.is_leader, "replica-b leads")
    return follower


async def test_a_follower_names_each_holder_once_and_the_expired_one_it_takes_over_from(
    kube: FakeKubeApi, kube_client: KubeClient, replicas: list[Replica], log: Log
) -> None:
    """replica-a renews every 2 s until it hands over to replica-c at t=20; replica-c renews until t=30 and dies.
    replica-b last saw the Lease change at t=30 and takes it at its first retry past t=30+15: t=46."""
    write(kube, record("replica-a", "2026-12-07T05:00:00.000000Z", transitions=3))

    def world(t: float) -> None:
        if t < 20:
            write(kube, record("replica-a", f"2026-12-07T05:00:{t:02.0f}.000000Z", transitions=3))
        elif t <= 30:
            write(kube, record("replica-c", f"2026-12-07T05:00:{t:02.0f}.500000Z", transitions=4))

    await follow(kube_client, replicas, world)

    assert log.lines() == [
        ("INFO", f"{LEASE}: replica-b trying to acquire"),
        ("INFO", f"{LEASE}: held by replica-a, renewed 2026-12-07T05:00:00.000000Z: expires "
                 "2026-12-07T05:00:15.000000Z unless renewed (leaseDurationSeconds 15); replica-b waits"),
        ("INFO", f"{LEASE}: now held by replica-c (was replica-a), renewed 2026-12-07T05:00:20.500000Z: expires "
                 "2026-12-07T05:00:35.500000Z unless renewed (leaseDurationSeconds 15); replica-b waits"),
        ("WARNING", f"{LEASE}: replica-b became the leader, taking over from replica-c: the Lease expired "
                    "(not renewed for 16.0 s, past its leaseDurationSeconds of 15; last renewTime "
                    "2026-12-07T05:00:30.500000Z)"),
    ]


async def test_a_follower_that_takes_over_a_released_lease_names_who_released_it(
    kube: FakeKubeApi, kube_client: KubeClient, replicas: list[Replica], log: Log
) -> None:
    """replica-a stops cleanly at t=6: it releases the Lease (no holder, 1 s, its leaseTransitions kept)."""
    write(kube, record("replica-a", "2026-12-07T05:00:00.000000Z", transitions=3))

    def world(t: float) -> None:
        if t < 6:
            write(kube, record("replica-a", f"2026-12-07T05:00:{t:02.0f}.000000Z", transitions=3))
        elif t == 6:
            write(kube, record("", "2026-12-07T05:00:06.000000Z", transitions=3, duration=1))

    await follow(kube_client, replicas, world)

    assert log.lines()[1:] == [
        ("INFO", f"{LEASE}: held by replica-a, renewed 2026-12-07T05:00:00.000000Z: expires "
                 "2026-12-07T05:00:15.000000Z unless renewed (leaseDurationSeconds 15); replica-b waits"),
        ("INFO", f"{LEASE}: replica-b became the leader, taking over the Lease replica-a released"),
    ]


async def test_a_follower_that_creates_a_deleted_lease_again_names_the_holder_it_last_saw(
    kube: FakeKubeApi, kube_client: KubeClient, replicas: list[Replica], log: Log
) -> None:
    """replica-a last renews at t=2; the Lease is deleted at t=4. replica-b waits out the 15 s from t=2 that it
    last saw replica-a's record change, and creates the Lease at its first retry past t=17: t=18."""
    write(kube, record("replica-a", "2026-12-07T05:00:00.000000Z", transitions=3))

    def world(t: float) -> None:
        if t == 2:
            write(kube, record("replica-a", "2026-12-07T05:00:02.000000Z", transitions=3))
        elif t == 4:
            kube.delete_object("leases", "ml", "modelmesh-autoscaler")

    await follow(kube_client, replicas, world)

    assert log.lines()[-1] == (
        "WARNING", f"{LEASE}: replica-b became the leader, creating the Lease again: it was deleted while replica-a "
                   "held it (not renewed for 16.0 s, past its leaseDurationSeconds of 15; last "
                   "renewTime 2026-12-07T05:00:02.000000Z)")


@pytest.mark.parametrize(
    ("lease", "said"),
    [
        (None, "replica-b became the leader: it created the Lease (there was none)"),
        (record("", "2026-12-07T05:00:00.000000Z", transitions=3, duration=1),
         "replica-b became the leader, taking over a released Lease"),
    ],
    ids=["no Lease", "released before this replica saw its holder"],
)
async def test_a_replica_that_takes_a_free_lease_says_how_it_was_free(
    kube: FakeKubeApi, kube_client: KubeClient, replicas: list[Replica], log: Log, lease: dict[str, Any] | None,
    said: str,
) -> None:
    if lease is not None:
        write(kube, lease)

    await follow(kube_client, replicas, lambda t: None)

    assert log.lines() == [("INFO", f"{LEASE}: replica-b trying to acquire"), ("INFO", f"{LEASE}: {said}")]


HOLDERS = ("replica-a", "replica-c", "replica-d")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(holders=st.lists(st.sampled_from(HOLDERS), min_size=1, max_size=12))
async def test_a_follower_says_who_holds_the_lease_once_per_holder_however_often_it_is_renewed(
    kube: FakeKubeApi, kube_client: KubeClient, holders: list[str]
) -> None:
    """At each of its tries the follower reads the Lease renewed (or handed to another holder, one transition
    more), never expired: it writes one line per holder it finds in turn, naming that holder, and none per retry."""
    clock = SteppedClock()
    follower = LeaseElector(kube_client, LeaseConfig(namespace="ml", name="modelmesh-autoscaler",
                                                     identity="replica-b"), clock=clock)
    catcher = LineCatcher()
    logger = logging.getLogger("autoscaler.actuation.leader")
    logger.addHandler(catcher)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        transitions = 0
        for second, holder in enumerate(holders):
            transitions += second > 0 and holder != holders[second - 1]
            write(kube, record(holder, f"2026-12-07T05:00:{second:02d}.000000Z", transitions=transitions))
            assert not await follower.try_acquire_or_renew()
            clock.advance(2)
    finally:
        logger.removeHandler(catcher)
        logger.setLevel(level)

    turns = [holder for index, holder in enumerate(holders) if index == 0 or holder != holders[index - 1]]
    lines = catcher.take()
    named = [line.split(" held by ", 1)[1].split(",")[0].split(" (was")[0] for line in lines]
    assert named == turns, lines


async def test_a_holder_identity_that_holds_a_line_break_is_named_on_one_line(
    kube: FakeKubeApi, kube_client: KubeClient, log: Log
) -> None:
    """Whoever may update the Lease writes its holderIdentity: written as it is, a line break in it started a line
    that read like the elector's own."""
    forged = f"x\n{LEASE}: replica-b became the leader"
    write(kube, record(forged, "2026-12-07T05:00:00.000000Z", transitions=1))
    follower = LeaseElector(kube_client, LeaseConfig(namespace="ml", name="modelmesh-autoscaler",
                                                     identity="replica-b"))

    assert not await follower.try_acquire_or_renew()

    [(_, line)] = log.lines()
    assert "\n" not in line and line.startswith(f"{LEASE}: held by {forged!r}, renewed "), line
