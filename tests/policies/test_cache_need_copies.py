"""The cache need counts the copies the Ready pods served within `target_lru_age_s`, not only the distinct models:
on a scale-down ModelMesh's pre-shutdown asks for a copy of every model the leaving pod holds on a pod without
one, so the copies, extra copies of busy models included, must fit in the pods that stay, or the moves evict
copies still in use (the oldest first, often a model's only one) and those models are loaded again minutes
later (docs/simulation.md, the last section). Served through the decision's entry point (`decide`), as the HPA
sees it; every expected number worked out by hand in the comment beside it."""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import PodSample
from autoscaler.names import ServedMetric
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from tests.policies.builders import NOW, PROPERTIES, pod, snapshot

DESIRED = ServedMetric.DESIRED_REPLICAS
WINDOW = 30.0


def shared_pods() -> tuple[PodSample, ...]:
    """10 Ready pods at GPU busy 0.32: the GPU term asks for 10 x 0.32 / 0.8 = 4 pods. Each holds 80 models at
    0.8 of its cache (a capacity of 100 models, and room: no cache pressure). Model j (400 of them) was served
    30 s ago on pods j mod 10 and (j + 1) mod 10: 400 distinct models, 800 copies in use."""
    return tuple(
        replace(pod(f"pod-{i}", gpu=0.32, queue=0.0, lru=3600.0, cache=0.8, models=80.0),
                recent_models={f"m{j}": NOW - 30.0 for j in range(400) if i in (j % 10, (j + 1) % 10)})
        for i in range(10)
    )


def test_busy_models_with_two_copies_each_keep_the_pods_their_copies_fill() -> None:
    # 800 copies in use at 100 a pod need 8 pods. Counting the 400 models alone asked for 4, the GPU's 4 won, and
    # going from 10 pods to 4 moved 800 copies used within 600 s into 400 slots: half of them evicted.
    view, _ = decide(snapshot(shared_pods()), RuntimePolicy(), None, NOW, WINDOW)
    assert (view.proposals["gpu"], view.proposals["cache"]) == (4, 8)
    assert (view.values[DESIRED].value, view.winner) == (8.0, "cache")


def test_copies_served_before_the_window_do_not_count() -> None:
    # target_lru_age_s 20: the copies served 30 s ago are out of it, no copy is in use, and the GPU's 4 wins.
    view, _ = decide(snapshot(shared_pods()), RuntimePolicy(target_lru_age_s=20.0), None, NOW, WINDOW)
    assert (view.proposals["cache"], view.values[DESIRED].value) == (0, 4.0)


@PROPERTIES
@given(n=st.integers(1, 12), capacity=st.sampled_from([10, 20, 50]), data=st.data())
def test_the_recommendation_leaves_room_for_every_copy_in_use(n: int, capacity: int, data: st.DataObject) -> None:
    # Any copies on any pods (a model on one pod or on several), idle GPUs: the recommendation is never fewer pods
    # than the copies served within the window fill, so a scale-down to it moves no copy in use out of the caches.
    held = data.draw(st.lists(st.lists(st.integers(0, 3 * capacity), max_size=capacity, unique=True),
                              min_size=n, max_size=n))
    pods = tuple(
        replace(pod(f"pod-{i}", gpu=0.0, queue=0.0, lru=60.0, cache=0.5, models=capacity / 2),
                recent_models={f"m{j}": NOW - 30.0 for j in models})
        for i, models in enumerate(held)
    )
    view, _ = decide(snapshot(pods), RuntimePolicy(), None, NOW, WINDOW)
    copies = sum(len(models) for models in held)
    desired = view.values[DESIRED].value
    assert desired is not None and desired >= max(1, math.ceil(copies / capacity))
