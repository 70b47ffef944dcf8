"""Pod discovery's Deployment resync against an API server that sheds load: a 429 with `Retry-After` (API
Priority and Fairness) is obeyed, as client-go's REST client obeys it; a 0.5 s backoff of its own came back
long before the server asked, into the overload."""

from __future__ import annotations

import asyncio
import contextlib

from kubernetes.aio.client import ApiClient

from autoscaler.model import RuntimeKey
from autoscaler.sources.kube_deployments import DeploymentResync
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

NS = "modelmesh-serving"
KEY = RuntimeKey(NS, "modelmesh-serving-triton")


async def test_a_throttled_resync_waits_as_long_as_the_server_asks(api: tuple[FakeKubeApi, ApiClient]) -> None:
    kube, client = api
    kube.add_modelmesh_runtime(NS, KEY.deployment, replicas=2)
    kube.fail("/deployments$", 429, times=1, retry_after=7)
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.sleep(0)

    resync = DeploymentResync(lambda: client, static=(), discover=True, namespaces=[NS],
                              label_selector="modelmesh-service", resync_interval_s=30.0, request_timeout_s=2.0,
                              backoff=lambda failures: 0.5, on_change=lambda: None, sleep=sleep)
    task = asyncio.create_task(resync.run(asyncio.Event()))
    try:
        await eventually(lambda: resync.ok and KEY in resync.runtimes)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert waits[0] == 7  # the server's Retry-After, not the 0.5 s backoff
