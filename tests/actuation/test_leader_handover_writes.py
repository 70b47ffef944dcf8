"""A leader that stops (SIGTERM in a rollout) while one of its writes is in flight, and the replica that leads
next. The API server may apply a write after its client has given up on it (admission, an etcd round trip: the
client closing its connection does not take the write back), so an old leader that releases its Lease at once
lets its stale write land after the new leader's, and the stale value stays: a pod keeps the deletion cost of an
old ranking, a ServingRuntime the replicas the HPA no longer asks for.

Two real actuators on one fake API server, on one Lease. The fake holds the old leader's write until the test
lets it go; what is checked is the order in which the API applied the writes and what the objects end up
holding, never how long anything took."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web

from autoscaler import __version__
from autoscaler.actuation.actuator import DeletionCostActuator, start_actuator
from autoscaler.names import DELETION_COST_ANNOTATION
from autoscaler.policies.config import PolicyBook
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.settings import ServeSettings
from tests.actuation.conftest import KEY, add_pods, views_of
from tests.actuation.test_actuation import SnapshotSource
from tests.fakes.kube import JSON, FakeKubeApi
from tests.fakes.kube.faults import RECORD, RecordedRequest

NS = KEY.namespace
POD = "pod-a"
# A client timeout of 5 s (half the 10 s margin, at most 5): the held write is let go well before its client gives
# up, whatever the load. A short retry period: the next leader tries the Lease often.
LEASE = {"leader_elect_lease_duration_s": 20.0, "leader_elect_renew_deadline_s": 10.0,
         "leader_elect_retry_period_s": 0.1}
WAIT_S = 15.0
ASKED_TO_STOP_S = 1.0
"""How long the test lets the old leader's stop run before it lets the held write go: a stop that does not wait
for its writes has released the Lease by then, and the new leader's write lands before the old one."""


@dataclass
class Hold:
    """Writes from `identity` to one object, held once the server has them, until `release()`."""

    identity: str
    method: str
    resource: str
    name: str
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    applied: asyncio.Event = field(default_factory=asyncio.Event)

    def matches(self, record: RecordedRequest) -> bool:
        return (record.method, record.resource, record.name) == (self.method, self.resource, self.name) \
            and agent_of(record) == self.identity

    def release(self) -> None:
        self.gate.set()


@dataclass(frozen=True)
class Applied:
    """A write as the server applied it: who sent it, to what, with which body."""

    identity: str | None
    resource: str | None
    name: str | None
    body: object


def agent_of(record: RecordedRequest) -> str | None:
    """The identity in the adapter's User-Agent (`modelmesh-autoscaler/<version> (<identity>)`)."""
    agent = record.headers.get("User-Agent", "")
    return agent.rpartition("(")[2].rstrip(")") if agent.startswith(f"modelmesh-autoscaler/{__version__}") else None


class HoldingKubeApi(FakeKubeApi):
    """The fake API server, with writes that can be held after they arrived and are applied even when their
    client has gone away meanwhile, as a busy API server applies a write it has started on. `applied` is every
    write in the order it took effect."""

    def __init__(self) -> None:
        super().__init__()
        self.holds: list[Hold] = []
        self.applied: list[Applied] = []

    def hold(self, identity: str, method: str, resource: str, name: str) -> Hold:
        hold = Hold(identity, method, resource, name)
        self.holds.append(hold)
        return hold

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        record = request[RECORD]
        hold = next((h for h in self.holds if not h.gate.is_set() and h.matches(record)), None)
        if hold is None:
            return await self._apply(request, record)
        hold.arrived.set()
        # shielded: the client closing its connection cancels this handler, not the write
        return await asyncio.shield(self._apply_when_released(hold, request, record))

    async def _apply_when_released(self, hold: Hold, request: web.Request,
                                   record: RecordedRequest) -> web.StreamResponse:
        await hold.gate.wait()
        try:
            return await self._apply(request, record)
        finally:
            hold.applied.set()

    async def _apply(self, request: web.Request, record: RecordedRequest) -> web.StreamResponse:
        response = await super()._dispatch(request)
        if record.method in ("PATCH", "PUT", "POST") and record.resource != "leases":
            self.applied.append(Applied(agent_of(record), record.resource, record.name, record.body))
        return response


@pytest.fixture
async def kube() -> AsyncIterator[HoldingKubeApi]:
    kube = HoldingKubeApi()
    async with kube:
        yield kube


@pytest.fixture(autouse=True)
def outside_a_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


async def wait_for(condition: Callable[[], object], what: str, timeout: float = WAIT_S) -> None:
    try:
        async with asyncio.timeout(timeout):
            while not condition():
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"not within {timeout:g} s: {what}") from None


def holder(kube: FakeKubeApi) -> str | None:
    lease = kube.get("leases", NS, "modelmesh-autoscaler")
    return None if lease is None else (lease.get("spec") or {}).get("holderIdentity") or None


@pytest.fixture
async def actuators() -> AsyncIterator[list[DeletionCostActuator]]:
    started: list[DeletionCostActuator] = []
    yield started
    for actuator in started:
        await actuator.stop()


async def two_replicas(kube: HoldingKubeApi, kubeconfig: Path, started: list[DeletionCostActuator],
                       **settings: bool) -> tuple[DeletionCostActuator, DeletionCostActuator]:
    """The old replica leading, the new one following, on the same Lease."""
    replicas = []
    for identity in ("old", "new"):
        refresher = Refresher(SnapshotSource(), PolicyBook(), AdapterMetrics())
        serve = ServeSettings(kubeconfig=kubeconfig, leader_elect=True, **LEASE, **settings)  # type: ignore[arg-type]
        actuator = await start_actuator(serve, refresher, refresher.metrics, identity=identity)
        assert actuator is not None and actuator.elector is not None
        started.append(actuator)
        replicas.append(actuator)
        if identity == "old":
            await wait_for(lambda: holder(kube) == "old", "the old replica leads")
    return replicas[0], replicas[1]


async def stop_while_held(kube: HoldingKubeApi, old: DeletionCostActuator, hold: Hold,
                          new_write_landed: Callable[[], bool]) -> None:
    """SIGTERM's part for the actuator: stop the old leader while its write is held. A stop that releases the
    Lease at once lets the new leader write first; the held write is then let go, as a slow API server finally
    applies it."""
    await wait_for(hold.arrived.is_set, "the old leader's write reaches the API server")
    stopping = asyncio.create_task(old.stop())
    await asyncio.wait({stopping}, timeout=ASKED_TO_STOP_S)
    if stopping.done():  # it did not wait for its write: the Lease is free, and the next leader writes
        await wait_for(new_write_landed, "the new leader writes")
    hold.release()
    await stopping
    await wait_for(lambda: holder(kube) == "new", "the new replica leads")
    await wait_for(new_write_landed, "the new leader writes")
    await wait_for(hold.applied.is_set, "the API server applies the old leader's write")


async def test_a_deletion_cost_the_old_leader_sent_before_stopping_never_lands_after_the_new_leaders(
    kube: HoldingKubeApi, kubeconfig: Path, actuators: list[DeletionCostActuator]
) -> None:
    add_pods(kube, [POD])
    old, new = await two_replicas(kube, kubeconfig, actuators, bridge=False)
    assert old.writer is not None and new.writer is not None
    hold = kube.hold("old", "PATCH", "pods", POD)
    old.writer.offer(views_of({POD: 100}))  # the old ranking
    new.writer.offer(views_of({POD: 900}))  # the new one: written once this replica leads

    def new_cost_applied() -> bool:
        return any(a.identity == "new" and a.name == POD for a in kube.applied)

    await stop_while_held(kube, old, hold, new_cost_applied)

    cost = kube.pod_annotations(NS, POD).get(DELETION_COST_ANNOTATION)
    assert cost == "900", f"the pod keeps the old leader's stale cost {cost}"
    assert [a.identity for a in kube.applied if a.name == POD] == ["old", "new"], kube.applied


async def test_servingruntime_replicas_the_old_leader_sent_before_stopping_never_land_after_the_new_leaders(
    kube: HoldingKubeApi, kubeconfig: Path, actuators: list[DeletionCostActuator]
) -> None:
    kube.add_serving_runtime(NS, "triton", replicas=3)
    kube.add_modelmesh_runtime(NS, KEY.deployment, replicas=3)
    hold = kube.hold("old", "PATCH", "servingruntimes", "triton")
    kube.add_runtime_scale(NS, "triton", replicas=5)  # the HPA asks for 5; the old leader carries it over
    old, _ = await two_replicas(kube, kubeconfig, actuators, deletion_cost=False, bridge=True)
    await wait_for(hold.arrived.is_set, "the old leader's write of 5 replicas reaches the API server")

    def scale_to_7(scale: JSON) -> None:
        scale["spec"]["replicas"] = 7

    kube.update_object("runtimescales", NS, "triton", scale_to_7)  # then for 7, while the Lease changes hands

    def new_replicas_applied() -> bool:
        return any(a.identity == "new" and a.name == "triton" and a.resource == "servingruntimes"
                   for a in kube.applied)

    await stop_while_held(kube, old, hold, new_replicas_applied)

    replicas = kube.serving_runtime_replicas(NS, "triton")
    assert replicas == 7, f"the runtime is scaled to the old leader's stale {replicas} replicas"
    written = [(a.identity, a.body) for a in kube.applied if a.resource == "servingruntimes"]
    assert [identity for identity, _ in written] == ["old", "new"], written


async def leader_with_a_held_write(kube: HoldingKubeApi, kubeconfig: Path,
                                   actuators: list[DeletionCostActuator]) -> tuple[DeletionCostActuator, Hold]:
    """The old replica leading (the new one following), its write of a deletion cost arrived at the API server and
    held there, unanswered."""
    add_pods(kube, [POD])
    old, _ = await two_replicas(kube, kubeconfig, actuators, bridge=False)
    assert old.writer is not None
    hold = kube.hold("old", "PATCH", "pods", POD)
    old.writer.offer(views_of({POD: 100}))
    await wait_for(hold.arrived.is_set, "the old leader's write reaches the API server")
    return old, hold


async def test_a_write_that_got_no_answer_leaves_the_lease_to_expire(
    kube: HoldingKubeApi, kubeconfig: Path, actuators: list[DeletionCostActuator]
) -> None:
    """The old leader's write is still held when its client gives up (the client timeout): it may land at any
    moment, so the Lease is not released and the next leader waits for it to expire."""
    old, hold = await leader_with_a_held_write(kube, kubeconfig, actuators)
    mark = len(kube.requests)

    await old.stop()  # returns once the write's client timeout has passed

    assert holder(kube) == "old", "the Lease was released while a write of its term could still land"
    assert not [r for r in kube.requests[mark:] if r.resource == "leases" and r.method == "PUT"
                and agent_of(r) == "old" and not (r.body or {}).get("spec", {}).get("holderIdentity")]
    hold.release()
    await wait_for(hold.applied.is_set, "the API server applies the held write")


async def test_a_stopping_leader_renews_the_lease_no_more_while_it_waits_for_its_writes(
    kube: HoldingKubeApi, kubeconfig: Path, actuators: list[DeletionCostActuator]
) -> None:
    """SIGTERM: no write starts from then on, and those in flight were sent within the leader's term, which the renew
    deadline's margin already covers as for a leader that can no longer renew. Renewing on while it waited for them
    (the client timeout and 0.5 s) only pushed the Lease's expiry, where it is left to expire, that much later: the
    next leader took over 15-27 s after the SIGTERM at the defaults instead of 13-24 s. It renews no more."""
    old, hold = await leader_with_a_held_write(kube, kubeconfig, actuators)
    mark = len(kube.requests)

    await old.stop()  # returns once the write's client timeout has passed: 5.5 s, 55 retry periods

    renewals = [r for r in kube.requests[mark:] if r.resource == "leases" and r.method == "PUT"
                and agent_of(r) == "old" and (r.body or {}).get("spec", {}).get("holderIdentity") == "old"]
    assert len(renewals) <= 1, f"{len(renewals)} renewals after the SIGTERM"  # (one may be on its way as it comes)
    assert holder(kube) == "old", "the Lease was released while a write of its term could still land"
    hold.release()
    await wait_for(hold.applied.is_set, "the API server applies the held write")
