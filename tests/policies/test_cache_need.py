"""The cache need (docs/design.md, Recommendation): the cache term proposes at least ceil(U / C) pods, U the
copies the Ready pods served within `target_lru_age_s` (here each model on one pod, so the models), C a pod's
capacity in models (models loaded over the share of the cache used). Served through the decision's entry point
(`decide`) and /debug, as the HPA and a user see it; every expected number worked out by hand in the comment
beside it."""

from __future__ import annotations

import json
import math
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import PodSample, RuntimeView
from autoscaler.names import ServedMetric
from autoscaler.policies.aggregation import aggregate
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.recommendation import recommend
from tests.policies.builders import NOW, PROPERTIES, pod, snapshot
from tests.support.debug_answers import debug_body

DESIRED = ServedMetric.DESIRED_REPLICAS
WINDOW = 30.0


def served(view: RuntimeView) -> float | None:
    return view.values[DESIRED].value


def night_pods(per_model: bool = True) -> tuple[PodSample, ...]:
    """5 Ready pods at GPU busy 0.64: the GPU term asks for 5 x 0.64 / 0.8 = 4 pods. Pods 0-3 hold 90 models at
    0.9 of their cache, pod 4 holds 80 at 0.8: each a capacity of 100 models (90 / 0.9, 80 / 0.8), and pod 4 has
    room (0.8 < cache_full_ratio 0.9), so the cache-pressure term proposes nothing. Pod i served models
    m{85i}..m{85i+84} 105 s ago, 5 x 85 = 425 distinct models within 600 s, and 20 more each 700 s ago, which
    do not count."""
    pods = []
    for i in range(5):
        recent = {f"m{85 * i + j}": NOW - 105.0 for j in range(85)}
        recent.update({f"old{i}-{j}": NOW - 705.0 for j in range(20)})
        ratio, loaded = (0.9, 90.0) if i < 4 else (0.8, 80.0)
        base = pod(f"pod-{i}", gpu=0.64, rps=10.0, queue=0.0, lru=3600.0, cache=ratio, models=loaded)
        pods.append(replace(base, recent_models=recent if per_model else None))
    return tuple(pods)


def test_five_pods_whose_models_in_use_fill_five_caches_stay_five() -> None:
    # U = 425, C = 100: ceil(4.25) = 5 pods, above the GPU term's 4. Without the cache need the runtime went to
    # 4 pods, which hold 400 of the 425 models it uses.
    view, _ = decide(snapshot(night_pods()), RuntimePolicy(), None, NOW, WINDOW)
    assert (view.proposals["gpu"], view.proposals["cache"]) == (4, 5)
    assert (served(view), view.winner) == (5.0, "cache")
    shown = json.loads(debug_body(view))
    assert shown["winner"] == "cache" and shown["proposals"]["cache"] == 5
    assert shown["reason"] == "cache: 425 copies in use within 600 s need 5 pods at 100 models a pod"


def test_without_per_model_use_the_cache_need_is_absent() -> None:
    # The same pods from an exporter without per-model metrics: no U, so the GPU term's 4 wins.
    view, _ = decide(snapshot(night_pods(per_model=False)), RuntimePolicy(), None, NOW, WINDOW)
    assert (view.proposals["cache"], served(view), view.winner, view.reason) == (None, 4.0, "gpu", "")


def test_full_caches_of_copies_nobody_served_lately_ask_for_no_pods() -> None:
    """4 full caches (0.95, 10 models), the least recently used copy 1200 s old: pressure 600 / 1200 = 0.5, which
    alone asks for 4 x 0.5 = 2 pods. Every pod's exporter reports per-model use and none served a model within
    600 s (U = 0 known): the pressure term is at most 1.2 x 0 = 0 pods, and the GPU's 4 x 0.1 / 0.8 = 0.5 -> 1
    decides. From exporters without per-model use (U unknown) the pressure's 2 stands."""
    def full(recent: dict[str, float] | None) -> tuple[PodSample, ...]:
        return tuple(replace(pod(f"pod-{i}", gpu=0.1, rps=1.0, queue=0.0, cache=0.95, models=10.0, lru=1200.0),
                             recent_models=recent) for i in range(4))

    view, _ = decide(snapshot(full({})), RuntimePolicy(), None, NOW, WINDOW)
    assert (view.proposals["cache"], served(view), view.winner) == (0, 1.0, "gpu")
    unknown, _ = decide(snapshot(full(None)), RuntimePolicy(), None, NOW, WINDOW)
    assert (unknown.proposals["cache"], served(unknown), unknown.winner) == (2, 2.0, "cache")


def test_the_cache_need_is_capped_by_max_replicas() -> None:
    # 5 needed, maxReplicas 4: the cap decides (4), and the cache term still shows its 5.
    view, _ = decide(snapshot(night_pods()), RuntimePolicy(max_replicas=4), None, NOW, WINDOW)
    assert (view.proposals["cache"], served(view), view.winner) == (5, 4.0, "max_replicas")


def test_a_shorter_lru_target_counts_fewer_models() -> None:
    # target_lru_age_s 100: the models served 105 s ago are out of it too, U = 0, and the GPU's 4 wins.
    view, _ = decide(snapshot(night_pods()), RuntimePolicy(target_lru_age_s=100.0), None, NOW, WINDOW)
    assert (view.proposals["cache"], served(view)) == (0, 4.0)


def runtime(n: int, models: int, capacity: int, load: float) -> tuple[PodSample, ...]:
    """`n` Ready pods sharing `load` pods' worth of GPU work at the 0.8 target (each busy 0.8 x load / n, at
    most 1) and using `models` models (model j on pod j mod n), each pod a capacity of `capacity` models
    (capacity / 2 loaded at half its cache: room, so no cache pressure)."""
    busy = min(1.0, 0.8 * load / n)
    return tuple(
        replace(pod(f"pod-{i}", gpu=busy, queue=0.0, lru=60.0, cache=0.5, models=capacity / 2),
                recent_models={f"m{j}": NOW - 30.0 for j in range(i, models, n)})
        for i in range(n)
    )


@PROPERTIES
@given(n=st.integers(1, 30), models=st.integers(0, 2000), capacity=st.sampled_from([10, 50, 100, 200]),
       load=st.floats(0.0, 20.0), cap=st.sampled_from([None, 12, 40]))
def test_iterating_n_to_desired_settles_within_the_largest_term(n: int, models: int, capacity: int, load: float,
                                                                 cap: int | None) -> None:
    # The GPU term is n x min(1, 0.8 load / n) / 0.8 <= load; the cache need ceil(models / capacity) does not
    # depend on n. So no step exceeds the larger of the two (or the floor of 1, or the cap), and n := desired
    # settles where it is met.
    policy = RuntimePolicy(max_replicas=cap)
    bound = max(math.ceil(models / capacity), math.ceil(load - 1e-9), 1)
    bound = bound if cap is None else min(bound, cap)
    steps = []
    for _ in range(40):
        desired = recommend(aggregate(runtime(n, models, capacity, load), policy, NOW), policy).desired
        steps.append(desired)
        assert desired <= bound, steps
        if desired == n:
            break
        n = desired
    assert steps[-1] == n, steps  # a fixed point
    need = math.ceil(models / capacity)
    assert n >= (need if cap is None else min(need, cap)), steps


@PROPERTIES
@given(data=st.data(), n=st.integers(2, 8))
def test_per_model_use_missing_on_some_pod_never_lowers_the_cache_term(data: st.DataObject, n: int) -> None:
    # A refresh with every pod reporting 60 models each (disjoint, capacity 20: the cache term asks for
    # ceil(60 n / 20) = 3n), then one where some pods report none (an older exporter, a failed models query) or
    # went stale, and the others report only some of their models: the models those pods served are unknown,
    # so the cache term (and the replicas) may not fall.
    policy = RuntimePolicy(max_replicas=100)
    first = tuple(replace(pod(f"pod-{i}", gpu=0.1, queue=0.0, lru=60.0, cache=0.5, models=10.0),
                          recent_models={f"m{i}-{j}": NOW - 30.0 for j in range(60)}) for i in range(n))
    view, memory = decide(snapshot(first), policy, None, NOW, WINDOW)
    assert view.proposals["cache"] == 3 * n
    later = NOW + 15.0
    states = data.draw(st.lists(st.sampled_from(["reports", "none", "stale"]), min_size=n, max_size=n)
                       .filter(lambda s: s != ["reports"] * len(s)))
    second = []
    for i, state in enumerate(states):
        kept = data.draw(st.integers(0, 60))
        base = pod(f"pod-{i}", gpu=0.1, queue=0.0, lru=60.0, cache=0.5, models=10.0, now=later,
                   age=600.0 if state == "stale" else 5.0)
        second.append(replace(base, recent_models=None if state == "none" else
                              {f"m{i}-{j}": later - 30.0 for j in range(kept)}))
    view, _ = decide(snapshot(tuple(second), now=later), policy, memory, later, WINDOW)
    assert view.proposals["cache"] is not None and view.proposals["cache"] >= 3 * n
    if view.known:
        assert served(view) == 3 * n


def test_per_model_use_back_on_every_pod_lets_the_cache_term_fall() -> None:
    # 3 pods of 60 models each at capacity 20 ask for 9; at the next refresh every pod reports again, 20 models
    # each: ceil(60 / 20) = 3, and the term falls (complete data).
    policy = RuntimePolicy()
    pods = tuple(replace(pod(f"pod-{i}", gpu=0.1, queue=0.0, lru=60.0, cache=0.5, models=10.0),
                         recent_models={f"m{i}-{j}": NOW - 30.0 for j in range(60)}) for i in range(3))
    view, memory = decide(snapshot(pods), policy, None, NOW, WINDOW)
    assert view.proposals["cache"] == 9
    later = NOW + 15.0
    fewer = tuple(replace(p, sampled_at=later - 5.0, recent_models={f"m{i}-{j}": later - 30.0 for j in range(20)})
                  for i, p in enumerate(pods))
    view, _ = decide(snapshot(fewer, now=later), policy, memory, later, WINDOW)
    assert view.proposals["cache"] == 3 and view.held == {}
