"""When a pod's deletion cost is due, one row per rule of `autoscaler.actuation.deletion_cost_plan`."""

from __future__ import annotations

import math

import pytest

from autoscaler.actuation.deletion_cost_plan import PodPatch, PodRecord, plan_patches, scale_down_pending
from autoscaler.kube.backoff import FailuresInARow
from autoscaler.model import PodView, RuntimeKey
from tests.actuation.conftest import KEY, pod_view, runtime_view

NOW = 10_000.0
NEVER = -math.inf


def record(cost: int | None, written_ago: float = 10.0, failures: int = 0, retry_in: float = NEVER) -> PodRecord:
    return PodRecord(cost=cost, written_at=NOW - written_ago, in_a_row=FailuresInARow(failures=failures),
                     retry_at=NOW + retry_in)


@pytest.mark.parametrize(
    ("cost", "known_record", "urgent", "expected_priority"),
    [
        (300, None, False, 2),
        (300, None, True, 0),
        (300, record(300), False, None),
        (300, record(200, written_ago=59.9), False, None),
        (300, record(200, written_ago=60.0), False, 1),
        (300, record(200, written_ago=5.0), True, 0),
        (300, record(300, written_ago=5.0), True, None),
        (300, record(300, written_ago=299.9), False, None),
        (300, record(300, written_ago=300.0), False, 3),
        (300, record(200, written_ago=5.0, failures=1, retry_in=1.0), False, None),
        (300, record(200, written_ago=5.0, failures=1, retry_in=0.0), False, 1),
        (300, record(None, retry_in=30.0), False, None),
    ],
    ids=[
        "new pod", "new pod before a scale-down", "unchanged", "changed within the minute", "changed after a minute",
        "changed before a scale-down", "unchanged before a scale-down", "unchanged within five minutes",
        "unchanged after five minutes", "failed, backoff not over", "failed, retry due inside the minute",
        "vanished pod waits",
    ],
)
def test_when_a_pod_is_written(
    cost: int, known_record: PodRecord | None, urgent: bool, expected_priority: int | None
) -> None:
    views = {KEY: runtime_view([pod_view("pod-a", cost)])}
    records = {} if known_record is None else {(KEY.namespace, "pod-a"): known_record}

    patches = plan_patches(views, records, {KEY} if urgent else set(), NOW)

    written_at = NEVER if known_record is None else known_record.written_at
    expected = [] if expected_priority is None else [
        PodPatch(expected_priority, written_at, KEY.namespace, "pod-a", cost, KEY)]
    assert patches == expected


@pytest.mark.parametrize(
    ("pod", "known"),
    [(pod_view("p", 300, ready=False), True), (pod_view("p", 300, fresh=False), True),
     (pod_view("p", None), True), (pod_view("p", 300), False)],
    ids=["not ready", "stale data", "no cost", "runtime values unknown"],
)
def test_pods_never_written(pod: PodView, known: bool) -> None:
    views = {KEY: runtime_view([pod], known=known)}

    assert plan_patches(views, {}, {KEY}, NOW) == []


def test_patches_come_urgent_then_changed_and_new_in_turns_then_refreshes_each_oldest_first() -> None:
    views = {KEY: runtime_view([pod_view("old", 100), pod_view("new", 200), pod_view("b-moved", 0),
                                pod_view("a-moved", 0), pod_view("older", 100)])}
    records = {(KEY.namespace, "old"): record(100, written_ago=400), (KEY.namespace, "b-moved"): record(900, 100),
               (KEY.namespace, "a-moved"): record(800, 90), (KEY.namespace, "older"): record(100, 500)}

    assert [(p.priority, p.pod) for p in plan_patches(views, records, set(), NOW)] == [
        (1, "b-moved"), (2, "new"), (1, "a-moved"), (3, "older"), (3, "old")]


def test_a_retried_write_in_a_runtime_about_to_scale_down_goes_before_other_changed_costs() -> None:
    """pod a (about to be scaled down, its last write of 300 failed; 200 written 50 s ago) and pod d in a calm
    runtime (500 written 100 s ago, now 400: changed, its minute over). Both are changed costs, d's older, but a's
    scale-down is about to happen: a first."""
    urgent, calm = KEY, RuntimeKey("ml", "modelmesh-serving-ovms")
    views = {urgent: runtime_view([pod_view("a", 300)]), calm: runtime_view([pod_view("d", 400)], key=calm)}
    records = {(KEY.namespace, "a"): record(200, written_ago=50.0, failures=1, retry_in=0.0),
               (KEY.namespace, "d"): record(500, written_ago=100.0)}

    assert [p.pod for p in plan_patches(views, records, {urgent}, NOW)] == ["a", "d"]


@pytest.mark.parametrize(
    ("desired", "current", "pending"),
    [(2.0, 3, (2.0, 3)), (2.7, 4, (3, 4)), (3.0, 3, None), (3.7, 4, None), (4.0, 3, None), (None, 3, None),
     (2.0, None, None)],
    ids=["below", "below by a whole replica once rounded up", "equal",
         "below but not by a whole replica: the HPA keeps 4", "above", "unknown recommendation", "unknown replicas"],
)
def test_scale_down_pending(desired: float | None, current: int | None, pending: tuple[float, int] | None) -> None:
    assert scale_down_pending(runtime_view([], desired=desired, current=current)) == pending
