"""A restarted adapter starts each runtime's recommendation at what runs, and what the HPA last asked of the
runtime's RuntimeScale is part of it (docs/design.md, After a restart: warming up). The RuntimeScale watch lists
a round trip after the refresh loop starts: a first refresh before that list seeded from the Deployment alone,
and the RuntimeScale was never read again for that runtime. An adapter restarted while the RuntimeScale is ahead of
the Deployment (a scale-up not carried yet, a leader handover) then served below what the HPA had asked, and the
HPA scaled the runtime down.

Real parts: the refresh loop, the bridge and its RuntimeScale watch against the fake Kubernetes API, and the
metrics API read over HTTP as the HPA reads it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from autoscaler.actuation.actuator import DeletionCostActuator, start_actuator
from autoscaler.api.app import build_api_app
from autoscaler.policies.config import PolicyBook
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.settings import ServeSettings
from tests.actuation.conftest import KEY, add_pods
from tests.actuation.test_actuation import PODS, SnapshotSource
from tests.fakes.kube import FakeKubeApi
from tests.support.clock import SteppedClock
from tests.support.quantities import quantity_value

Client = TestClient[Any, Any]
DESIRED = (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{KEY.namespace}/modelmesh_desired_replicas"
           f"?labelSelector=deployment%3D{KEY.deployment}")
GRACE_S = 30.0
ASKED = 5  # what the HPA last wrote to the RuntimeScale; the three pods (the Deployment's 3) alone ask for 3


@pytest.fixture
def clock() -> SteppedClock:
    return SteppedClock()


@pytest.fixture
def refresher(clock: SteppedClock) -> Refresher:
    policies = PolicyBook(RuntimePolicy(warmup_grace_s=GRACE_S))
    return Refresher(SnapshotSource(), policies, AdapterMetrics(), interval_s=15.0, clock=clock, monotonic=clock)


@pytest.fixture
async def actuator(kube: FakeKubeApi, kubeconfig: Path, refresher: Refresher) -> AsyncIterator[
        Callable[[], Awaitable[DeletionCostActuator]]]:
    started: list[DeletionCostActuator] = []

    async def start() -> DeletionCostActuator:
        acting = await start_actuator(ServeSettings(kubeconfig=kubeconfig), refresher, refresher.metrics)
        assert acting is not None and acting.bridge is not None
        started.append(acting)
        return acting

    yield start
    for acting in started:
        await acting.stop()


@pytest.fixture
async def hpa(aiohttp_client: Callable[..., Awaitable[Client]], refresher: Refresher) -> Client:
    """The metrics API over the refresh loop, as the HPA reads it."""
    return await aiohttp_client(build_api_app(refresher, refresher.metrics))


async def desired(hpa: Client) -> tuple[int, float | str]:
    """(status, value) of `modelmesh_desired_replicas` as the HPA reads it; the message for an error."""
    async with hpa.get(DESIRED) as response:
        body = await response.json()
    if response.status != 200:
        return response.status, body["message"]
    value: str = body["items"][0]["value"]
    return 200, quantity_value(value)


async def listed(refresher: Refresher) -> None:
    """Until the RuntimeScale watch of the runtime's namespace has answered its first list (or failed it)."""
    async with asyncio.timeout(10):
        while refresher.scale_asks is None or not refresher.scale_asks.settled_for(KEY):
            await asyncio.sleep(0.02)


async def refresh(refresher: Refresher, clock: SteppedClock) -> None:
    clock.advance(refresher.interval_s)
    await refresher.refresh_once()


async def test_a_first_refresh_before_the_runtimescale_list_serves_nothing_below_what_the_hpa_asked(
    kube: FakeKubeApi, refresher: Refresher, clock: SteppedClock, actuator: Callable[[], Awaitable[Any]],
    hpa: Client,
) -> None:
    add_pods(kube, PODS)
    kube.add_runtime_scale(KEY.namespace, "triton", replicas=ASKED)
    slow_list = kube.delay(r"/runtimescales$", 0.5, method="GET")  # an API server under load: lists take a while
    await actuator()

    await refresh(refresher, clock)  # the refresh loop's first, before the RuntimeScale watch has listed
    status, message = await desired(hpa)
    assert status == 503, message  # the HPA holds what runs
    assert "waiting for the first list of RuntimeScales" in str(message), message

    kube.delays.remove(slow_list)
    served: list[float | str] = []
    async with asyncio.timeout(10):
        while not served or served[-1] == "held":
            await asyncio.sleep(0.05)
            await refresh(refresher, clock)
            status, value = await desired(hpa)
            served.append(value if status == 200 else "held")
    assert served[-1] == ASKED, served  # seeded at the HPA's ask, falling slowly from there


async def test_a_runtimescale_list_that_never_answers_holds_the_warm_up_for_the_grace_period_only(
    kube: FakeKubeApi, refresher: Refresher, clock: SteppedClock, actuator: Callable[[], Awaitable[Any]],
    hpa: Client, caplog: pytest.LogCaptureFixture,
) -> None:
    """An API server that takes the list and never answers (within the client's timeout, retried): the runtime is
    served from the Deployment's replicas once `warmup_grace_s` has passed, and the log says what was left out."""
    add_pods(kube, PODS)
    kube.add_runtime_scale(KEY.namespace, "triton", replicas=ASKED)
    kube.delay(r"/runtimescales$", 10.0, method="GET")
    await actuator()
    caplog.set_level(logging.INFO)

    held: list[float | str] = []
    for _ in range(int(GRACE_S / refresher.interval_s)):  # refreshes within the grace period: the HPA holds
        await refresh(refresher, clock)
        status, value = await desired(hpa)
        held.append(value if status == 200 else "held")
    assert held == ["held"] * len(held), held
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "warmup_grace_s" in r.getMessage()]

    await refresh(refresher, clock)  # the grace period is over
    assert await desired(hpa) == (200, 3.0)  # what the Deployment (3 pods) runs, never below it
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "warmup_grace_s" in
                 r.getMessage()]
    assert warning.startswith(f"runtime {KEY}: the RuntimeScale watch did not answer its first list within "
                              "warmup_grace_s, so the warm-up started from the Deployment's replicas without what "
                              "the HPA last asked of the RuntimeScale"), warning
    kube.clear_faults()


@pytest.mark.parametrize("status", [404, 403], ids=["crd-not-installed", "clusterrole-without-list"])
async def test_a_runtimescale_list_that_fails_does_not_hold_the_warm_up(
    kube: FakeKubeApi, refresher: Refresher, clock: SteppedClock, actuator: Callable[[], Awaitable[Any]],
    hpa: Client, caplog: pytest.LogCaptureFixture, status: int,
) -> None:
    """A list refused for good is no reason to wait: the runtime is served as soon as the refusal is in (the
    bridge's watch says what to apply), not after the grace period."""
    add_pods(kube, PODS)
    kube.fail(r"/runtimescales$", status=status, times=None, method="GET")
    caplog.set_level(logging.INFO)
    await actuator()

    await listed(refresher)  # the watch's first list answered, with the refusal
    await refresh(refresher, clock)
    assert await desired(hpa) == (200, 3.0)
    async with asyncio.timeout(10):  # and the bridge says why there is no RuntimeScale to read
        while not [r for r in caplog.records if r.name == "autoscaler.actuation.bridge" and r.levelno == logging.WARNING
                   and "RuntimeScale" in r.getMessage()]:
            await asyncio.sleep(0.05)
    kube.clear_faults()


async def test_a_runtime_without_a_runtimescale_is_served_once_its_namespace_is_listed(
    kube: FakeKubeApi, refresher: Refresher, clock: SteppedClock, actuator: Callable[[], Awaitable[Any]],
    hpa: Client,
) -> None:
    """Nothing to wait for but the list: a runtime no RuntimeScale scales starts from its Deployment."""
    add_pods(kube, PODS)
    await actuator()
    await listed(refresher)
    await refresh(refresher, clock)
    assert await desired(hpa) == (200, 3.0)


async def test_the_refresh_loop_starts_once_the_runtimescales_are_listed(
    kube: FakeKubeApi, refresher: Refresher, actuator: Callable[[], Awaitable[Any]], hpa: Client,
) -> None:
    """The common case, an API server that lists in a round trip: the loop's first refresh waits for it, so a
    restarted adapter serves what the HPA asked at once, with no refresh of 503s before."""
    add_pods(kube, PODS)
    kube.add_runtime_scale(KEY.namespace, "triton", replicas=ASKED)
    kube.delay(r"/runtimescales$", 0.3, method="GET")
    await actuator()
    loop = asyncio.create_task(refresher.run())
    try:
        async with asyncio.timeout(10):
            while not refresher.ready:
                await asyncio.sleep(0.02)
        assert await desired(hpa) == (200, ASKED)
    finally:
        loop.cancel()
        kube.clear_faults()
