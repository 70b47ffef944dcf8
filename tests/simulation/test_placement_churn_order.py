"""The placement choice with the minimum churn age is the sorted choice among the pods that do not refuse.

A full pod whose oldest copy is younger than `min_churn_age_s` refuses the load (placement.py); the choice is
then ModelMesh's order over the pods left, and no pod when every one refuses. `choose_pod` finds it in one pass
over the pods, refusals included (a full cluster asks at every cold load, copy and retry), taking each pod's
oldest copy from its cache or from the caller's record of them (routing keeps it across a bucket's loads); the
property runs both against test_placement_order's sorting reference on the pods that do not refuse.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.simulation.placement import choose_pod, oldest_copy
from tests.simulation.test_placement_order import LAST_USES, NOW, Pod, pod_states, sorted_choice

CHURN_AGES = st.one_of(st.sampled_from([0.0, 40.0, 300.0, 3000.0, NOW]), st.floats(0.0, 2 * NOW))


def reference(pods: list[Pod], capacity: int, last_used_ago_s: float, churn_age_s: float) -> Pod | None:
    """With room somewhere no pod refuses; all full, the pods whose oldest copy is older than the age take part."""
    if churn_age_s <= 0.0 or any(len(pod.cache) < capacity for pod in pods):
        return sorted_choice(pods, capacity, NOW, last_used_ago_s)
    oldest = [next(iter(pod.cache.values())) if pod.cache else math.inf for pod in pods]
    willing = [pod for pod, old in zip(pods, oldest, strict=True) if old <= NOW - churn_age_s]
    return sorted_choice(willing, capacity, NOW, last_used_ago_s) if willing else None


@settings(max_examples=400)
@given(pod_states(), LAST_USES, CHURN_AGES)
def test_the_choice_among_pods_not_refusing_is_the_sorted_one(state: tuple[list[Pod], int], last_used_ago_s: float,
                                                              churn_age_s: float) -> None:
    pods, capacity = state
    assert choose_pod(pods, capacity, NOW, last_used_ago_s, churn_age_s) is reference(pods, capacity,
                                                                                      last_used_ago_s, churn_age_s)


@settings(max_examples=200)
@given(pod_states(), LAST_USES, CHURN_AGES)
def test_the_oldest_copies_a_caller_keeps_give_the_same_choice(state: tuple[list[Pod], int], last_used_ago_s: float,
                                                               churn_age_s: float) -> None:
    pods, capacity = state
    kept = {pod: oldest_copy(pod) for pod in pods}
    assert choose_pod(pods, capacity, NOW, last_used_ago_s, churn_age_s, kept) is reference(pods, capacity,
                                                                                            last_used_ago_s,
                                                                                            churn_age_s)
