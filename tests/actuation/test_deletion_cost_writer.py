"""The deletion-cost writer against the fake Kubernetes API, with a stepped clock: what it patches, when it
holds back, how it treats every kind of failure, and that the refresh loop never waits for it."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable

import pytest

from autoscaler.actuation.deletion_cost import DeletionCostWriter, WriterSettings
from autoscaler.kube.client import KubeClient
from autoscaler.names import DELETION_COST_ANNOTATION
from autoscaler.selfmetrics import AdapterMetrics
from tests.actuation.conftest import KEY, SteppedClock, add_pods, pod_view, runtime_view, views_of
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

FAST = WriterSettings(qps=None)


def make_writer(
    kube_client: KubeClient,
    clock: SteppedClock,
    *,
    settings: WriterSettings = FAST,
    may_write: Callable[[], bool] = lambda: True,
) -> tuple[DeletionCostWriter, AdapterMetrics]:
    """A writer on the stepped clock whose backoff jitter is always at its top (`rand` = 1)."""
    metrics = AdapterMetrics()
    writer = DeletionCostWriter(kube_client, metrics, settings=settings, clock=clock, rand=lambda: 1.0,
                                may_write=may_write)
    return writer, metrics


def sample(metrics: AdapterMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def costs_in(kube: FakeKubeApi, *pods: str) -> dict[str, str | None]:
    return {pod: kube.pod_annotations(KEY.namespace, pod).get(DELETION_COST_ANNOTATION) for pod in pods}


async def pass_on(writer: DeletionCostWriter, costs: dict[str, int], *, desired: float | None = None,
                  current: int | None = None) -> int:
    """The writer's pass after a refresh that ranked the pods `costs` (`views_of`): the PATCHes it sent."""
    writer.offer(views_of(costs, desired=desired, current=current))
    return await writer.sync()


async def written_once(kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock,
                       costs: dict[str, int]) -> DeletionCostWriter:
    """A writer that has written `costs` on their pods once, the fake API's record of it cleared."""
    add_pods(kube, list(costs))
    writer, _ = make_writer(kube_client, clock)
    await pass_on(writer, costs)
    kube.clear_requests()
    return writer


def patched(kube: FakeKubeApi) -> list[str]:
    return [patch.name for patch in kube.patches]


async def test_first_refresh_patches_every_ready_pod_with_its_cost_as_a_string(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    add_pods(kube, ["pod-a", "pod-b", "pod-c"])
    writer, metrics = make_writer(kube_client, clock)
    writer.offer(views_of({"pod-a": 900, "pod-b": 0, "pod-c": 400}))

    assert await writer.sync() == 3

    assert costs_in(kube, "pod-a", "pod-b", "pod-c") == {"pod-a": "900", "pod-b": "0", "pod-c": "400"}
    for patch in kube.patches:
        assert patch.content_type == "application/merge-patch+json"
        assert patch.body == {"metadata": {"annotations": {DELETION_COST_ANNOTATION: costs_in(kube, patch.name)[
            patch.name]}}}
    assert sample(metrics, "modelmesh_autoscaler_deletion_cost_patches_total", result="ok") == 3
    assert sample(metrics, "modelmesh_autoscaler_pod_deletion_cost", namespace="ml", pod="pod-a") == 900


async def test_nothing_is_patched_when_nothing_changed(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    writer = await written_once(kube, kube_client, clock, {"pod-a": 500, "pod-b": 100})

    for _ in range(10):
        clock.advance(15)
        assert await pass_on(writer, {"pod-a": 500, "pod-b": 100}) == 0

    assert kube.patches == []


async def test_a_changed_cost_waits_until_a_minute_after_the_last_write_of_that_pod(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    writer = await written_once(kube, kube_client, clock, {"pod-a": 500, "pod-b": 100})

    clock.advance(15)
    assert await pass_on(writer, {"pod-a": 200, "pod-b": 100}) == 0
    clock.advance(44.9)
    assert await pass_on(writer, {"pod-a": 300, "pod-b": 100}) == 0
    clock.advance(0.1)
    assert await pass_on(writer, {"pod-a": 300, "pod-b": 100}) == 1

    assert patched(kube) == ["pod-a"]
    assert costs_in(kube, "pod-a") == {"pod-a": "300"}


async def test_every_pod_is_written_again_after_five_minutes_even_unchanged(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    writer = await written_once(kube, kube_client, clock, {"pod-a": 500, "pod-b": 100})

    clock.advance(299)
    assert await pass_on(writer, {"pod-a": 500, "pod-b": 100}) == 0
    clock.advance(1)
    assert await pass_on(writer, {"pod-a": 500, "pod-b": 100}) == 2

    assert sorted(patched(kube)) == ["pod-a", "pod-b"]


async def test_costs_are_written_at_once_when_the_recommendation_falls_below_the_replicas(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    add_pods(kube, ["pod-a", "pod-b", "pod-c"])
    writer, _ = make_writer(kube_client, clock)
    await pass_on(writer, {"pod-a": 500, "pod-b": 100, "pod-c": 300}, desired=3, current=3)
    kube.clear_requests()

    clock.advance(15)  # well inside the minute, but the HPA is about to remove a pod
    assert await pass_on(writer, {"pod-a": 500, "pod-b": 200, "pod-c": 0}, desired=2, current=3) == 2
    assert costs_in(kube, "pod-a", "pod-b", "pod-c") == {"pod-a": "500", "pod-b": "200", "pod-c": "0"}

    clock.advance(15)  # same scale-down still pending: the minute applies again
    assert await pass_on(writer, {"pod-a": 500, "pod-b": 100, "pod-c": 0}, desired=2, current=3) == 0

    clock.advance(15)  # it fell further: write at once again
    assert await pass_on(writer, {"pod-a": 500, "pod-b": 100, "pod-c": 0}, desired=1, current=3) == 1
    assert costs_in(kube, "pod-b") == {"pod-b": "100"}


async def test_a_failed_write_before_a_scale_down_is_retried_without_waiting_for_the_minute(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    add_pods(kube, ["pod-a", "pod-b"])
    writer, _ = make_writer(kube_client, clock)
    await pass_on(writer, {"pod-a": 500, "pod-b": 100}, desired=2, current=2)

    clock.advance(15)
    kube.fail("/pods/pod-b$", 500)
    await pass_on(writer, {"pod-a": 500, "pod-b": 0}, desired=1, current=2)
    assert costs_in(kube, "pod-b") == {"pod-b": "100"}
    clock.advance(1)  # the backoff, 44 s before the minute is over
    assert await writer.sync() == 1
    assert costs_in(kube, "pod-b") == {"pod-b": "0"}


async def test_pods_that_are_not_ready_or_not_fresh_and_unknown_runtimes_are_left_alone(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    add_pods(kube, ["ready", "unready", "stale"])
    writer, _ = make_writer(kube_client, clock)
    pods = [pod_view("ready", 300), pod_view("unready", None, ready=False), pod_view("stale", 100, fresh=False)]
    writer.offer({KEY: runtime_view(pods)})
    await writer.sync()
    assert patched(kube) == ["ready"]

    kube.clear_requests()
    clock.advance(600)
    writer.offer({KEY: runtime_view(pods, known=False)})
    assert await writer.sync() == 0
    assert kube.patches == []


async def test_a_vanished_pod_is_normal_and_not_retried_at_once(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    add_pods(kube, ["pod-a"])
    writer, metrics = make_writer(kube_client, clock)
    assert await pass_on(writer, {"pod-a": 100, "gone": 0}) == 2

    assert sample(metrics, "modelmesh_autoscaler_deletion_cost_patches_total", result="not_found") == 1
    assert sample(metrics, "modelmesh_autoscaler_pod_deletion_cost", namespace="ml", pod="gone") is None
    kube.clear_requests()
    clock.advance(30)
    assert await pass_on(writer, {"pod-a": 100, "gone": 0}) == 0
    clock.advance(30)
    assert await pass_on(writer, {"pod-a": 100, "gone": 0}) == 1
    assert patched(kube) == ["gone"]


@pytest.mark.parametrize("status", [409, 429, 500, 503])
async def test_conflicts_throttling_and_server_errors_are_retried_with_backoff(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock, status: int
) -> None:
    add_pods(kube, ["pod-a"])
    writer, metrics = make_writer(kube_client, clock)
    kube.fail("/pods/pod-a$", status, times=2, retry_after=3 if status == 429 else None)
    writer.offer(views_of({"pod-a": 700}))

    await writer.sync()  # fails; next try after the first backoff (1 s; 3 s when the server says Retry-After: 3)
    first_wait = 3.0 if status == 429 else 1.0
    assert writer.records[(KEY.namespace, "pod-a")].retry_at == pytest.approx(clock.now + first_wait)
    assert await writer.sync() == 0
    clock.advance(first_wait)
    await writer.sync()  # fails again: the backoff doubles
    assert writer.records[(KEY.namespace, "pod-a")].retry_at == pytest.approx(clock.now + max(2.0, first_wait))
    clock.advance(3)
    assert await writer.sync() == 1

    assert costs_in(kube, "pod-a") == {"pod-a": "700"}
    assert sample(metrics, "modelmesh_autoscaler_deletion_cost_patches_total", result="retried") == 2
    assert sample(metrics, "modelmesh_autoscaler_deletion_cost_patches_total", result="ok") == 1


async def test_backoff_doubles_up_to_a_minute_with_jitter(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    add_pods(kube, ["pod-a"])
    kube.fail("/pods/pod-a$", 500, times=None)
    for rand, expected in ((1.0, [1, 2, 4, 8, 16, 32, 60, 60]), (0.0, [0.5, 1, 2, 4, 8, 16, 30, 30])):
        writer = DeletionCostWriter(kube_client, AdapterMetrics(), settings=FAST, clock=clock,
                                    rand=functools.partial(float, rand))
        waits = []
        for _ in expected:
            await pass_on(writer, {"pod-a": 700})
            record = writer.records[(KEY.namespace, "pod-a")]
            waits.append(record.retry_at - clock.now)
            clock.advance(record.retry_at - clock.now)
        assert waits == pytest.approx(expected)


async def test_a_refused_patch_waits_for_the_periodic_refresh(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    add_pods(kube, ["pod-a"])
    writer, metrics = make_writer(kube_client, clock)
    kube.fail("/pods/pod-a$", 403, times=None)
    await pass_on(writer, {"pod-a": 700})

    clock.advance(299)
    assert await pass_on(writer, {"pod-a": 700}) == 0
    clock.advance(1)
    assert await pass_on(writer, {"pod-a": 700}) == 1
    assert sample(metrics, "modelmesh_autoscaler_deletion_cost_patches_total", result="failed") == 2


async def test_only_the_leader_writes_and_a_new_term_writes_every_pod_again(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    add_pods(kube, ["pod-a", "pod-b"])
    leading = False
    writer, metrics = make_writer(kube_client, clock, may_write=lambda: leading)
    assert await pass_on(writer, {"pod-a": 500, "pod-b": 100}) == 0
    assert kube.patches == []

    leading = True
    assert await writer.sync() == 2
    leading = False
    assert await writer.sync() == 0
    assert sample(metrics, "modelmesh_autoscaler_pod_deletion_cost", namespace="ml", pod="pod-a") is None
    leading = True
    clock.advance(1)
    assert await writer.sync() == 2


async def test_urgent_pods_go_first_and_a_pass_is_bounded(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    from autoscaler.model import RuntimeKey

    other = RuntimeKey("ml", "modelmesh-serving-other")
    add_pods(kube, ["calm-0", "calm-1", "calm-2", "hot-0"])
    writer, _ = make_writer(kube_client, clock, settings=WriterSettings(qps=None, batch_size=2, concurrency=1))
    writer.offer({
        KEY: runtime_view([pod_view(f"calm-{i}", 100) for i in range(3)], desired=3, current=3),
        other: runtime_view([pod_view("hot-0", 200)], key=other, desired=1, current=2),
    })

    assert await writer.sync() == 2
    assert patched(kube) == ["hot-0", "calm-0"]
    assert await writer.sync() == 2
    assert patched(kube)[2:] == ["calm-1", "calm-2"]


async def test_patches_are_paced_to_the_qps_limit(
    kube: FakeKubeApi, kube_client: KubeClient, clock: SteppedClock
) -> None:
    names = [f"pod-{i}" for i in range(6)]
    add_pods(kube, names)
    writer, _ = make_writer(kube_client, clock, settings=WriterSettings(qps=50.0))
    writer.offer(views_of(dict.fromkeys(names, 100)))

    started = time.monotonic()
    assert await writer.sync() == 6
    assert time.monotonic() - started >= 5 / 50.0 * 0.9


async def test_the_refresh_listener_returns_at_once_while_the_api_is_slow(
    kube: FakeKubeApi, kube_client: KubeClient
) -> None:
    add_pods(kube, ["pod-a", "pod-b"])
    slow = kube.hold_answer("/pods/", times=None, method="PATCH")  # the API answers no PATCH until released
    writer = DeletionCostWriter(kube_client, AdapterMetrics(), settings=FAST)
    task = asyncio.create_task(writer.run())
    try:
        writer.offer(views_of({"pod-a": 500, "pod-b": 100}))
        await eventually(lambda: writer.patches_in_flight > 0)  # the writer is now waiting on the slow API
        in_flight = writer.patches_in_flight
        for cost in (200, 300, 400):
            writer.offer(views_of({"pod-a": 500, "pod-b": cost}))
        # The offers came back with the writer's PATCH still unanswered: they never waited on the API (asked of
        # the answer, not of a clock: a loaded machine stretches any call).
        assert (writer.offers, writer.patches_in_flight, slow.released.is_set()) == (4, in_flight, False)
        slow.release()
        async with asyncio.timeout(5):
            while costs_in(kube, "pod-a")["pod-a"] is None:
                await asyncio.sleep(0.05)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_a_failed_pod_that_then_goes_unready_does_not_spin_the_writer(
    kube: FakeKubeApi, kube_client: KubeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its retry falls due but the plan no longer writes it (not Ready, stale, or its runtime unknown): the
    writer must wait for the next refresh, not plan again and again on the event loop that serves the HPA."""
    add_pods(kube, ["pod-a"])
    kube.fail("/pods/pod-a$", 503, times=None)
    writer = DeletionCostWriter(kube_client, AdapterMetrics(), settings=WriterSettings(qps=None, backoff_base_s=0.05))
    passes = 0
    sync = writer.sync

    async def counted() -> int:
        nonlocal passes
        passes += 1
        return await sync()

    monkeypatch.setattr(writer, "sync", counted)
    task = asyncio.create_task(writer.run())
    try:
        writer.offer(views_of({"pod-a": 700}))
        async with asyncio.timeout(5):
            while not kube.patches:
                await asyncio.sleep(0.01)
        writer.offer({KEY: runtime_view([pod_view("pod-a", 700, ready=False)])})
        await asyncio.sleep(0.2)
        passes = 0
        await asyncio.sleep(0.5)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    assert passes == 0
