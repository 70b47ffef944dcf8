"""`modelmesh_autoscaler_deletion_cost_passes_total`: how an operator sees that the leader's deletion-cost writer
is alive. Its PATCH counters move only when a cost changes or a pod is due its 5-minute rewrite (and with the
pod watch, only where a pod carries something else), so a quiet fleet shows them flat whether the writer works
or has stopped; the passes counter moves at every refresh on the leader, and stays at 0 on a replica that does
not lead."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.kube.client import KubeClient
from tests.actuation.conftest import SteppedClock, add_pods, views_of
from tests.actuation.test_deletion_cost_hold import Cluster, cluster  # noqa: F401  # the fixture
from tests.actuation.test_deletion_cost_writer import make_writer, sample
from tests.fakes.kube import FakeKubeApi

PASSES = "modelmesh_autoscaler_deletion_cost_passes_total"


async def scraped_passes(api: TestClient[Any, Any]) -> float:
    """The counter as Prometheus scrapes it from `api`'s /metrics."""
    response = await api.get("/metrics")
    assert response.status == 200, await response.text()
    found = [sample.value for family in text_string_to_metric_families(await response.text())
             for sample in family.samples if sample.name == PASSES]
    assert found, f"no {PASSES} on /metrics"
    return found[0]


async def test_the_leaders_passes_count_up_at_every_refresh_with_nothing_to_write(
        cluster: Cluster) -> None:  # noqa: F811
    """The first costs are on the pods and the load is steady: no PATCH is due at the next refreshes, and the
    counter still moves at each, as Prometheus reads it."""
    await cluster.written()
    seen = [await scraped_passes(cluster.api)]
    patches = len(cluster.kube.patches)
    for _ in range(3):
        await cluster.refresh()
        await cluster.written()
        seen.append(await scraped_passes(cluster.api))
    assert len(cluster.kube.patches) == patches  # nothing written: the PATCH counters stood still
    assert seen == sorted(seen) and len(set(seen)) == len(seen), seen  # up at each refresh


async def test_a_replica_not_leading_publishes_the_counter_at_zero_and_never_moves_it(
        kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock) -> None:
    add_pods(kube, ["pod-a", "pod-b"])
    writer, metrics = make_writer(kube_client, clock, may_write=lambda: False)
    assert sample(metrics, PASSES) == 0.0  # on the page from the start: a rate from its first scrape
    for _ in range(3):
        writer.offer(views_of({"pod-a": 900, "pod-b": 0}))
        await writer.sync()
        clock.advance(15.0)
    assert sample(metrics, PASSES) == 0.0
    assert kube.patches == []
