"""The replica bridge against an API server that fails or throttles its writes, as the server sees it: the
requests a fleet of RuntimeScales sends while API Priority and Fairness answers 429 with `Retry-After`, and the
lists its retries set off while every write fails for a while (docs/design.md, "The RuntimeScale bridge")."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.actuation.bridge import BridgeSettings, ReplicaBridge
from autoscaler.kube.client import KubeClient
from tests.actuation.conftest import SteppedClock, connected
from tests.fakes.kube import FakeKubeApi

NS = "ml"
RUNTIMES = 30


def fleet(kube: FakeKubeApi, runtimes: int = RUNTIMES) -> None:
    """`runtimes` runtimes at 2 replicas, each with a RuntimeScale asking for 3."""
    for i in range(runtimes):
        kube.add_serving_runtime(NS, f"rt{i}", replicas=2)
        kube.add_modelmesh_runtime(NS, f"modelmesh-serving-rt{i}", replicas=2)
        kube.add_runtime_scale(NS, f"rt{i}", replicas=3)


def sent(kube: FakeKubeApi) -> Counter[str]:
    """The requests the fake received: runtime writes ("patch") and RuntimeScale lists ("list")."""
    counts: Counter[str] = Counter()
    for request in kube.requests:
        if request.method == "PATCH" and request.resource == "servingruntimes":
            counts["patch"] += 1
        elif request.method == "GET" and request.path.endswith("/runtimescales"):
            counts["list"] += 1
    return counts


def carried(kube: FakeKubeApi, runtimes: int = RUNTIMES) -> int:
    return sum(kube.serving_runtime_replicas(NS, f"rt{i}") == 3 for i in range(runtimes))


async def test_a_throttled_write_holds_the_bridges_other_writes_for_the_servers_retry_after(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    """API Priority and Fairness throttles the adapter's whole flow, not one object: after a 429 with
    Retry-After the pass sent one more doomed write per RuntimeScale (30 here, 1,000 in a large fleet) into the
    throttled server, and the HPA writes the watch handed over meanwhile went out too."""
    fleet(kube)
    kube.fail(r"/servingruntimes/", status=429, times=None, method="PATCH", retry_after=5)
    bridge = ReplicaBridge(kube_client, namespaces=[NS], clock=clock)

    await bridge.sync()
    assert sent(kube)["patch"] == 1
    kube.update_object("runtimescales", NS, "rt9", lambda o: o["spec"].update(replicas=4))  # an HPA's write
    bridge.wake(kube.stored("runtimescales", NS, "rt9"))
    await bridge.sync_changed()
    clock.advance(4.0)
    await bridge.sync()
    assert sent(kube) == Counter({"patch": 1, "list": 1})  # nothing while the server's wait lasts
    assert bridge.next_pass_in_s() == 1.0

    kube.clear_faults()
    clock.advance(1.0)
    await bridge.sync()
    assert carried(kube) == RUNTIMES - 1 and kube.serving_runtime_replicas(NS, "rt9") == 4


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), failing=st.integers(2, 12))
def test_retries_of_a_failing_fleet_go_out_together_not_one_pass_over_the_fleet_each(seed: int, failing: int) -> None:
    """Every write failing (a webhook or the API server answering 500 for a while): each RuntimeScale's retry
    fell due at its own jittered moment and set off a full pass, three lists of the whole fleet, for it alone:
    a pass per failing RuntimeScale per backoff step, back to back at fleet size. Retries due in the same step
    go out in one pass, never sooner than half their backoff."""
    sent_then, waits = asyncio.run(_retry_for_six_steps(seed, failing))

    # One pass per backoff step (1, 2, 4, 8, 8, 8 s with equal jitter: at least half of each), each of them
    # retrying every RuntimeScale.
    assert sent_then == Counter({"list": 7, "patch": 7 * failing})
    assert all(wait >= step / 2 for wait, step in zip(waits, (1, 2, 4, 8, 8, 8), strict=True))


async def _retry_for_six_steps(seed: int, failing: int) -> tuple[Counter[str], list[float]]:
    """What a bridge whose every runtime write fails sends over its first pass and six retry passes, and how
    long it waited before each retry pass."""
    clock = SteppedClock()
    async with FakeKubeApi() as kube:
        fleet(kube, failing)
        kube.fail(r"/servingruntimes/", status=500, times=None, method="PATCH")
        async with connected(kube, NS) as client:
            bridge = ReplicaBridge(client, namespaces=[NS], clock=clock, rand=random.Random(seed).random,
                                   settings=BridgeSettings(backoff_base_s=1.0, backoff_cap_s=8.0,
                                                           resync_interval_s=3600.0))
            await bridge.sync()
            waits: list[float] = []
            while len(waits) < 6:
                waits.append(bridge.next_pass_in_s())
                clock.advance(waits[-1])
                await bridge.sync()
        return sent(kube), waits
