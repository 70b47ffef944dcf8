"""After an outage of the Kubernetes API, the replica bridge's watches hand it what changed within a few seconds of
the API's return, as pod discovery's do (tests/sources/test_kube_outage_recovery.py).

Before, the RuntimeScale watch backed off 1 s doubling to 30 s (±20%) and the ServingRuntime watch to 60 s whatever
the failure: after a 40 s outage the HPA's scale set meanwhile reached its ServingRuntime up to half a minute after
the API was back, and a ServingRuntime set by hand meanwhile stayed at its size as long. A failure the API server
never answered (connection refused, a timeout) costs it nothing to retry: those back off to about 4 s only
(`autoscaler.kube.backoff.UNANSWERED_MAX_S`), an answered one (a 5xx, a 403) as before, counting the answered
failures in a row alone.

The waits are played on a clock of the test's own (`tests.support.outage_clock`), in the order they fall due: no
wall-clock window. The API is the fake's, down (`pause`) once the watch is open, until the outage's end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest

from autoscaler.actuation.bridge import BridgeSettings, ReplicaBridge
from autoscaler.actuation.bridge_runtime_watch import ServingRuntimeWatch
from autoscaler.actuation.bridge_watch import RuntimeScaleWatch
from autoscaler.kube.client import KubeClient
from autoscaler.model import RuntimeKey
from tests.actuation.conftest import connect
from tests.actuation.test_bridge_during_pass import fleet, hpa_writes, rt
from tests.fakes.kube import JSON, FakeKubeApi
from tests.support.clock import SteppedClock
from tests.support.outage_clock import Waits, back_after_outage
from tests.support.waiting import eventually

NS = "ml"
TRITON = RuntimeKey(NS, "modelmesh-serving-triton")
OUTAGE_S = 40.0
PROMPT_S = 5.0
"""How soon after the API's return the watch hands the change over: the longest wait after a failure with no answer
(4 s, +20% of jitter)."""


def first_answered_s(status: int | None) -> float:
    """The wait after the server's first answer at its return where that is a failure (`status`, a 503 of an
    apiserver still starting): the first answered failure in a row, 1 s +20%, not the step the refused tries had
    doubled to (the watches' 30 s and 60 s caps)."""
    return 0.0 if status is None else 1.2


def replicas(count: int) -> Callable[[JSON], None]:
    def set_replicas(obj: JSON) -> None:
        obj["spec"]["replicas"] = count
    return set_replicas


@pytest.mark.parametrize("answers_first", [None, 503], ids=["then-ok", "then-a-503"])
async def test_an_hpa_scale_set_during_an_outage_reaches_the_bridge_within_seconds_of_the_api_s_return(
    kube: FakeKubeApi, kube_client: KubeClient, answers_first: int | None,
) -> None:
    kube.add_runtime_scale(NS, "triton", replicas=5)
    waits = Waits()
    handed: list[int | None] = []
    watch = RuntimeScaleWatch(kube_client, NS, lambda scale: handed.append(None if scale is None else
                                                                           scale["spec"].get("replicas")),
                              sleep=waits.sleep)  # the shipped backoff
    task = asyncio.create_task(watch.run())
    try:
        await eventually(lambda: watch.replicas_for(TRITON) == 5 and kube.watch_count("runtimescales") == 1)
        await kube.pause()  # the outage: the watch sees its connection die, every new one is refused
        kube.update_object("runtimescales", NS, "triton", replicas(7))  # the HPA's scale, as the API is back
        if answers_first is not None:  # the watch's first request once the server answers again
            kube.fail(r"/runtimescales$", answers_first)
        back_after, _ = await back_after_outage(kube, waits, OUTAGE_S, loops=1, resource="runtimescales",
                                                current=lambda: watch.replicas_for(TRITON) == 7)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert back_after <= PROMPT_S + first_answered_s(answers_first), (
        f"the HPA's scale reached the bridge only {back_after:.1f} s after the API's return")
    assert handed[-1] in (None, 7), handed  # the bridge is woken with it (or a relist's full pass)


@pytest.mark.parametrize("answers_first", [None, 503], ids=["then-ok", "then-a-503"])
async def test_a_servingruntime_set_by_hand_during_an_outage_reaches_the_bridge_within_seconds_of_the_api_s_return(
    kube: FakeKubeApi, kube_client: KubeClient, answers_first: int | None,
) -> None:
    kube.add_serving_runtime(NS, "triton", replicas=5)
    waits = Waits()
    handed: list[int | None] = []
    watch = ServingRuntimeWatch(kube_client, NS, lambda runtime: handed.append(runtime["spec"].get("replicas")),
                                sleep=waits.sleep)  # the shipped backoff
    task = asyncio.create_task(watch.run())
    try:
        await eventually(lambda: handed == [5] and kube.watch_count("servingruntimes") == 1)
        await kube.pause()
        kube.update_object("servingruntimes", NS, "triton", replicas(2))  # a kubectl apply of an old manifest
        if answers_first is not None:  # the watch's first request once the server answers again
            kube.fail(r"/servingruntimes$", answers_first)
        back_after, _ = await back_after_outage(kube, waits, OUTAGE_S, loops=1, resource="servingruntimes",
                                                current=lambda: handed[-1] == 2)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert back_after <= PROMPT_S + first_answered_s(answers_first), (
        f"the hand edit reached the bridge only {back_after:.1f} s after the API's return")


@pytest.mark.parametrize("answers_first", [None, 503], ids=["then-ok", "then-a-503"])
async def test_a_runtime_write_the_server_never_answered_lands_within_seconds_of_its_return(
    kube: FakeKubeApi, kubeconfig: Path, clock: SteppedClock, answers_first: int | None,
) -> None:
    """The bridge's own retries of a RuntimeScale, as its watches' are: the ServingRuntime's writes get no answer
    (each held past the client's timeout) for 40 s while the lists answer, and the HPA's 7 reaches the runtime
    within seconds of the server's return. Its backoff had doubled through the outage (60 s cap): 20 s late here,
    up to the cap after a longer one. The server's first answer may be a failure (a 503 while it starts): that one
    is retried at the base backoff (1 s), as the first answered failure it is, not at the step the tries nobody
    answered had reached (30 to 60 s). Played on the test's clock (the bridge's passes one after another, each at
    the moment its run loop would start it), jitter drawn at its top."""
    kube_client = await connect(kubeconfig, timeout_s=0.3)  # each try of the held read ends in 0.3 s
    try:
        fleet(kube, 1)  # rt00: its RuntimeScale asks 3 of a ServingRuntime at 2
        bridge = ReplicaBridge(kube_client, namespaces=[NS], clock=clock, rand=lambda: 1.0)
        await bridge.sync()
        assert kube.serving_runtime_replicas(NS, rt(0)) == 3
        # The outage, for this runtime's writes: each held unanswered (and never applied while the test looks).
        outage = kube.hold_answer(rf"/servingruntimes/{rt(0)}$", times=None, method="PATCH")
        bridge.wake(hpa_writes(kube, rt(0), 7))  # the watch hands the HPA's write over
        await bridge.sync_changed()
        end, down = clock.now + OUTAGE_S, True
        while kube.serving_runtime_replicas(NS, rt(0)) != 7:
            clock.advance(bridge.next_pass_in_s())
            if down and clock.now >= end:
                kube.held_answers.remove(outage)  # the server answers again; the writes it never answered stay lost
                if answers_first is not None:
                    kube.fail(rf"/servingruntimes/{rt(0)}$", answers_first, method="PATCH")
                down = False
            await bridge.sync()
            assert clock.now < end + 120, "the HPA's 7 never reached the runtime"
        tries = outage.hits
    finally:
        await kube_client.close()
        outage.release()
    assert tries >= 2, f"{tries} unanswered tries: the outage did not hold the runtime's writes"
    late_s = PROMPT_S + (0.0 if answers_first is None else BridgeSettings().backoff_base_s)
    assert clock.now - end <= late_s, (
        f"the HPA's 7 reached the runtime {clock.now - end:.1f} s after the server answered again")
