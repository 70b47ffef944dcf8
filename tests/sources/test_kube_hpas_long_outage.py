"""HpaWatch after an outage of the API server that outlasts a thousand retries: the bounds still come back.

The default backoff doubles from 0.5 s to 30 s; at the cap, 1,025 failures in a row are eight and a half hours
of an API server refusing HPA lists (a broken aggregation layer, an RBAC change undone after a weekend). The
watch must still be retrying then, at the cap, and read the HPAs as soon as the server answers again.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable

import pytest
from kubernetes.aio.client import ApiClient, Configuration

from autoscaler.model import RuntimeKey
from autoscaler.sources.kube_hpas import HpaWatch
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

NS = "modelmesh-serving"
TRITON = RuntimeKey(NS, "modelmesh-serving-triton")
FAILURES = 1030
"""Past the 1,025th failure in a row, where 0.5 · 2^(n-1) no longer fits in a float."""


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        yield server


async def test_the_bounds_come_back_after_a_thousand_failed_lists_with_every_wait_at_most_30_s(
    kube: FakeKubeApi,
) -> None:
    default: Callable[[int], float] = inspect.signature(HpaWatch).parameters["backoff"].default
    waits: list[float] = []

    def at_once(failures: int) -> float:
        """The default backoff's wait, recorded, and none taken: eight hours of retries in seconds."""
        waits.append(default(failures))
        return 0.0

    kube.add_hpa(NS, "triton", min_replicas=2, max_replicas=5, target=("Deployment", TRITON.deployment))
    kube.fail("/horizontalpodautoscalers", 503, times=FAILURES)
    settings = Configuration()
    settings.host = kube.url
    watch = HpaWatch(lambda: ApiClient(settings), [NS], watch_timeout_s=30, backoff=at_once)
    await watch.start()
    try:
        await eventually(lambda: watch.bounds(TRITON) == (2, 5), timeout=120)
        assert watch.ok
    finally:
        await watch.close()
    assert len(waits) == FAILURES
    assert waits[:3] == [0.5, 1.0, 2.0]
    assert max(waits) == 30.0 and waits[-1] == 30.0
