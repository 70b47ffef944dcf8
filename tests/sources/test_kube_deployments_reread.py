"""A Deployment read by name and the full resync overlap: whichever read started later wins.

The fake API server reads its state only when it answers, so it cannot show the race a real server can: a
list that read `replicas: 2` still in flight while a read by name returns the 0 that came after. Here the
reads are replaced by ones that take the cluster's state when they start and answer when the test says.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from autoscaler.model import RuntimeKey
from autoscaler.sources.kube_deployments import DeploymentResync
from autoscaler.sources.kube_objects import RuntimeRecord, fallback_selector

KEY = RuntimeKey("modelmesh-serving", "modelmesh-serving-triton")


class SlowCluster:
    """Reads that see `replicas` as it is when they start, and answer once their gate opens."""

    def __init__(self, resync: DeploymentResync) -> None:
        self.replicas = 2
        self.list_gate, self.get_gate = asyncio.Event(), asyncio.Event()
        self.list_gate.set()
        self.get_gate.set()
        resync.deployments.list_deployments = self.list  # type: ignore[method-assign]
        resync.deployments.read_discovered = self.get  # type: ignore[method-assign]

    def record(self) -> RuntimeRecord:
        return RuntimeRecord(KEY, fallback_selector(KEY), self.replicas)

    async def list(self, api: Any, namespace: str | None, name: str | None = None) -> list[RuntimeRecord]:
        seen = self.record()
        await self.list_gate.wait()
        return [seen]

    async def get(self, api: Any, key: RuntimeKey) -> RuntimeRecord:
        seen = self.record()
        await self.get_gate.wait()
        return seen


@pytest.fixture
def resync() -> DeploymentResync:
    return DeploymentResync(lambda: None, static=(), discover=True, namespaces=None,  # type: ignore[arg-type,return-value]
                            label_selector="modelmesh-service", resync_interval_s=3600.0, request_timeout_s=1.0,
                            backoff=lambda failures: 0.0, on_change=lambda: None)


async def test_a_resync_that_read_before_a_read_by_name_does_not_put_the_old_replicas_back(
    resync: DeploymentResync,
) -> None:
    cluster = SlowCluster(resync)
    await resync._refresh()
    cluster.list_gate.clear()
    full = asyncio.create_task(resync._refresh())  # lists: replicas 2 ...
    await asyncio.sleep(0)
    cluster.replicas = 0  # ... scaled to zero; the pods go, and the runtime is read by name
    await resync._reread_one(KEY)
    assert resync.runtimes[KEY].replicas == 0

    cluster.list_gate.set()  # the list answers what it read: 2
    await full
    assert resync.runtimes[KEY].replicas == 0
    cluster.replicas = 3
    await resync._refresh()  # a later resync wins again
    assert resync.runtimes[KEY].replicas == 3


async def test_a_read_by_name_that_started_before_a_resync_does_not_undo_it(resync: DeploymentResync) -> None:
    cluster = SlowCluster(resync)
    await resync._refresh()
    cluster.get_gate.clear()
    by_name = asyncio.create_task(resync._reread_one(KEY))  # reads 2 ...
    await asyncio.sleep(0)
    cluster.replicas = 0
    await resync._refresh()  # ... the resync reads 0 and answers first
    assert resync.runtimes[KEY].replicas == 0

    cluster.get_gate.set()
    await by_name
    assert resync.runtimes[KEY].replicas == 0
