"""The replica bridge while HPAs keep writing, as the operator sees it: a full pass or a due retry only started
when the bridge's wait for a watch event ran out, and with the next hand-over already waiting that wait never
runs out. So while an HPA wrote during every pass over the changed RuntimeScales, no full pass and no retry ran:
a hand-edited ServingRuntime stayed as edited, and an ask held for its retry (an outage just over) stayed held
(3 for 75 s where the HPA asked 21, in a fleet of 300 with 20 HPAs writing). A due full pass or retry now runs
whatever wakes keep coming, and a full pass reconciles at most one hand-over at its start and after each
RuntimeScale it wrote, so it takes about two round trips per RuntimeScale it writes however many HPAs write, and a
settled fleet's pass its lists alone (docs/design.md, "The RuntimeScale bridge")."""

from __future__ import annotations

import asyncio
import copy
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.actuation.bridge import BridgeSettings, ReplicaBridge
from autoscaler.kube.client import KubeClient
from tests.actuation.conftest import connected
from tests.actuation.test_bridge_during_pass import NS, STATUS_WRITE, PlayedWatch, fleet, hpa_writes, rt, running
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

SETTINGS = BridgeSettings(resync_interval_s=15.0, backoff_base_s=1.0, backoff_cap_s=60.0)

STARVED_S = 20.0
"""A hang detector: a retry or full pass due every 1 s that never ran (starved) shows as nothing within it; one
that ran shows however loaded the machine (a CI run at load 8 stretches a second several times over)."""



@pytest.mark.parametrize("status_write_s", [0.0, 0.3])
async def test_an_ask_after_a_failed_write_goes_out_while_another_hpa_keeps_writing(
    kube: FakeKubeApi, kube_client: KubeClient, status_write_s: float,
) -> None:
    """rt01's runtime answers one write 503; its HPA asks again (8) during the 1 s backoff, which holds the ask
    for the retry; rt00's HPA writes every 0.1 s. Was: the ask of 8 never carried (no retry pass ran)."""
    fleet(kube, 3)
    bridge = ReplicaBridge(kube_client, namespaces=[NS], settings=BridgeSettings(resync_interval_s=3600.0))
    async with running(kube, kube_client, bridge, 3):
        kube.delay(STATUS_WRITE, status_write_s, method="PATCH")
        fault = kube.fail(r"/servingruntimes/rt01$", 503, times=1, method="PATCH")
        hpa_writes(kube, "rt01", 7)
        started, carried, value = time.monotonic(), None, 4
        while fault.hits < 1:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        hpa_writes(kube, "rt01", 8)
        while time.monotonic() - started < STARVED_S and carried is None:
            hpa_writes(kube, "rt00", value)
            value += 1
            await asyncio.sleep(0.1)
            if kube.serving_runtime_replicas(NS, "rt01") == 8:
                carried = time.monotonic() - started
    # Starved, it never carried (the retry is due 1 s after the refusal): asked of the ask, not of the clock.
    assert carried is not None, f"rt01's ask of 8 not carried in {STARVED_S:g} s while rt00's HPA wrote"


@pytest.mark.parametrize("status_write_s", [0.0, 0.3])
async def test_a_hand_edit_is_set_back_while_an_hpa_keeps_writing_into_slow_status_writes(
    kube: FakeKubeApi, kube_client: KubeClient, status_write_s: float,
) -> None:
    """Resync 1 s; rt00's HPA writes every 0.1 s while status writes take 0.3 s. Was: no full pass in 8 s,
    rt01 left at the 9 set by hand."""
    fleet(kube, 3)
    bridge = ReplicaBridge(kube_client, namespaces=[NS], settings=BridgeSettings(resync_interval_s=1.0))
    async with running(kube, kube_client, bridge, 3):
        kube.delay(STATUS_WRITE, status_write_s, method="PATCH")
        kube.update_object("servingruntimes", NS, "rt01", lambda o: o["spec"].update(replicas=9))
        started, set_back, value = time.monotonic(), None, 4
        while time.monotonic() - started < STARVED_S and set_back is None:
            hpa_writes(kube, "rt00", value)
            value += 1
            await asyncio.sleep(0.1)
            if kube.serving_runtime_replicas(NS, "rt01") == 3:
                set_back = time.monotonic() - started
        await eventually(lambda: kube.serving_runtime_replicas(NS, "rt00") == value - 1)
    # Starved, no full pass ran (one is due every 1 s): asked of the set-back, not of the clock.
    assert set_back is not None, f"the hand edit of rt01 not set back in {STARVED_S:g} s while rt00's HPA wrote"


async def test_a_full_pass_takes_a_reconcile_per_runtime_scale_however_many_hpas_write(
    kube: FakeKubeApi, kube_client: KubeClient,
) -> None:
    """Twenty HPAs writing at every status write of a new leader's pass over 60 RuntimeScales: the pass
    reconciled up to twenty hand-overs before each of its RuntimeScales (its length fleet x writers); now one,
    and every HPA's newest ask still reaches its runtime by the end of the pass."""
    fleet(kube, 60)
    bridge = ReplicaBridge(kube_client, namespaces=[NS], settings=SETTINGS)
    writers = [rt(i) for i in range(0, 60, 3)]
    asked = dict.fromkeys(writers, 3)

    def every_hpa_writes() -> None:
        for name in writers:
            asked[name] += 1
            bridge.wake(hpa_writes(kube, name, asked[name]))

    kube.on_request(STATUS_WRITE, every_hpa_writes, method="PATCH", times=None)
    await bridge.sync()
    status_writes = [r for r in kube.requests if r.method == "PATCH" and r.resource == "runtimescales"]
    assert len(status_writes) <= 2 * 60 + len(writers), len(status_writes)
    kube.clear_faults()
    await bridge.sync_changed()
    assert {name: kube.serving_runtime_replicas(NS, name) for name in writers} == asked


async def _pass_while_hpas_write(runtimes: int, writers: list[int]) -> tuple[int, dict[str, int], dict[str, int]]:
    """A new leader's full pass over `runtimes` RuntimeScales with the HPAs of `writers` each writing at every
    status write of it (the watch handing each write over at once), then the watch caught up; returns the
    pass's status writes, each runtime's replicas and each HPA's last ask."""
    async with FakeKubeApi() as kube:
        fleet(kube, runtimes)
        async with connected(kube, NS) as client:
            bridge = ReplicaBridge(client, namespaces=[NS], settings=SETTINGS)
            asked = {rt(i): 3 for i in range(runtimes)}
            watch = PlayedWatch(kube, bridge)

            def every_hpa_writes() -> None:
                for i in writers:
                    asked[rt(i)] += 1
                    hpa_writes(kube, rt(i), asked[rt(i)])
                watch.hand_over_all()

            kube.on_request(STATUS_WRITE, every_hpa_writes, method="PATCH", times=None)
            await bridge.sync()
            status_writes = sum(1 for r in kube.requests if r.method == "PATCH" and r.resource == "runtimescales")
            kube.clear_faults()
            await watch.catch_up()
            return status_writes, {name: kube.serving_runtime_replicas(NS, name) or 0 for name in asked}, asked


@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_however_many_hpas_write_a_pass_takes_two_reconciles_a_runtime_scale_at_most(data: st.DataObject) -> None:
    """The promise: a full pass of N RuntimeScales makes at most 2 x N status writes (one for each of its own,
    one hand-over between each two) whatever number of HPAs write during it, and every HPA's last ask reaches
    its runtime."""
    runtimes = data.draw(st.integers(2, 16), label="runtimes")
    writers = data.draw(st.lists(st.integers(0, runtimes - 1), min_size=1, unique=True), label="writers")
    status_writes, replicas, asked = asyncio.run(_pass_while_hpas_write(runtimes, writers))
    assert status_writes <= 2 * runtimes, (status_writes, runtimes, len(writers))
    assert replicas == asked


@pytest.mark.parametrize("relisted_first", [False, True], ids=["deletion seen first", "created again at once"])
async def test_a_runtime_scale_created_again_is_not_held_by_its_predecessors_backoff(
    kube: FakeKubeApi, kube_client: KubeClient, relisted_first: bool,
) -> None:
    """GitOps deletes and re-creates rt01's RuntimeScale (a new uid) after an outage that failed its old one six
    times: the new one's asks waited for the old one's 32 s backoff."""
    fleet(kube, 2)
    now = [1000.0]
    bridge = ReplicaBridge(kube_client, namespaces=[NS], settings=SETTINGS, clock=lambda: now[0], rand=lambda: 1.0)
    await bridge.sync()
    kube.fail(r"/servingruntimes/rt01$", 503, times=None, method="PATCH")
    bridge.wake(hpa_writes(kube, rt(1), 4))
    await bridge.sync_changed()
    for _ in range(5):
        now[0] = max(0.0, bridge.next_pass_in_s()) + now[0]
        await bridge.sync()
    assert kube.serving_runtime_replicas(NS, rt(1)) == 3
    kube.clear_faults()
    now[0] += 1.0
    kube.delete_object("runtimescales", NS, rt(1))
    if relisted_first:
        kube.add_runtime_scale(NS, rt(1), replicas=7)
        bridge.wake(None)
        bridge.wake(copy.deepcopy(kube.stored("runtimescales", NS, rt(1))))
        await bridge.sync()
    else:
        bridge.wake(None)
        await bridge.sync()
        kube.add_runtime_scale(NS, rt(1), replicas=7)
        bridge.wake(copy.deepcopy(kube.stored("runtimescales", NS, rt(1))))
        await bridge.sync_changed()
    assert kube.serving_runtime_replicas(NS, rt(1)) == 7
    now[0] += 5.0
    bridge.wake(hpa_writes(kube, rt(1), 8))
    await bridge.sync_changed()
    assert kube.serving_runtime_replicas(NS, rt(1)) == 8


@pytest.mark.parametrize("jitter", [1.0, 0.75])
async def test_an_ask_handed_over_during_a_pass_while_its_retry_waits_is_carried(
    kube: FakeKubeApi, kube_client: KubeClient, jitter: float,
) -> None:
    """rt01's ask of 4 failed (503); past half its backoff a full pass lists it at 4 and the HPA asks 5 during the
    pass. Was: the ask of 5 dropped as held for the retry, and the pass wrote the listed 4 and ended the retry."""
    fleet(kube, 3)
    now = [1000.0]
    bridge = ReplicaBridge(kube_client, namespaces=[NS], settings=SETTINGS, clock=lambda: now[0],
                           rand=lambda: jitter)
    await bridge.sync()
    kube.fail(r"/servingruntimes/rt01", 503, times=1, method="PATCH")
    bridge.wake(hpa_writes(kube, rt(1), 4))
    await bridge.sync_changed()
    assert kube.serving_runtime_replicas(NS, rt(1)) == 3
    now[0] += 0.75  # past half the 1 s backoff (jittered from 0.5 s to 1 s), before the retry falls due
    kube.on_request(r"/deployments", lambda: bridge.wake(hpa_writes(kube, rt(1), 5)), method="GET")
    await bridge.sync()
    await bridge.sync_changed()
    assert kube.serving_runtime_replicas(NS, rt(1)) == 5


async def test_a_settled_fleets_full_pass_runs_at_list_speed_while_hpas_write(
    kube: FakeKubeApi, kube_client: KubeClient,
) -> None:
    """300 settled RuntimeScales (the pass writes none of them as listed), ten HPAs writing at every status write:
    a hand-over took its turn before every RuntimeScale the pass listed, a round trip each, so one full pass took
    about 15 s with 40 ms status writes (67 s at 1,000 RuntimeScales and 20 HPAs). A turn now comes only at the
    pass's start and after a RuntimeScale the pass wrote: the pass writes each HPA's newest ask once, and its other
    RuntimeScales cost their lists alone."""
    runtimes, writers = 300, [rt(i) for i in range(0, 300, 30)]
    fleet(kube, runtimes)
    bridge = ReplicaBridge(kube_client, namespaces=[NS], settings=SETTINGS)
    await bridge.sync()
    asked = dict.fromkeys(writers, 3)

    def every_hpa_writes() -> None:
        for name in writers:
            asked[name] += 1
            bridge.wake(hpa_writes(kube, name, asked[name]))

    # From the pass's last list on, a hand-over always waits: every HPA writes again at each status write.
    kube.on_request(r"/deployments$", every_hpa_writes, method="GET", times=1)
    kube.on_request(STATUS_WRITE, every_hpa_writes, method="PATCH", times=None)
    kube.clear_requests()
    await bridge.sync()
    reconciled = [str(r.name) for r in kube.requests if r.method == "PATCH" and r.resource == "runtimescales"]
    kube.clear_faults()
    await bridge.sync_changed()

    # Asked of the pass's round trips, not of how many passes a loaded machine got through in 10 s of the clock:
    # one reconcile (a status write) for each HPA's newest ask the pass wrote and one hand-over after each, plus
    # the one at its start; with a turn before every RuntimeScale, one for each of the 300.
    assert len(reconciled) <= 2 * len(writers) + 1, f"{len(reconciled)} reconciles in a pass: {reconciled}"
    # Every HPA's last ask reaches its runtime: the turns after the pass's writes still carry them.
    assert {name: kube.serving_runtime_replicas(NS, name) for name in writers} == asked
