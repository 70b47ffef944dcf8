"""The cache need counts the copies the Ready pods served within `target_lru_age_s`, not only the distinct models:
on a scale-down ModelMesh's pre-shutdown asks for a copy of every model the leaving pod holds on a pod without
one, so the copies, extra copies of busy models included, must fit in the pods that stay, or the moves evict
copies still in use (the oldest first, often a model's only one) and those models are loaded again minutes
later (docs/simulation.md, the last section). Served through the decision's entry point (`decide`), as the HPA
sees it; every expected number worked out by hand in the comment beside it."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
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


def serving(name: str, served: Iterable[str], ago: float, **signals: float) -> PodSample:
    """A Ready pod with no queue that served each of `served` `ago` seconds before NOW, and these signals."""
    return replace(pod(name, queue=0.0, **signals), recent_models=dict.fromkeys(served, NOW - ago))  # type: ignore[arg-type]


def shared_pods() -> tuple[PodSample, ...]:
    """10 Ready pods at GPU busy 0.32: the GPU term asks for 10 x 0.32 / 0.8 = 4 pods. Each holds 80 models at
    0.8 of its cache (a capacity of 100 models, and room: no cache pressure). Model j (400 of them) was served
    30 s ago on pods j mod 10 and (j + 1) mod 10: 400 distinct models, 800 copies in use."""
    return tuple(serving(f"pod-{i}", [f"m{j}" for j in range(400) if i in (j % 10, (j + 1) % 10)], 30.0,
                         gpu=0.32, lru=3600.0, cache=0.8, models=80.0) for i in range(10))


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


def one_model_a_pod() -> tuple[PodSample, ...]:
    """An LLM-sized runtime: 10 Ready pods whose caches hold one model each, full (pressure 600 / 5 = 120). Model
    a, busy, is on 9 of them at GPU busy 0.5; model b on the tenth at 0.1; both served 5 s ago."""
    return tuple(serving(f"pod-{i}", ["a" if i < 9 else "b"], 5.0, gpu=0.5 if i < 9 else 0.1, lru=5.0, cache=1.0,
                         models=1.0) for i in range(10))


def test_a_runtime_of_one_model_a_pod_asks_for_its_load_not_for_the_pods_it_has() -> None:
    # GPU: 10 x sqrt((9 x 0.25 + 0.01) / 10) / 0.8 = 10 x 0.4754 / 0.8 = 5.94, 6 pods. Counting every copy, the
    # cache need was 10 copies at 1 a pod, 10, and the pressure term 10 x 1.2 = 12: 12 pods, and 12 x 1.2 at the
    # next sync once the rate check had filled the new pods with copies of a (the Azure LLM trace: skew-aware held
    # 20 pods for a load of 6). ModelMesh keeps two copies of a model while it is used (its janitor unloads a
    # third that is no longer busy): a counts 2, b 1, a need of 3 pods, and the pressure term at most 1.2 x 3.
    view, _ = decide(snapshot(one_model_a_pod()), RuntimePolicy(), None, NOW, WINDOW)
    assert (view.proposals["gpu"], view.proposals["cache"]) == (6, 4)
    assert (view.values[DESIRED].value, view.winner) == (6.0, "gpu")


def test_where_the_pressure_term_is_held_to_the_need_the_reason_says_so() -> None:
    # GPU 0.1 everywhere: 10 x 0.1 / 0.8 = 1.25, 2 pods. The cache term wins with 1.2 x 3 = 3.6, 4 pods: the
    # pressure term held to the cap over the need, which /debug and the log explain, as they do the need.
    idle = tuple(replace(p, gpu_busy=0.1) for p in one_model_a_pod())
    view, _ = decide(snapshot(idle), RuntimePolicy(), None, NOW, WINDOW)
    assert (view.values[DESIRED].value, view.winner) == (4.0, "cache")
    assert view.reason.endswith("cache: every cache is full (pressure 120), held to 1.2 x the 3 pods that 3 copies "
                              "in use within 600 s need at 1 model a pod (two copies of a model at most)")


@PROPERTIES
@given(extra=st.integers(1, 20), gpu=st.floats(0.0, 1.0))
def test_pods_holding_more_copies_of_a_busy_model_do_not_raise_the_cache_term(extra: int, gpu: float) -> None:
    # The ratchet: pods added for load fill with copies of the busy model, and every cache is full again. The
    # cache term must not follow the pods: whatever their number, it asks for what two copies of a and one of b
    # hold (3 pods), at most 1.2 x that.
    more = tuple(serving(f"more-{k}", ["a"], 5.0, gpu=gpu, lru=5.0, cache=1.0, models=1.0) for k in range(extra))
    view, _ = decide(snapshot(one_model_a_pod() + more), RuntimePolicy(), None, NOW, WINDOW)
    assert view.proposals["cache"] == 4


@PROPERTIES
@given(n=st.integers(1, 12), capacity=st.sampled_from([10, 20, 50]), data=st.data())
def test_the_recommendation_leaves_room_for_two_copies_of_each_model_in_use(n: int, capacity: int,
                                                                           data: st.DataObject) -> None:
    # Any copies on any pods (a model on one pod or on several), idle GPUs: the recommendation is never fewer pods
    # than the copies served within the window fill, up to two of each model (the ones ModelMesh keeps while a
    # model is used), so a scale-down to it moves none of those out of the caches.
    held = data.draw(st.lists(st.lists(st.integers(0, 3 * capacity), max_size=capacity, unique=True),
                              min_size=n, max_size=n))
    pods = tuple(serving(f"pod-{i}", [f"m{j}" for j in models], 30.0, gpu=0.0, lru=60.0, cache=0.5,
                         models=capacity / 2) for i, models in enumerate(held))
    view, _ = decide(snapshot(pods), RuntimePolicy(), None, NOW, WINDOW)
    servers = Counter(model for models in held for model in models)
    copies = sum(min(2, count) for count in servers.values())
    desired = view.values[DESIRED].value
    assert desired is not None and desired >= max(1, math.ceil(copies / capacity))
