"""/debug says, pod by pod, whether the values count it as a Ready pod and why not as Kubernetes says (reviewers).

Mid-rollout `ready_pods` read 4 beside 7 `pods`, each `ready: true`: the reason named the surge pods, but the pod
list did not say which pods the count left out or why. A crash-looping pod Ready again with no fresh rate read,
left out past the 5 minutes, showed `ready: false` with no word, while kubectl showed it Ready. Each pod now has
`counted` (what `ready_pods` counts: the counts agree with the list) and `reason` (empty where it counts as its
readiness says). And mid-rollout that crash-looping pod was counted again as a stale Ready pod, which held the
values for good: it stays left out. The real refresher, the real API app, /debug over HTTP.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from autoscaler.api.app import build_api_app
from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot
from autoscaler.policies.config import PolicyBook
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.unready_pods import NOT_READY_HOLD_S
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.base import SourceDefaults
from tests.support.clock import SteppedClock

Client = TestClient[Any, Any]
ClientFactory = Callable[..., Awaitable[Client]]
KEY = RuntimeKey("ml", "modelmesh-serving-triton")
DEBUG = f"/debug/runtimes/{KEY.namespace}/{KEY.deployment}"
DESIRED = "modelmesh_desired_replicas"
T0 = 1_700_000_000.0
STEP_S = 15.0
OLD = T0 - 86_400.0  # the old ReplicaSet's pods were created a day ago


def serving(name: str, rps: float | None, now: float, created_at: float | None = OLD) -> PodSample:
    """A Ready pod read a second ago (`rps` None: no rate read, as a restarted ModelMesh's first read)."""
    return PodSample(name, sampled_at=now - 1.0, requests_per_second=rps, queue_delay_s=0.0, lru_age_s=900.0,
                     cache_used_ratio=0.5, models_loaded=1.0, created_at=created_at)


class ScriptedPods(SourceDefaults):
    """One runtime whose pods, and Deployment replicas, the test sets before each refresh."""

    name = "static"
    errors: dict[str, int] = {}

    def __init__(self) -> None:
        self.pods: Callable[[float], tuple[PodSample, ...]] = lambda now: ()
        self.replicas = 0

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        return [RuntimeSnapshot(KEY, self.pods(now), now, replicas=self.replicas)]

    async def close(self) -> None:
        return None


class Adapter:
    """The real refresher over `ScriptedPods` on a stepped clock, its /debug read over HTTP."""

    def __init__(self, client: Client, refresher: Refresher, clock: SteppedClock, source: ScriptedPods) -> None:
        self.client, self.refresher, self.clock, self.source = client, refresher, clock, source

    async def debug_after(self, seconds: float = STEP_S) -> dict[str, Any]:
        self.clock.advance(seconds)
        await self.refresher.refresh_once()
        async with self.client.get(DEBUG) as response:
            assert response.status == 200
            document: dict[str, Any] = await response.json()
            return document


@pytest.fixture
async def adapter(aiohttp_client: ClientFactory) -> Adapter:
    clock = SteppedClock(T0)
    source = ScriptedPods()
    book = PolicyBook(defaults=RuntimePolicy(target_rps_per_pod=100.0, scale_down_tau_s=0.0))
    refresher = Refresher(source, book, AdapterMetrics(), clock=clock, monotonic=clock)
    client = await aiohttp_client(build_api_app(refresher, refresher.metrics))
    return Adapter(client, refresher, clock, source)


def shown(document: dict[str, Any]) -> Iterator[tuple[str, bool, bool, str]]:
    """Each pod's name, `ready`, `counted` and `reason`, as /debug lists them."""
    for pod in document["pods"]:
        yield pod["name"], pod["ready"], pod.get("counted"), pod.get("reason")


def shown_pod(document: dict[str, Any], name: str) -> tuple[bool, bool, str]:
    """The one pod `name`'s `ready`, `counted` and `reason`."""
    [(ready, counted, reason)] = [row[1:] for row in shown(document) if row[0] == name]
    return ready, counted, reason


def agrees(document: dict[str, Any]) -> None:
    """`ready_pods` is the number of pods the list shows `counted`."""
    counted = [name for name, _, is_counted, _ in shown(document) if is_counted]
    assert document["ready_pods"] == len(counted), (document["ready_pods"], list(shown(document)))


async def test_mid_rollout_each_surge_pod_says_it_is_left_out_and_why(adapter: Adapter) -> None:
    adapter.source.replicas = 4
    old = [f"old-{i}" for i in range(4)]
    adapter.source.pods = lambda now: tuple(serving(name, 90.0, now) for name in old)
    for _ in range(3):
        steady = await adapter.debug_after()
    assert [(ready, counted, reason) for _, ready, counted, reason in shown(steady)] == [(True, True, "")] * 4
    adapter.source.pods = lambda now: (*(serving(name, 90.0, now) for name in old),
                                       *(serving(f"new-{i}", 0.0, now, created_at=now - 20 + i) for i in range(3)))
    during = await adapter.debug_after()

    assert during["values"][DESIRED]["value"] == 4 and len(during["pods"]) == 7
    agrees(during)
    for name, ready, counted, reason in shown(during):
        if name.startswith("old-"):
            assert (ready, counted, reason) == (True, True, ""), name
        else:
            assert ready and counted is False, (name, ready, counted)
            assert reason.startswith("left out as surge:"), reason
            assert "beyond the Deployment's replicas 4 (7 Ready pods)" in reason, reason
            assert "serving nothing, as a rollout's new pods are" in reason, reason


async def test_a_crash_looping_pod_ready_with_no_fresh_rate_says_why_it_counts_as_not_ready(
        adapter: Adapter) -> None:
    adapter.source.replicas = 3
    last_good = serving("p-0", 200.0, T0 + STEP_S)
    adapter.source.pods = lambda now: (serving("p-0", 200.0, now), serving("p-1", 200.0, now),
                                       serving("p-2", 200.0, now))
    await adapter.debug_after()
    stopped = adapter.clock.now + 1.0
    not_ready = replace(last_good, ready=False, unready_since=stopped)
    adapter.source.pods = lambda now: (not_ready, serving("p-1", 10.0, now), serving("p-2", 10.0, now))
    held = await adapter.debug_after()
    agrees(held)
    ready, counted, reason = shown_pod(held, "p-0")
    assert (ready, counted) == (False, True), (ready, counted)
    assert reason.startswith("not ready for") and "counted as missing data" in reason, reason
    assert reason == held["held"]["pod p-0"], (reason, held["held"])

    while adapter.clock.now - stopped <= NOT_READY_HOLD_S:
        await adapter.debug_after()
    back = replace(last_good, requests_per_second=None)  # Ready, its ModelMesh failing
    adapter.source.pods = lambda now: (back, serving("p-1", 10.0, now), serving("p-2", 10.0, now))
    left_out = await adapter.debug_after()

    assert left_out["values"][DESIRED]["value"] == 1, left_out["reason"]
    agrees(left_out)
    ready, counted, reason = shown_pod(left_out, "p-0")
    assert (ready, counted) == (False, False), (ready, counted)
    assert reason.startswith("Ready, but no fresh request rate read since it stopped being Ready"), reason
    assert "counted as not Ready" in reason and f"over {NOT_READY_HOLD_S:.0f} s" in reason, reason


@pytest.mark.parametrize("created_at", [OLD, None], ids=["created-a-day-ago", "creation-unknown"])
async def test_mid_rollout_a_crash_looping_pod_left_out_stays_left_out(
        adapter: Adapter, created_at: float | None) -> None:
    """Replicas lowered to 2 with a new idle pod Ready beside the crash-looping one past its 5 minutes: the surge
    aggregate counted the crash-looping pod again, as a stale Ready pod, and held the values at 3 for good. And
    with its creation unknown (counted as newest) the crash-looping pod, idle and already left out, was taken as
    the surge, so the new pod counted: `ready_pods` 3 with the Deployment at 2."""
    adapter.source.replicas = 3
    def busy(now: float) -> tuple[PodSample, ...]:
        return serving("p-1", 150.0, now), serving("p-2", 150.0, now)

    adapter.source.pods = lambda now: (serving("p-0", 150.0, now, created_at), *busy(now))
    first = await adapter.debug_after()
    assert first["values"][DESIRED]["value"] == 5
    last_good = serving("p-0", 150.0, adapter.clock.now, created_at)
    stopped = adapter.clock.now + 1.0
    not_ready = replace(last_good, ready=False, unready_since=stopped)
    adapter.source.pods = lambda now: (not_ready, *busy(now))
    while adapter.clock.now - stopped <= NOT_READY_HOLD_S:
        await adapter.debug_after()
    back = replace(last_good, requests_per_second=None)
    adapter.source.replicas = 2
    adapter.source.pods = lambda now: (back, *busy(now), serving("new-0", 0.0, now, created_at=now - 5.0))
    rolling = await adapter.debug_after()
    assert rolling["values"][DESIRED]["value"] == 3, rolling["reason"]
    adapter.source.pods = lambda now: (back, serving("p-1", 10.0, now), serving("p-2", 10.0, now),
                                       serving("new-0", 0.0, now, created_at=now - 5.0))
    quiet = await adapter.debug_after()

    assert quiet["values"][DESIRED]["value"] == 1, quiet["reason"]  # was held at 3: "1 of 3 ready pods stale"
    agrees(quiet)
    assert quiet["ready_pods"] == 2, list(shown(quiet))
    counted = {name: (is_counted, reason) for name, _, is_counted, reason in shown(quiet)}
    assert counted["p-0"][0] is False and "counted as not Ready" in counted["p-0"][1], counted
    assert counted["new-0"][0] is False and counted["new-0"][1].startswith("left out as surge:"), counted

