"""Two replicas, each behind its own fault proxy to one (fake) API server, write deletion costs as fast as the
views allow. Whatever the network does to the leader (slow answers to its renewals, then a partition from
the Lease), the server never takes a pod write from a replica while the Lease names another holder: no two
leaders ever write in the same interval.

The order of events is the server's own (`RecordedRequest.answered`): Lease writes that change the holder,
and pod patches by the User-Agent that carries each replica's identity.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from autoscaler.actuation.actuator import DeletionCostActuator, start_actuator
from autoscaler.policies.config import PolicyBook
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.settings import ServeSettings
from tests.actuation.conftest import KEY, add_pods, views_of
from tests.fakes.kube import FakeKubeApi
from tests.hardening.fault_proxy import FaultProxy
from tests.sources.static_discovery import StaticDiscovery

pytestmark = pytest.mark.slow

PODS = ("pod-a", "pod-b", "pod-c")
LEASE_S, RENEW_S, RETRY_S = 3.0, 2.5, 0.2
LEASES = r"/leases"


@pytest.fixture(autouse=True)
def outside_a_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


async def replica(kube: FakeKubeApi, proxy: FaultProxy, workdir: Path, name: str) -> DeletionCostActuator:
    kubeconfig = kube.write_kubeconfig(workdir / f"kubeconfig-{name}", namespace=KEY.namespace)
    kubeconfig.write_text(kubeconfig.read_text().replace(kube.url, proxy.url))
    settings = ServeSettings(kubeconfig=kubeconfig, leader_elect=True, leader_elect_lease_duration_s=LEASE_S,
                             leader_elect_renew_deadline_s=RENEW_S, leader_elect_retry_period_s=RETRY_S)
    from autoscaler.sources.scrape import ScrapeSource

    refresher = Refresher(ScrapeSource(StaticDiscovery()), PolicyBook(), AdapterMetrics())
    actuator = await start_actuator(settings, refresher, refresher.metrics, identity=name)
    assert actuator is not None
    return actuator


async def keep_offering(actuators: list[DeletionCostActuator]) -> None:
    """New costs and a recommendation that keeps falling below the replicas: every view is urgent, so a
    replica that believes it leads writes every pod at once, every tenth of a second."""
    for step in itertools.count():
        costs = {pod: (step * 100 + index * 10) % 1000 for index, pod in enumerate(PODS)}
        views = views_of(costs, desired=2.9 - (step % 100) * 0.01, current=3)
        for actuator in actuators:
            assert actuator.writer is not None
            actuator.writer.offer(views)
        await asyncio.sleep(0.1)


def writes_against_the_lease(kube: FakeKubeApi) -> tuple[dict[str, int], list[str]]:
    """Pod writes by replica, and every pod write the server took while the Lease named someone else."""
    holder = None
    counts: dict[str, int] = {}
    wrong: list[str] = []
    for request in sorted((r for r in kube.requests if r.answered is not None), key=lambda r: r.answered or 0):
        if request.status is None or request.status >= 300:
            continue
        if request.resource == "leases" and request.method in ("PUT", "POST"):
            holder = (request.body.get("spec") or {}).get("holderIdentity") or None
        elif request.resource == "pods" and request.method == "PATCH":
            writer = request.headers.get("User-Agent", "").rsplit("(", 1)[-1].rstrip(")")
            counts[writer] = counts.get(writer, 0) + 1
            if writer != holder:
                wrong.append(f"write #{request.answered} by {writer} while the Lease named {holder}")
    return counts, wrong


async def wait_for(condition: Callable[[], object], timeout: float, what: str) -> None:
    try:
        async with asyncio.timeout(timeout):
            while not condition():
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"not within {timeout} s: {what}") from None


def lease_holder(kube: FakeKubeApi) -> str | None:
    lease = kube.get("leases", KEY.namespace, "modelmesh-autoscaler")
    return (lease or {}).get("spec", {}).get("holderIdentity") or None


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as fake:
        add_pods(fake, PODS)
        yield fake


async def test_a_leader_with_slow_renewals_then_cut_off_never_writes_beside_its_successor(
    kube: FakeKubeApi, tmp_path: Path
) -> None:
    async with FaultProxy(kube.url) as to_a, FaultProxy(kube.url) as to_b:
        a = await replica(kube, to_a, tmp_path, "replica-a")
        actuators = [a]
        offering = asyncio.create_task(keep_offering(actuators))
        try:
            await wait_for(lambda: lease_holder(kube) == "replica-a" and writes_against_the_lease(kube)[0], 30,
                           "replica-a leads and writes")
            actuators.append(await replica(kube, to_b, tmp_path, "replica-b"))
            await asyncio.sleep(1.0)
            # Answers to replica-a's Lease writes come back 2 s late (each write itself lands at once)...
            to_a.hold_answer(LEASES, 2.0, method="PUT")
            await asyncio.sleep(4.0)
            # ...then replica-a cannot reach the Lease at all; its pod writes still go through.
            to_a.refuse(LEASES)
            await wait_for(lambda: lease_holder(kube) == "replica-b", 30, "replica-b takes over")
            await wait_for(lambda: writes_against_the_lease(kube)[0].get("replica-b"), 30, "replica-b writes")
            await asyncio.sleep(3.0)  # a window for replica-a to write beside its successor, as it did
        finally:
            offering.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await offering
            for actuator in actuators:
                await actuator.stop()
    counts, wrong = writes_against_the_lease(kube)
    assert counts.get("replica-a", 0) > 0 and counts.get("replica-b", 0) > 0, counts
    assert wrong == [], f"{len(wrong)} writes against the Lease, first: {wrong[:3]}"
