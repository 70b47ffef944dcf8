"""An HPA's write while the replica bridge's full pass is under way, as the API server sees it: the pass of a
new leader writes the status of every RuntimeScale one after another (1,000 writes at 1,000 runtimes, each a
round trip), and a scale-up the watch handed over meanwhile waited for the whole pass to end, tens of seconds
with a slow API server. It now goes out between two reconciles of the pass, and the pass never writes the older
`spec.replicas` it listed back over it (docs/design.md, "The RuntimeScale bridge")."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
from collections.abc import AsyncIterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.actuation.bridge import BridgeSettings, ReplicaBridge
from autoscaler.actuation.bridge_runtime_watch import ServingRuntimeWatch
from autoscaler.actuation.bridge_watch import RuntimeScaleWatch
from autoscaler.kube.client import KubeClient
from tests.actuation.conftest import connected
from tests.fakes.kube import JSON, FakeKubeApi
from tests.support.waiting import eventually

NS = "ml"
RUNTIMES = 30
STATUS_WRITE = r"/runtimescales/[^/]+/status$"


def rt(i: int) -> str:
    """The i-th runtime and its RuntimeScale: lists return them in this order."""
    return f"rt{i:02d}"


def fleet(kube: FakeKubeApi, runtimes: int = RUNTIMES) -> None:
    """`runtimes` runtimes at 2 replicas, each with a RuntimeScale asking for 3 and no status yet: a pass writes
    every runtime and every status, as a new leader's first pass does."""
    for i in range(runtimes):
        kube.add_serving_runtime(NS, rt(i), replicas=2)
        kube.add_modelmesh_runtime(NS, f"modelmesh-serving-{rt(i)}", replicas=2)
        kube.add_runtime_scale(NS, rt(i), replicas=3)


def runtime_writes(kube: FakeKubeApi) -> list[tuple[str, int]]:
    """(ServingRuntime, replicas) of each runtime write, in the order the fake answered them."""
    patches = sorted((r for r in kube.requests if r.method == "PATCH" and r.resource == "servingruntimes"),
                     key=lambda r: r.answered or 0)
    return [(str(r.name), r.body["spec"]["replicas"]) for r in patches]


def hpa_writes(kube: FakeKubeApi, name: str, replicas: int) -> JSON:
    """The HPA's write to the RuntimeScale's scale subresource, as stored (what the watch hands over)."""
    kube.update_object("runtimescales", NS, name, lambda o: o["spec"].update(replicas=replicas))
    return copy.deepcopy(kube.stored("runtimescales", NS, name))


@pytest.mark.parametrize(("scaled", "pass_order"), [
    pytest.param("rt03", [*range(10), "hpa", *range(10, RUNTIMES)], id="a-runtime-the-pass-has-done"),
    pytest.param("rt20", [*range(10), "hpa", *range(10, 20), *range(21, RUNTIMES)], id="one-it-has-yet-to-do"),
])
async def test_an_hpa_write_during_a_full_pass_reaches_the_runtime_before_the_pass_ends(
    kube: FakeKubeApi, kube_client: KubeClient, scaled: str, pass_order: list[int | str]
) -> None:
    """The HPA scales `scaled` to 5 while the pass writes its tenth status: the runtime gets 5 right after that
    write, not once the other twenty are done; and the pass, which listed `scaled` at 3, does not write 3 back
    (for a RuntimeScale it has yet to reach, that was 3 over the HPA's 5 until the pass ended)."""
    fleet(kube)
    bridge = ReplicaBridge(kube_client, namespaces=[NS])
    kube.on_request(STATUS_WRITE, lambda: bridge.wake(hpa_writes(kube, scaled, 5)), method="PATCH", after=9)

    await bridge.sync()

    expected = [(scaled, 5) if step == "hpa" else (rt(int(step)), 3) for step in pass_order]
    assert runtime_writes(kube) == expected
    assert kube.serving_runtime_replicas(NS, scaled) == 5
    kube.clear_requests()
    assert await bridge.sync_changed() == 0 and await bridge.sync() == 0  # nothing left over, nothing undone
    assert runtime_writes(kube) == []


async def test_with_a_slow_api_server_the_watch_hands_an_hpa_write_over_in_the_middle_of_a_new_leaders_pass(
    kube: FakeKubeApi, kube_client: KubeClient
) -> None:
    """The bridge and its watch as the adapter runs them, every status write answered slowly: the HPA's write
    to rt00 during the tenth reaches rt00 before the pass writes its last status."""
    fleet(kube)
    kube.delay(STATUS_WRITE, 0.05, method="PATCH")
    kube.on_request(STATUS_WRITE, lambda: hpa_writes(kube, "rt00", 5), method="PATCH", after=9)
    bridge = ReplicaBridge(kube_client, namespaces=[NS], settings=BridgeSettings(resync_interval_s=3600.0))
    tasks = [asyncio.create_task(RuntimeScaleWatch(kube_client, NS, bridge.wake).run())]
    try:
        await kube.wait_for_watches(1, "runtimescales")
        tasks.append(asyncio.create_task(bridge.run()))
        await eventually(lambda: kube.serving_runtime_replicas(NS, "rt00") == 5 and all(
            (kube.stored("runtimescales", NS, rt(i)).get("status") or {}).get("replicas") is not None
            for i in range(RUNTIMES)))
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    status_writes = [r for r in kube.requests if r.method == "PATCH" and r.path.endswith("/status")]
    carried = next(r for r in kube.requests if r.method == "PATCH" and r.resource == "servingruntimes"
                   and r.name == "rt00" and r.body["spec"]["replicas"] == 5)
    last_of_pass = next(r for r in reversed(status_writes) if r.name == rt(RUNTIMES - 1))
    assert (carried.answered or 0) < (last_of_pass.answered or 0)
    assert [replicas for name, replicas in runtime_writes(kube) if name == "rt00"] == [3, 5]


# One step between two requests of the pass (each status write it sends): the HPA writes a RuntimeScale (the API
# server keeps its new version), or the watch, in order and as late as it likes, hands the oldest change not yet
# handed over to the bridge: every version the API server made, the bridge's own status writes included (whose
# new version also carries whatever spec the HPA wrote before it).
STEP = st.one_of(st.tuples(st.just("hpa"), st.integers(0, 5)), st.tuples(st.just("watch"), st.just(0)))


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(st.lists(STEP, max_size=3), min_size=1, max_size=12))
def test_an_older_listed_or_handed_over_replicas_never_overwrites_a_newer_one(
    steps: list[list[tuple[str, int]]],
) -> None:
    """Whatever the HPA writes during a pass and however late the watch hands it over, each runtime's
    replicas only move forward through the HPA's writes (here always upwards: 3 listed, then 4, 5, ...), and
    end at the HPA's last once the watch has caught up, with no further full pass."""
    written, wanted = asyncio.run(_pass_with_hpa_writes(steps))

    for name, last in wanted.items():
        values = [replicas for runtime, replicas in written if runtime == name]
        assert values == sorted(values), f"{name}: {values}"
        assert values[-1] == last, f"{name}: {values}, the HPA's last {last}"


class PlayedWatch:
    """The RuntimeScale watch (or, with `resource="servingruntimes"`, the ServingRuntime watch) played by the
    test: every change the API server made since `start`, handed to the bridge one by one in order, when the test
    says."""

    def __init__(self, kube: FakeKubeApi, bridge: ReplicaBridge, resource: str = "runtimescales") -> None:
        self._kube, self._bridge, self._resource = kube, bridge, resource
        self._hand = bridge.wake if resource == "runtimescales" else bridge.handovers.runtime_changed
        self._seen = int(kube.resource_version)

    def _unseen(self) -> list[JSON]:
        return self._kube.changes(self._resource, self._seen)

    def hand_over_one(self) -> JSON | None:
        """The oldest change not handed over yet, if any; returns it."""
        if unseen := self._unseen():
            self._seen = int(unseen[0]["metadata"]["resourceVersion"])
            self._hand(unseen[0])
            return unseen[0]
        return None

    def hand_over_all(self) -> None:
        """Every change not handed over yet, in order, without waiting for the bridge."""
        for obj in self._unseen():
            self._seen = int(obj["metadata"]["resourceVersion"])
            self._hand(obj)

    async def catch_up(self) -> None:
        """Hand every change over and let the bridge reconcile them, until its own writes bring nothing new."""
        for _ in range(20):
            unseen = self._unseen()
            if not unseen:
                return
            self.hand_over_all()
            await self._bridge.sync_changed()
        raise AssertionError("the bridge's hand-overs never settled")


async def _pass_with_hpa_writes(steps: list[list[tuple[str, int]]]) -> tuple[list[tuple[str, int]], dict[str, int]]:
    """A full pass over six RuntimeScales with `steps[i]` taken at the i-th status write (of the pass, or of a
    hand-over between two of its reconciles), then the watch's remaining hand-overs; returns the runtime writes
    and each runtime's last HPA replicas."""
    async with FakeKubeApi() as kube:
        fleet(kube, 6)
        async with connected(kube, NS) as client:
            bridge = ReplicaBridge(client, namespaces=[NS])
            wanted = {rt(i): 3 for i in range(6)}
            watch = PlayedWatch(kube, bridge)

            def take(step: list[tuple[str, int]]) -> None:
                for kind, runtime in step:
                    if kind == "hpa":
                        name = rt(runtime)
                        wanted[name] += 1
                        hpa_writes(kube, name, wanted[name])
                    else:
                        watch.hand_over_one()

            for index, step in enumerate(steps):
                kube.on_request(STATUS_WRITE, functools.partial(take, step), method="PATCH", after=index)
            await bridge.sync()
            kube.clear_faults()
            await watch.catch_up()
            return runtime_writes(kube), wanted


async def test_an_hpa_write_landing_while_the_bridge_writes_that_status_is_carried_at_once(
    kube: FakeKubeApi, kube_client: KubeClient
) -> None:
    """The HPA writes rt00 again (4 -> 5) just before the status write of its reconcile of 4 lands, as at
    every round when 20 HPAs keep writing. The watch then hands over the HPA's version and the bridge's status
    write, which carries the HPA's spec too; the status write replaced the HPA's version among the waiting
    hand-overs and was dropped as the bridge's own: rt00 stayed at 4 until the next full pass (20-50 s in a
    fleet of 300)."""
    fleet(kube, 3)
    bridge = ReplicaBridge(kube_client, namespaces=[NS], settings=BridgeSettings(resync_interval_s=3600.0))
    await bridge.sync()
    watch = PlayedWatch(kube, bridge)
    await watch.catch_up()
    kube.clear_requests()
    kube.on_request(r"/runtimescales/rt00/status$", lambda: hpa_writes(kube, "rt00", 5), method="PATCH")
    hpa_writes(kube, "rt00", 4)
    hpa_writes(kube, "rt01", 4)

    await watch.catch_up()

    assert [replicas for name, replicas in runtime_writes(kube) if name == "rt00"] == [4, 5]
    assert kube.serving_runtime_replicas(NS, "rt00") == 5


async def test_with_twenty_hpas_writing_every_newest_ask_reaches_its_runtime_within_round_trips(
    kube: FakeKubeApi, kube_client: KubeClient
) -> None:
    """The operator's fleet, smaller: the watch and the bridge as the adapter runs them, status writes answered
    in 40 ms, twenty HPAs writing a rising value every 0.2 s. Seconds after the last writes, every runtime holds
    its HPA's last value (it held an older one until the next full pass, the resync here an hour away)."""
    fleet(kube, 20)
    kube.delay(STATUS_WRITE, 0.04, method="PATCH")
    kube.delay(r"/servingruntimes", 0.01)
    bridge = ReplicaBridge(kube_client, namespaces=[NS], settings=BridgeSettings(resync_interval_s=3600.0))
    async with running(kube, kube_client, bridge, 20):
        for value in range(4, 30):
            for i in range(20):
                hpa_writes(kube, rt(i), value)
            await asyncio.sleep(0.2)
        # A round over the twenty is about 1.2 s; the margin is for a loaded 2-core machine.
        await eventually(lambda: all(kube.serving_runtime_replicas(NS, rt(i)) == 29 for i in range(20)),
                         timeout=6.0)


async def test_a_runtime_changing_owner_during_a_pass_has_the_pass_start_again_from_a_fresh_list(
    kube: FakeKubeApi, kube_client: KubeClient
) -> None:
    """`rt10` is pointed at another runtime while the pass runs, handing its runtime to `rt0-copy`, a younger
    RuntimeScale for the same runtime that the pass had already found a duplicate. Reconciling the hand-over
    alone and going on left the new owner's 7 for the next resync (15 s); the pass starts again instead."""
    fleet(kube, 12)
    kube.add_serving_runtime(NS, "spare", replicas=2)
    kube.add_modelmesh_runtime(NS, "modelmesh-serving-spare", replicas=2)
    created = kube.clock()
    kube.clock = lambda: created + 60.0  # a minute younger than rt10: a duplicate
    kube.add_runtime_scale(NS, "rt0-copy", serving_runtime=rt(10), replicas=7)  # listed first: "-" sorts first
    bridge = ReplicaBridge(kube_client, namespaces=[NS], settings=BridgeSettings(resync_interval_s=3600.0))

    def repointed() -> None:
        kube.update_object("runtimescales", NS, rt(10), lambda o: o["spec"].update(servingRuntime="spare"))
        bridge.wake(copy.deepcopy(kube.stored("runtimescales", NS, rt(10))))

    kube.on_request(STATUS_WRITE, repointed, method="PATCH", after=4)
    task = asyncio.create_task(bridge.run())
    try:
        await eventually(lambda: kube.serving_runtime_replicas(NS, rt(10)) == 7
                         and kube.serving_runtime_replicas(NS, "spare") == 3, timeout=10.0)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert (rt(10), 3) not in runtime_writes(kube)  # the pass stopped before it reached rt10 as listed


async def test_hpa_writes_that_never_stop_do_not_hold_the_resync_back(
    kube: FakeKubeApi, kube_client: KubeClient
) -> None:
    """An HPA that writes every 0.2 s (20 HPAs each writing every few seconds, in a fleet) woke the bridge before
    each resync fell due, and each wake-up started the resync's wait anew: no full pass ran while they wrote, so
    a hand-edited ServingRuntime stayed as edited (60 s in the operator's run, and for good under steady load).
    The resync (1 s here) now counts from the last full pass."""
    fleet(kube, 3)
    bridge = ReplicaBridge(kube_client, namespaces=[NS], settings=BridgeSettings(resync_interval_s=1.0))
    async with running(kube, kube_client, bridge, 3):
        kube.update_object("servingruntimes", NS, "rt01", lambda o: o["spec"].update(replicas=9))
        set_back_at = None
        for value in range(4, 24):  # four seconds of HPA writes
            hpa_writes(kube, "rt00", value)
            await asyncio.sleep(0.2)
            if set_back_at is None and kube.serving_runtime_replicas(NS, "rt01") == 3:
                set_back_at = (value - 3) * 0.2
    assert set_back_at is not None and set_back_at <= 3.0, "not set back while the HPA kept writing"


@contextlib.asynccontextmanager
async def running(kube: FakeKubeApi, kube_client: KubeClient, bridge: ReplicaBridge,
                  runtimes: int) -> AsyncIterator[None]:
    """The bridge run by its watches, as in the adapter, until every runtime is at the fleet's 3 replicas."""
    tasks = [asyncio.create_task(RuntimeScaleWatch(kube_client, NS, bridge.wake).run()),
             asyncio.create_task(ServingRuntimeWatch(kube_client, NS, bridge.handovers.runtime_changed).run())]
    try:
        await kube.wait_for_watches(1, "runtimescales")
        await kube.wait_for_watches(1, "servingruntimes")
        tasks.append(asyncio.create_task(bridge.run()))
        await eventually(lambda: all(kube.serving_runtime_replicas(NS, rt(i)) == 3 for i in range(runtimes)))
        yield
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
