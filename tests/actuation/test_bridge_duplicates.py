"""Two RuntimeScales on one ServingRuntime (docs/design.md, one RuntimeScale per ServingRuntime): the oldest owns
the runtime on every path (full pass, the watch's hand-over, `replicas_for`), the other writes nothing and says
so in its status, once in the log; ownership moves when the owner goes or the copy is pointed elsewhere."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Iterator
from functools import partial
from typing import Any

import aiohttp
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from autoscaler.actuation.bridge import ReplicaBridge
from autoscaler.kube.client import KubeClient
from autoscaler.simulation.hpa_spec import HpaSpec, MetricSpec
from tests.actuation.conftest import SteppedClock, connected
from tests.fakes.kube import FakeKubeApi
from tests.support.hpa_step import HpaStep

NS = "ml"
JSON = dict[str, Any]


def ready(kube: FakeKubeApi, name: str) -> JSON:
    [condition] = [c for c in kube.stored("runtimescales", NS, name)["status"]["conditions"] if c["type"] == "Ready"]
    return condition  # type: ignore[no-any-return]


def runtime_writes(kube: FakeKubeApi) -> list[JSON]:
    return [r.body for r in kube.requests if r.method == "PATCH" and r.resource == "servingruntimes"]


def set_by_hand_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "outside RuntimeScale" in r.getMessage()]


@contextlib.contextmanager
def capture_warnings() -> Iterator[list[str]]:
    """The bridge's log lines at WARNING and above while the block runs (caplog is per test, not per example)."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler, logger = Keep(logging.WARNING), logging.getLogger("autoscaler.actuation.bridge")
    logger.addHandler(handler)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)


@pytest.fixture
def bridge(kube_client: KubeClient, clock: SteppedClock) -> ReplicaBridge:
    return ReplicaBridge(kube_client, namespaces=[NS], clock=clock, rand=lambda: 1.0)


@pytest.fixture
def runtimes(kube: FakeKubeApi) -> None:
    for name in ("triton", "ovms"):
        kube.add_serving_runtime(NS, name, replicas=2)
        kube.add_modelmesh_runtime(NS, f"modelmesh-serving-{name}", replicas=2)


def created_at(kube: FakeKubeApi, moment: float, name: str, **spec: Any) -> JSON:
    """A RuntimeScale whose creationTimestamp is `moment` (Unix seconds)."""
    before = kube.clock
    kube.clock = lambda: moment
    try:
        return kube.add_runtime_scale(NS, name, **spec)
    finally:
        kube.clock = before


async def test_the_oldest_owns_the_runtime_whatever_the_names(
    kube: FakeKubeApi, bridge: ReplicaBridge, runtimes: None, caplog: pytest.LogCaptureFixture
) -> None:
    """Age, not name, decides: a copy named to sort first, applied later, does not take the runtime over."""
    created_at(kube, 1_700_000_000, "triton", replicas=5)
    created_at(kube, 1_700_000_100, "a-copy", serving_runtime="triton", replicas=3)

    with caplog.at_level(logging.DEBUG, "autoscaler.actuation.bridge"):
        for _ in range(3):
            await bridge.sync()

    assert kube.serving_runtime_replicas(NS, "triton") == 5
    assert [w["spec"]["replicas"] for w in runtime_writes(kube)] == [5]
    assert ready(kube, "triton")["status"] == "True"
    refused = ready(kube, "a-copy")
    assert (refused["status"], refused["reason"]) == ("False", "DuplicateRuntimeScale")
    assert ("ServingRuntime triton is scaled by RuntimeScale triton (created 2023-11-14T22:13:20Z, the oldest "
            "that names it)") in refused["message"]
    assert "delete this one or point spec.servingRuntime at another runtime" in refused["message"]
    # Said once (a WARNING as its Ready reason changed), not every pass; never taken for a hand edit.
    duplicates = [r for r in caplog.records if "DuplicateRuntimeScale" in r.getMessage()]
    assert [r.levelno for r in duplicates] == [logging.WARNING]
    assert "ml/a-copy" in duplicates[0].getMessage()
    assert set_by_hand_warnings(caplog) == []


async def test_a_duplicates_hpa_stops_alone_and_the_owners_hpa_keeps_scaling(
    kube: FakeKubeApi, bridge: ReplicaBridge, runtimes: None
) -> None:
    """A copy exported with `kubectl get -o yaml` carries spec.replicas, so its HPA can read its scale. That
    scale advertised the runtime's pod selector too: the HPA controller then saw two HPAs over the same pods and
    set AmbiguousSelector (ScalingActive False) on both, the owner's included, while the owner said Bridged.
    The copy publishes no selector: only its own HPA stops ("selector is required")."""
    created_at(kube, 1_700_000_000, "triton", replicas=2)
    created_at(kube, 1_700_000_100, "triton-copy", serving_runtime="triton", replicas=3)
    await bridge.sync()

    async def six() -> float:
        return 6.0

    def hpa_of(name: str) -> HpaStep:
        return HpaStep(f"{kube.url}/apis/autoscaler.modelmesh.io/v1alpha1/namespaces/{NS}/runtimescales/{name}/scale",
                       six, HpaSpec((MetricSpec("m", "External", "AverageValue", 1.0),)))

    owners_hpa, copys_hpa = hpa_of("triton"), hpa_of("triton-copy")
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer test-token"}) as session:
        for hpa in (owners_hpa, copys_hpa):
            await hpa.sync(session)
        scales = {name: await (await session.get(hpa.scale_url)).json()
                  for name, hpa in (("triton", owners_hpa), ("triton-copy", copys_hpa))}
    await bridge.sync()

    # Only the owner's scale selects the runtime's pods: one HPA over them, never two.
    assert [name for name, scale in scales.items() if scale["status"].get("selector")] == ["triton"]
    assert copys_hpa.events == ["InvalidSelector selector is required"]
    assert owners_hpa.events == ["SuccessfulRescale 2 -> 6"]
    assert kube.serving_runtime_replicas(NS, "triton") == 6
    assert ready(kube, "triton-copy")["reason"] == "DuplicateRuntimeScale"
    assert kube.stored("runtimescales", NS, "triton-copy")["status"]["replicas"] == 2  # what runs, for kubectl


async def test_a_duplicate_created_without_replicas_is_not_adopted(
    kube: FakeKubeApi, bridge: ReplicaBridge, runtimes: None
) -> None:
    kube.add_runtime_scale(NS, "triton", replicas=5)
    await bridge.sync()
    kube.add_runtime_scale(NS, "triton-copy", serving_runtime="triton")
    kube.clear_requests()

    await bridge.sync()
    bridge.wake(kube.stored("runtimescales", NS, "triton-copy"))
    await bridge.sync_changed()

    assert "replicas" not in kube.stored("runtimescales", NS, "triton-copy")["spec"]
    assert [r.path for r in kube.requests if r.method == "PATCH" and not r.path.endswith("/status")] == []
    assert ready(kube, "triton-copy")["reason"] == "DuplicateRuntimeScale"


async def test_the_next_oldest_owns_the_runtime_once_the_owner_is_deleted(
    kube: FakeKubeApi, bridge: ReplicaBridge, runtimes: None, caplog: pytest.LogCaptureFixture
) -> None:
    created_at(kube, 1_700_000_000, "triton", replicas=5)
    created_at(kube, 1_700_000_100, "triton-copy", serving_runtime="triton", replicas=3)
    await bridge.sync()
    kube.delete_object("runtimescales", NS, "triton")
    kube.clear_requests()

    with caplog.at_level(logging.DEBUG, "autoscaler.actuation.bridge"):
        await bridge.sync()  # the watch wakes a full pass on a deletion
        await bridge.sync()

    assert kube.serving_runtime_replicas(NS, "triton") == 3
    assert [w["spec"]["replicas"] for w in runtime_writes(kube)] == [3]
    assert (ready(kube, "triton-copy")["status"], ready(kube, "triton-copy")["reason"]) == ("True", "Bridged")
    assert kube.stored("runtimescales", NS, "triton-copy")["status"]["selector"]  # its HPA may act now
    assert set_by_hand_warnings(caplog) == []  # the old owner's value was not a hand edit


async def test_a_duplicate_pointed_at_another_runtime_owns_that_one(
    kube: FakeKubeApi, bridge: ReplicaBridge, runtimes: None, caplog: pytest.LogCaptureFixture
) -> None:
    kube.add_runtime_scale(NS, "triton", replicas=5)
    kube.add_runtime_scale(NS, "triton-copy", serving_runtime="triton", replicas=3)
    await bridge.sync()

    kube.update_object("runtimescales", NS, "triton-copy", lambda s: s["spec"].update(servingRuntime="ovms"))
    with caplog.at_level(logging.DEBUG, "autoscaler.actuation.bridge"):
        bridge.wake(kube.stored("runtimescales", NS, "triton-copy"))  # the watch hands the change over
        await bridge.sync_changed()

    assert (kube.serving_runtime_replicas(NS, "triton"), kube.serving_runtime_replicas(NS, "ovms")) == (5, 3)
    assert ready(kube, "triton-copy")["reason"] == "Bridged"
    assert set_by_hand_warnings(caplog) == []


async def test_a_copy_handed_over_by_the_watch_writes_nothing(
    kube: FakeKubeApi, bridge: ReplicaBridge, runtimes: None
) -> None:
    """The single-RuntimeScale path knows the owner too: the copy's HPA writes are not carried."""
    kube.add_runtime_scale(NS, "triton", replicas=5)
    await bridge.sync()
    kube.add_runtime_scale(NS, "triton-copy", serving_runtime="triton", replicas=3)
    kube.clear_requests()

    bridge.wake(kube.stored("runtimescales", NS, "triton-copy"))
    await bridge.sync_changed()
    kube.update_object("runtimescales", NS, "triton-copy", lambda s: s["spec"].update(replicas=9))  # its HPA
    bridge.wake(kube.stored("runtimescales", NS, "triton-copy"))
    await bridge.sync_changed()

    assert kube.serving_runtime_replicas(NS, "triton") == 5
    assert runtime_writes(kube) == []
    assert ready(kube, "triton-copy")["reason"] == "DuplicateRuntimeScale"


async def test_a_new_leader_handed_both_at_once_carries_only_the_owner(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock, runtimes: None
) -> None:
    """Before its first full pass, a leader handed the copy first (then the owner) must not find the copy alone
    on the runtime: it lists the namespace's RuntimeScales to know the owner."""
    owner = created_at(kube, 1_700_000_000, "triton", replicas=5)
    duplicate = created_at(kube, 1_700_000_100, "triton-copy", serving_runtime="triton", replicas=3)
    bridge = ReplicaBridge(kube_client, namespaces=[NS], clock=clock, rand=lambda: 1.0)

    bridge.wake(copy.deepcopy(duplicate))
    bridge.wake(copy.deepcopy(owner))
    await bridge.sync_changed()

    assert [w["spec"]["replicas"] for w in runtime_writes(kube)] == [5]
    assert ready(kube, "triton-copy")["reason"] == "DuplicateRuntimeScale"


async def test_an_owner_pointed_elsewhere_hands_its_runtime_to_the_copy_at_once(
    kube: FakeKubeApi, bridge: ReplicaBridge, runtimes: None, caplog: pytest.LogCaptureFixture
) -> None:
    """The watch hands over only the RuntimeScale that changed; the copy that now owns the runtime was not, and
    waiting for the resync left the runtime at the old owner's value for up to a resync interval."""
    created_at(kube, 1_700_000_000, "triton", replicas=5)
    created_at(kube, 1_700_000_100, "triton-copy", serving_runtime="triton", replicas=3)
    await bridge.sync()
    kube.clear_requests()

    kube.update_object("runtimescales", NS, "triton", lambda s: s["spec"].update(servingRuntime="ovms"))
    with caplog.at_level(logging.DEBUG, "autoscaler.actuation.bridge"):
        bridge.wake(kube.stored("runtimescales", NS, "triton"))
        await bridge.sync_changed()

    assert (kube.serving_runtime_replicas(NS, "triton"), kube.serving_runtime_replicas(NS, "ovms")) == (3, 5)
    assert sorted(w["spec"]["replicas"] for w in runtime_writes(kube)) == [3, 5]
    assert (ready(kube, "triton")["reason"], ready(kube, "triton-copy")["reason"]) == ("Bridged", "Bridged")
    assert set_by_hand_warnings(caplog) == []


# ---- the promise, for any history -----------------------------------------------------------------------------

NAMES = ("a", "b", "c")
RUNTIMES = ("triton", "ovms")
START = 1_700_000_000

Op = tuple[Any, ...]
ops = st.one_of(
    st.tuples(st.just("create"), st.sampled_from(NAMES), st.sampled_from(RUNTIMES), st.integers(0, 3),
              st.none() | st.integers(1, 9)),
    st.tuples(st.just("delete"), st.sampled_from(NAMES)),
    st.tuples(st.just("ask"), st.sampled_from(NAMES), st.integers(1, 9)),  # its HPA
    st.tuples(st.just("point"), st.sampled_from(NAMES), st.sampled_from(RUNTIMES)),
    st.tuples(st.just("pass"), st.sampled_from(["full", "events"])),
)


def owners_now(kube: FakeKubeApi) -> dict[str, JSON]:
    """The promise, computed apart from the bridge: each runtime's oldest RuntimeScale, then by name."""
    owners: dict[str, JSON] = {}
    for scale in kube.objects("runtimescales", NS):
        runtime = scale["spec"]["servingRuntime"]
        rank = (scale["metadata"]["creationTimestamp"], scale["metadata"]["name"])  # one format: sorts as text
        held = owners.get(runtime)
        if held is None or rank < (held["metadata"]["creationTimestamp"], held["metadata"]["name"]):
            owners[runtime] = scale
    return owners


def change_spec(change: JSON, scale: JSON) -> None:
    scale["spec"].update(change)


async def play(history: list[Op]) -> None:
    async with FakeKubeApi() as kube, connected(kube, NS, timeout_s=30.0) as client:
        await check(kube, ReplicaBridge(client, namespaces=[NS], clock=SteppedClock(), rand=lambda: 1.0), history)


async def check(kube: FakeKubeApi, bridge: ReplicaBridge, history: list[Op]) -> None:
    for runtime in RUNTIMES:
        kube.add_serving_runtime(NS, runtime, replicas=2)
        kube.add_modelmesh_runtime(NS, f"modelmesh-serving-{runtime}", replicas=2)
    touched: list[str] = []
    deleted = False
    held: dict[str, str] = {}  # each runtime's owner after the last pass
    for op in [*history, ("pass", "full")]:
        kind, name = op[0], op[1]
        exists = kube.get("runtimescales", NS, name) is not None
        if kind == "create" and not exists:
            spec = {"serving_runtime": op[2]} if op[4] is None else {"serving_runtime": op[2], "replicas": op[4]}
            created_at(kube, START + op[3], name, **spec)
            touched.append(name)
        elif kind == "delete" and exists:
            kube.delete_object("runtimescales", NS, name)
            deleted = True
        elif kind in ("ask", "point") and exists:
            kube.update_object("runtimescales", NS, name, partial(
                change_spec, {"replicas" if kind == "ask" else "servingRuntime": op[2]}))
            touched.append(name)
        elif kind == "pass":
            kube.clear_requests()
            before = {runtime: kube.serving_runtime_replicas(NS, runtime) for runtime in RUNTIMES}
            if name == "full" or deleted:  # the watch wakes a full pass on a deletion
                await bridge.sync()
            else:
                for handed in dict.fromkeys(touched):
                    current = kube.get("runtimescales", NS, handed)
                    if current is not None:
                        bridge.wake(current)
                await bridge.sync_changed()
            owners = owners_now(kube)
            now_held = {runtime: owner["metadata"]["name"] for runtime, owner in owners.items()}
            moved = any(held.get(runtime) not in (None, now) for runtime, now in now_held.items()) or any(
                runtime not in now_held for runtime in held)
            reconciled = name == "full" or deleted or moved  # a hand-over that moves an owner: a full pass
            was_handed = set(touched)
            touched, deleted, held = [], False, now_held
            writes = [r.name for r in kube.requests if r.method == "PATCH" and r.resource == "servingruntimes"]
            assert all(writes.count(runtime) <= 1 for runtime in RUNTIMES), writes  # at most one write each
            adopted = {r.name for r in kube.requests
                       if r.method == "PATCH" and r.resource == "runtimescales" and not r.path.endswith("/status")}
            assert adopted <= {owner["metadata"]["name"] for owner in owners.values()}, (adopted, owners)
            for runtime in RUNTIMES:
                owner = owners.get(runtime)
                if owner is None:
                    assert kube.serving_runtime_replicas(NS, runtime) == before[runtime]  # nothing to follow
                elif reconciled or owner["metadata"]["name"] in was_handed:
                    assert kube.serving_runtime_replicas(NS, runtime) == owner["spec"]["replicas"], (runtime, op)
            if reconciled:
                for scale in kube.objects("runtimescales", NS):
                    named = scale["metadata"]["name"]
                    reason = ready(kube, named)["reason"]
                    assert (reason == "DuplicateRuntimeScale") == (now_held[scale["spec"]["servingRuntime"]] != named)
                    # One HPA over the runtime's pods: only its owner's scale selects them.
                    assert bool(scale["status"].get("selector")) == (reason != "DuplicateRuntimeScale")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# The owner pointed at another runtime, handed over alone: its copy owns the first runtime at once.
@example(history=[("create", "a", "triton", 0, 5), ("create", "b", "triton", 1, 3), ("pass", "full"),
                  ("point", "a", "ovms"), ("pass", "events")])
# A RuntimeScale pointed at a runtime its former owner's copy had moved: not a hand edit.
@example(history=[("create", "a", "triton", 0, 5), ("pass", "full"), ("point", "a", "ovms"), ("pass", "events"),
                  ("create", "b", "triton", 1, 3), ("pass", "events"), ("point", "a", "triton"),
                  ("pass", "events"), ("delete", "b"), ("pass", "events")])
@given(history=st.lists(ops, max_size=16))
def test_the_runtime_follows_its_owner_after_every_pass(history: list[Op]) -> None:
    """For any RuntimeScales (creation times with ties, names, runtimes, asks, deletions between passes), after
    each pass every runtime holds its owner's ask, written at most once; no duplicate is adopted into, said
    to be ready or given the runtime's pod selector, and no owner change is taken for a hand edit."""
    with capture_warnings() as warnings:
        asyncio.run(play(history))
    assert [w for w in warnings if "outside RuntimeScale" in w] == []
