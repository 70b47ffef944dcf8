"""What a stale pod's last sample stands for during a gap (docs/design.md, Missing data), as served and as /debug
shows it.

A Ready pod's last good GPU busy and request rate count in the power means while that sample is recent
(`HELD_SAMPLE_S`); an older one is left out, and the hold rules keep the values from falling. Its last cache
state never says the runtime has room: the cache pressure is the fresh pods' evidence, and may rise on it.

Was: a 3-hour-old sample (an adapter restarted beside a dead exporter) set the values for as long as the pod
stayed stale, while /debug showed that pod's share of the request rate as 0; and one stale pod whose last state
had room pinned the cache pressure at 0 however hard the fresh pods evicted.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from autoscaler.model import PodSample, RuntimeView
from autoscaler.policies.aggregation import HELD_SAMPLE_S
from autoscaler.policies.decision import decide
from autoscaler.policies.runtime_memory import RuntimeMemory
from tests.policies.builders import NOW, pod, snapshot
from tests.policies.test_gap_values import CACHE, DESIRED, GPU, LOAD, POLICY, STEP, WINDOW


def served(view: RuntimeView) -> tuple[float | None, ...]:
    """GPU busy, request load, cache pressure and desired replicas, rounded as the API's milli-units show them."""
    return tuple(None if (v := view.values[m].value) is None else round(v, 3) for m in (GPU, LOAD, CACHE, DESIRED))


def shares(view: RuntimeView) -> dict[str, float]:
    """Each pod's share of the request rate, as /debug shows it."""
    return {p.name: round(p.weight, 4) for p in view.pods}


def run(pods: Callable[[int, float], list[PodSample]], steps: int) -> list[RuntimeView]:
    """One refresh a step, with the decision's memory carried over."""
    memory: RuntimeMemory | None = None
    views = []
    for step in range(steps):
        now = NOW + STEP * step
        view, memory = decide(snapshot(tuple(pods(step, now)), now=now), POLICY, memory, now, WINDOW)
        views.append(view)
    return views


def test_fresh_pods_evicting_raise_cache_pressure_while_the_pod_with_room_is_stale() -> None:
    """pod-0 and pod-1 full (LRU age 300 s, then 30 s from step 2), pod-2 with room until its exporter stops at
    step 1. Was: cache pressure 0 and 1 replica for the whole gap. Now the fresh pods' evictions show: 600 / 300 =
    2, then 600 / 30 = 20, and the cache term over the two fresh pods, 2 x 1.2: 3 replicas."""
    def pods(step: int, now: float) -> list[PodSample]:
        lru = 300.0 if step < 2 else 30.0
        full = [pod(f"pod-{i}", gpu=0.1, rps=10.0, queue=0.0, cache=0.95, models=5.0, lru=lru, now=now)
                for i in (0, 1)]
        room = pod("pod-2", gpu=0.1, rps=10.0, queue=0.0, cache=0.5, models=2.0, lru=900.0, now=NOW)
        return [*full, room]
    views = run(pods, 6)
    assert [served(v)[2:] for v in views] == [(0.0, 1.0), (2.0, 3.0), (20.0, 3.0), (20.0, 3.0), (20.0, 3.0),
                                              (20.0, 3.0)]
    assert views[2].proposals["cache"] == 3


def test_a_sample_older_than_the_hold_is_left_out_after_a_restart() -> None:
    """An adapter restarted (no memory) beside a pod whose exporter died 3 hours ago at 0.95 busy and 190 rps, and
    three fresh pods at 0.3 and 30 rps. Was: GPU busy 0.5414, load 393.95, 4 replicas, for as long as the pod
    stayed stale, with its share shown as 0. Now it is left out: 0.3, 90, 2, and its share is 0."""
    def pods(step: int, now: float) -> list[PodSample]:
        return [pod("pod-0", gpu=0.95, rps=190.0, queue=0.0, now=now, age=3 * 3600.0)] + [
            pod(f"pod-{i}", gpu=0.3, rps=30.0, queue=0.0, now=now) for i in (1, 2, 3)]
    for view in run(pods, 3):
        assert served(view) == (0.3, 90.0, None, 2.0)
        assert shares(view) == {"pod-0": 0.0, "pod-1": 0.3333, "pod-2": 0.3333, "pod-3": 0.3333}


@pytest.mark.parametrize(("age", "counted"), [(HELD_SAMPLE_S, True), (HELD_SAMPLE_S + 1.0, False)])
def test_a_stale_pod_counts_while_its_sample_is_recent(age: float, counted: bool) -> None:
    """The same runtime with the hot pod's last sample at the bound (counted: M2 of 0.95 and three 0.3, and
    190 and three 30 rps, shown as its share) and just past it (left out)."""
    pods = (pod("pod-0", gpu=0.95, rps=190.0, queue=0.0, age=age),
            *(pod(f"pod-{i}", gpu=0.3, rps=30.0, queue=0.0) for i in (1, 2, 3)))
    view, _ = decide(snapshot(pods), POLICY, None, NOW, WINDOW)
    share = 190.0**2 / (190.0**2 + 3 * 30.0**2)
    if counted:
        assert served(view)[:2] == (round(((0.95**2 + 3 * 0.09) / 4) ** 0.5, 3),
                                    round(4 * ((190.0**2 + 3 * 900.0) / 4) ** 0.5, 3))
        assert shares(view) == {"pod-0": round(share, 4), **{f"pod-{i}": round((1 - share) / 3, 4) for i in (1, 2, 3)}}
    else:
        assert served(view)[:2] == (0.3, 90.0)
        assert shares(view)["pod-0"] == 0.0


def test_a_hot_pod_stale_past_the_bound_is_held_not_lowered() -> None:
    """The hot pod's exporter stops and stays down: its last values count for `HELD_SAMPLE_S`, then it is left out
    and the hold keeps the values from falling (its last sample no longer raises them, the hold does)."""
    def pods(step: int, now: float) -> list[PodSample]:
        hot = pod("pod-0", gpu=0.95, rps=190.0, queue=0.0, now=NOW)
        return [hot if step else pod("pod-0", gpu=0.95, rps=190.0, queue=0.0, now=now)] + [
            pod(f"pod-{i}", gpu=0.3, rps=30.0, queue=0.0, now=now) for i in (1, 2, 3)]
    views = run(pods, 8)
    first = served(views[0])
    for step, view in enumerate(views):
        assert served(view) == first, step
        pod0 = shares(view)["pod-0"]
        assert (pod0 > 0.5) == (STEP * step + 5.0 <= HELD_SAMPLE_S), (step, pod0)
