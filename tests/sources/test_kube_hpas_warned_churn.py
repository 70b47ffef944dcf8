"""The warning about an HPA named like its runtime Deployment, under HPA churn: said once per HPA there, and what
the watch remembers of the HPAs it warned about bounded, however many come and go.

Before, every HPA ever warned about was remembered for as long as the adapter ran: a cluster whose GitOps or
CI creates and deletes such HPAs (one per preview environment, say) grew that memory without end."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from autoscaler.model import RuntimeKey
from autoscaler.sources.kube_hpas import GONE_HPAS_REMEMBERED, HpaWatch
from tests.fakes.kube import FakeKubeApi
from tests.sources.test_kube_hpas import NS, started_watch, warnings_of
from tests.support.waiting import eventually

LIVE = 3
"""HPAs there all along, among the churn."""

CHURNED = GONE_HPAS_REMEMBERED + 200
"""HPAs created and deleted, more than the watch remembers of those gone."""


def runtime(index: int) -> RuntimeKey:
    return RuntimeKey(NS, f"modelmesh-serving-rt{index}")


def add_misnamed_hpa(kube: FakeKubeApi, index: int, max_replicas: int = 4) -> None:
    """An HPA of ours (on the RuntimeScale, with the adapter's metric) named like the runtime Deployment."""
    kube.add_hpa(NS, runtime(index).deployment, max_replicas=max_replicas, target=("RuntimeScale", f"rt{index}"),
                 metric_selector={"servingruntime": f"rt{index}"})


def warned_about(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The HPAs named in the misnamed-HPA warnings, in the order warned."""
    return [message.split()[1] for message in warnings_of(caplog) if "has the name of the runtime" in message]


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        yield server


@pytest.fixture
async def watch(kube: FakeKubeApi) -> AsyncIterator[HpaWatch]:
    subject = started_watch(kube, backoff=lambda n: 0.02)
    await subject.start()
    yield subject
    await subject.close()


async def test_churned_hpas_are_warned_about_once_each_and_remembered_within_a_bound(
        kube: FakeKubeApi, watch: HpaWatch, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="autoscaler.sources.kube_hpas")
    for index in range(LIVE):
        add_misnamed_hpa(kube, index)
    for index in range(LIVE, LIVE + CHURNED):
        add_misnamed_hpa(kube, index)
        kube.delete_object("horizontalpodautoscalers", NS, runtime(index).deployment)
    last = runtime(LIVE + CHURNED)
    add_misnamed_hpa(kube, LIVE + CHURNED)  # the watch has seen every event before once it has this one
    await eventually(lambda: watch.bounds(last) == (1, 4), timeout=60)
    for index in range(LIVE):  # an event of each live HPA: no second warning
        kube.set_hpa_bounds(NS, runtime(index).deployment, max_replicas=5)
    await eventually(lambda: all(watch.bounds(runtime(i)) == (1, 5) for i in range(LIVE)))

    said = warned_about(caplog)
    assert len(said) == len(set(said)) == LIVE + CHURNED + 1
    remembered = len(watch._warned_names)
    assert remembered <= LIVE + 1 + GONE_HPAS_REMEMBERED, remembered

    # One recently gone comes back (a GitOps tool applying it again): said already, not again.
    add_misnamed_hpa(kube, LIVE + CHURNED - 1, max_replicas=6)
    await eventually(lambda: watch.bounds(runtime(LIVE + CHURNED - 1)) == (1, 6))
    assert len(warned_about(caplog)) == LIVE + CHURNED + 1
