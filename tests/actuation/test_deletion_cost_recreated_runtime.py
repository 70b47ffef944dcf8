"""A runtime deleted and created again under its name (`kubectl replace --force`) within one refresh is another
runtime to the deletion-cost writer too: the refresher has it forget the old one (`autoscaler.forgetting`). The
writer remembered the old object's scale-down (3 of 4 replicas), so the new object's first scale-down, the same
pair, was no news: not said, and its costs not hurried ahead of their minute while the ranking hold held it."""

from __future__ import annotations

import logging

import pytest

from autoscaler.actuation.deletion_cost import DeletionCostWriter, WriterSettings
from autoscaler.kube.client import KubeClient
from autoscaler.selfmetrics import AdapterMetrics
from tests.actuation.conftest import KEY, SteppedClock, add_pods, pod_view, runtime_view
from tests.fakes.kube import FakeKubeApi

URGENT = f"runtime {KEY}: recommendation 3 is below 4 replicas; writing deletion costs now"


async def test_a_runtime_created_again_has_its_first_scale_down_written_at_once(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="autoscaler.actuation.deletion_cost")
    writer = DeletionCostWriter(kube_client, AdapterMetrics(), settings=WriterSettings(qps=None), clock=clock,
                                rand=lambda: 1.0)
    old, new = ["old-a", "old-b", "old-c", "old-d"], ["new-a", "new-b", "new-c", "new-d"]
    add_pods(kube, old + new)
    writer.offer({KEY: runtime_view([pod_view(name, 500) for name in old], desired=3.0, current=4)})
    await writer.sync()
    assert [r.getMessage() for r in caplog.records].count(URGENT) == 1

    clock.advance(15.0)
    writer.forget(KEY)  # the refresher saw a new Deployment uid under the name
    writer.offer({KEY: runtime_view([pod_view(name, 500) for name in new], desired=3.0, current=4)})
    await writer.sync()
    assert [r.getMessage() for r in caplog.records].count(URGENT) == 2
