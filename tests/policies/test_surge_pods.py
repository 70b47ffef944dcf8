"""A rollout's surge pods, Ready and idle beyond the Deployment's replicas, raise no replica count (reviewer finding).

A runtime with 100 req/s a pod, 4 pods at 90 req/s: 360 req/s, 4 replicas. A rolling update brings up 3 new pods,
Ready at 0 req/s, before the old ones go. Counted, they made the request load 476 and the replicas 5, held by the
slow fall for about 12 minutes after the rollout. The Deployment's replicas (4) say they are surge: left out, the
runtime serves 4 replicas and a load of 360 throughout, and /debug names the pods left out.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import PodSample, RuntimeSnapshot, RuntimeView
from autoscaler.names import ServedMetric
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from tests.policies.builders import KEY, NOW, PROPERTIES, pod

DESIRED = ServedMetric.DESIRED_REPLICAS
LOAD = ServedMetric.REQUEST_LOAD
POLICY = RuntimePolicy(target_rps_per_pod=100.0)  # the default slow fall (scale_down_tau_s 300)


def serving(name: str, rps: float | None, created_at: float, age: float | None = 5.0) -> PodSample:
    return replace(pod(name, rps=rps, queue=0.0, cache=0.5, lru=900.0, models=3.0, age=age), created_at=created_at)


def old_pods(loads: list[float]) -> tuple[PodSample, ...]:
    return tuple(serving(f"old-{i}", rps, NOW - 86_400) for i, rps in enumerate(loads))


def surge(count: int, read: bool = True) -> tuple[PodSample, ...]:
    """New pods just Ready: idle (0 req/s), or not read yet (`read` False)."""
    return tuple(serving(f"new-{i}", 0.0 if read else None, NOW - 30 + i, age=5.0 if read else None)
                 for i in range(count))


def decided(pods: tuple[PodSample, ...], replicas: int) -> RuntimeView:
    view, _ = decide(RuntimeSnapshot(KEY, pods, NOW, replicas=replicas), POLICY, None, NOW, 30.0)
    return view


def test_three_idle_surge_pods_of_a_rollout_leave_the_replicas_at_4() -> None:
    before = decided(old_pods([90.0] * 4), replicas=4)
    assert before.values[DESIRED].value == 4.0

    during = decided(old_pods([90.0] * 4) + surge(3), replicas=4)

    assert during.values[DESIRED].value == 4.0  # was 5
    assert during.values[LOAD].raw == pytest.approx(360.0)  # 4 x 90, was 476
    assert during.proposals["requests"] == 4
    assert "left out as surge: new-2, new-1, new-0" in during.reason  # the newest first
    assert {p.name for p in during.pods} >= {"new-0", "new-1", "new-2"}  # still shown, Ready
    assert all(p.ready for p in during.pods)


def test_one_idle_surge_pod_leaves_the_replicas_at_4() -> None:
    during = decided(old_pods([90.0] * 4) + surge(1), replicas=4)

    assert during.values[DESIRED].value == 4.0  # was 5, at a load of 402.7
    assert during.values[LOAD].raw == pytest.approx(360.0)


def test_idle_pods_within_the_replicas_still_count() -> None:
    """Steady state: pods at 330, 0, 0 and 0 req/s of a Deployment of 4 ask for 7 (README), as before."""
    view = decided(old_pods([330.0, 0.0, 0.0, 0.0]), replicas=4)

    assert view.values[DESIRED].value == 7.0
    assert "surge" not in view.reason


def test_a_deployment_scaled_to_zero_keeps_its_last_idle_pods_counted() -> None:
    """At 0 replicas there is no rollout: the Ready pods still going are not surge (the view is not scaled to zero
    while one is Ready)."""
    view = decided(old_pods([0.0, 0.0]), replicas=0)

    assert view.ready_pods == 2 and not view.scaled_to_zero
    assert "surge" not in view.reason


def test_surge_beyond_replicas_leaves_out_only_pods_without_load() -> None:
    """A new pod already serving is load: it stays counted (the values never lose load)."""
    busy_new = serving("new-busy", 90.0, NOW)
    view = decided((*old_pods([90.0] * 4), busy_new), replicas=4)

    assert view.values[LOAD].raw == pytest.approx(decided(old_pods([90.0] * 5), replicas=5).values[LOAD].raw)


@PROPERTIES
@given(loads=st.lists(st.sampled_from([0.0, 5.0, 40.0, 90.0, 330.0, 1000.0]), min_size=1, max_size=8),
       extra=st.integers(min_value=1, max_value=6), read=st.booleans())
def test_idle_surge_pods_change_no_served_value(loads: list[float], extra: int, read: bool) -> None:
    without = decided(old_pods(loads), replicas=len(loads))
    with_surge = decided(old_pods(loads) + surge(extra, read), replicas=len(loads))

    assert with_surge.values[DESIRED].value == without.values[DESIRED].value
    assert with_surge.values[LOAD].value == pytest.approx(without.values[LOAD].value)
    assert with_surge.ready_pods == without.ready_pods


def test_a_whole_rollout_serves_4_throughout_and_nothing_to_fall_from_after() -> None:
    """Refresh by refresh: 4 old pods, 3 new ones Ready and idle, the old ones gone and the new ones serving."""
    refreshes = [
        (old_pods([90.0] * 4), 4),
        (old_pods([90.0] * 4) + surge(3), 4),
        (old_pods([90.0] * 2) + surge(3), 4),  # two old pods gone, one new one not serving yet
        (tuple(serving(f"new-{i}", 90.0, NOW - 30 + i) for i in range(4)), 4),
    ]
    memory = None
    served = []
    for step, (pods, replicas) in enumerate(refreshes):
        at = NOW + 15 * step
        view, memory = decide(RuntimeSnapshot(KEY, tuple(replace(p, sampled_at=at - 5) for p in pods), at,
                                              replicas=replicas), POLICY, memory, at, 30.0)
        served.append(view.values[DESIRED].value)

    assert served == [4.0, 4.0, 4.0, 4.0]
