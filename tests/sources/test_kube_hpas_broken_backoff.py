"""HpaWatch given a backoff that raises (as its own did past 1,025 failures in a row, before 0acde07): the
watch keeps retrying at the fallback backoff, says so once, and reads the HPAs as soon as the server answers.

Before, the exception ended the watch's task in silence: nothing reads a background task's exception, the
HPAs' bounds never came back, and the log said nothing of it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from kubernetes.aio.client import ApiClient, Configuration

from autoscaler.model import RuntimeKey
from autoscaler.sources.kube_hpas import HpaWatch
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

NS = "modelmesh-serving"
TRITON = RuntimeKey(NS, "modelmesh-serving-triton")


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        yield server


def the_old_backoff_past_its_overflow(failures: int) -> float:
    """`min(30.0, 0.5 * 2 ** (n - 1))`, the HPA watch's backoff before 0acde07, from its 1,025th failure on."""
    return min(30.0, 0.5 * int(2 ** (failures + 1024 - 1)))


async def test_the_bounds_come_back_and_the_log_says_once_that_the_backoff_raised(
    kube: FakeKubeApi, caplog: pytest.LogCaptureFixture
) -> None:
    kube.add_hpa(NS, "triton", min_replicas=2, max_replicas=5, target=("Deployment", TRITON.deployment))
    kube.fail("/horizontalpodautoscalers", 503, times=2)
    settings = Configuration()
    settings.host = kube.url
    watch = HpaWatch(lambda: ApiClient(settings), [NS], watch_timeout_s=30,
                     backoff=the_old_backoff_past_its_overflow)
    with caplog.at_level(logging.INFO, logger="autoscaler.sources.kube_hpas"):
        await watch.start()
        try:
            await eventually(lambda: watch.bounds(TRITON) == (2, 5), timeout=30)
            assert watch.ok
        finally:
            await watch.close()
    [error] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert error.getMessage().startswith(
        "HPA watch of namespace modelmesh-serving: its backoff raised OverflowError(")
    assert "retrying anyway, waiting 0.5 s doubling to 30 s between retries instead" in error.getMessage()
    said = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("HPA watch of namespace modelmesh-serving failing") for line in said)  # recorded
    assert any("HPA watch of namespace modelmesh-serving works again" in line for line in said)
