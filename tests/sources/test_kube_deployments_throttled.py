"""How pod discovery's Deployment resync waits after a failed read. Against an API server that sheds load: a 429
with `Retry-After` (API Priority and Fairness) is obeyed, as client-go's REST client obeys it; a 0.5 s backoff of
its own came back long before the server asked, into the overload. Given a backoff that raises: the resync goes
on at the fallback backoff, says so once, and reads the runtimes once the API server answers; before, the
exception ended its task in silence and the runtime table was never read again."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import pytest
from kubernetes.aio.client import ApiClient

from autoscaler.model import RuntimeKey
from autoscaler.sources.kube_deployments import DeploymentResync
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

NS = "modelmesh-serving"
KEY = RuntimeKey(NS, "modelmesh-serving-triton")


async def read_after_failures(client: ApiClient, backoff: Callable[[int], float]) -> list[float]:
    """Run a resync of NS's Deployments until it has read KEY's; the waits it asked for meanwhile."""
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.sleep(0)

    resync = DeploymentResync(lambda: client, static=(), discover=True, namespaces=[NS],
                              label_selector="modelmesh-service", resync_interval_s=30.0, request_timeout_s=2.0,
                              backoff=backoff, on_change=lambda: None, sleep=sleep)
    task = asyncio.create_task(resync.run(asyncio.Event()))
    try:
        await eventually(lambda: resync.ok and KEY in resync.runtimes)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return waits


async def test_a_throttled_resync_waits_as_long_as_the_server_asks(api: tuple[FakeKubeApi, ApiClient]) -> None:
    kube, client = api
    kube.add_modelmesh_runtime(NS, KEY.deployment, replicas=2)
    kube.fail("/deployments$", 429, times=1, retry_after=7)

    waits = await read_after_failures(client, lambda failures: 0.5)

    assert waits[0] == 7  # the server's Retry-After, not the 0.5 s backoff


def broken_backoff(failures: int) -> float:
    raise ZeroDivisionError("division by zero")


async def test_the_runtimes_come_back_and_the_log_says_once_that_the_backoff_raised(
    api: tuple[FakeKubeApi, ApiClient], caplog: pytest.LogCaptureFixture
) -> None:
    kube, client = api
    kube.add_modelmesh_runtime(NS, KEY.deployment, replicas=2)
    kube.fail("/deployments$", 503, times=3)
    waits = await read_after_failures(client, broken_backoff)
    assert waits[:3] == [0.5, 1.0, 2.0]  # the fallback backoff, then the resync interval
    [error] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert error.getMessage().startswith(
        "Kubernetes discovery: the resync of runtime Deployments: its backoff raised ZeroDivisionError('division by "
        "zero') (failures in a row: 1); retrying anyway, waiting 0.5 s doubling to 30 s between retries instead")
