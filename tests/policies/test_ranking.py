"""Choosing the pod to remove (DESIGN §7): need per pod, coarse deletion costs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from autoscaler.model import PodSample
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.ranking import (
    COST_SPACING,
    CacheFillTerm,
    GpuBusyTerm,
    RequestShareTerm,
    UniqueCopyTerm,
    WeightedTerm,
    cost_of,
    default_terms,
    pod_needs,
    rank_pods,
    removal_order,
)
from tests.policies.builders import NOW, pod

TERMS = default_terms(RuntimePolicy())


def test_four_pods_one_hot_the_idle_pod_has_the_lowest_cost() -> None:
    pods = (
        pod("hot", gpu=0.95, rps=200.0),
        pod("warm", gpu=0.5, rps=80.0),
        pod("idle", gpu=0.0, rps=0.0),
        pod("cool", gpu=0.2, rps=30.0),
    )
    ranking = rank_pods(pods, TERMS, NOW)
    costs = dict(zip([p.name for p in pods], ranking.costs, strict=True))
    assert costs["idle"] == min(c for c in costs.values() if c is not None) == 0
    assert costs["hot"] == 9 * COST_SPACING
    assert removal_order(pods, ranking.needs) == ["idle", "cool", "warm", "hot"]


def test_equal_pods_tie_on_cost_and_are_ordered_by_name() -> None:
    pods = (pod("b", gpu=0.5, rps=10.0), pod("c", gpu=0.5, rps=10.0), pod("a", gpu=0.5, rps=10.0))
    ranking = rank_pods(pods, TERMS, NOW)
    assert len(set(ranking.costs)) == 1
    assert removal_order(pods, ranking.needs) == ["a", "b", "c"]


def test_not_ready_pods_get_no_need_and_no_cost() -> None:
    pods = (pod("up", gpu=0.3, rps=10.0), pod("starting", ready=False, gpu=0.9, rps=50.0))
    ranking = rank_pods(pods, TERMS, NOW)
    assert ranking.needs[1] is None and ranking.costs[1] is None
    assert ranking.needs[0] == pytest.approx(0.5 * 1.0 + 0.5 * 0.3)  # max r is taken among Ready pods only
    assert removal_order(pods, ranking.needs) == ["up"]


@dataclass(frozen=True)
class NeedCase:
    id: str
    pods: tuple[PodSample, ...]
    needs: list[float | None]
    policy: RuntimePolicy = field(default_factory=RuntimePolicy)


NEED_CASES = [
    NeedCase("even_load", (pod("a", gpu=0.4, rps=10.0), pod("b", gpu=0.4, rps=10.0)), [0.7, 0.7]),
    NeedCase("all_idle_need_nothing", (pod("a", gpu=0.0, rps=0.0), pod("b", gpu=0.0, rps=0.0)), [0.0, 0.0]),
    NeedCase("missing_gpu_counts_as_zero", (pod("a", rps=10.0), pod("b", gpu=0.6, rps=5.0)), [0.5, 0.55]),
    NeedCase("no_signals_need_nothing", (pod("a", age=None), pod("b", gpu=1.0, rps=1.0)), [0.0, 1.0]),
    NeedCase("nan_and_negative_signals_count_as_zero", (pod("a", gpu=float("nan"), rps=-1.0),), [0.0]),
    NeedCase("gpu_above_one_is_a_full_gpu", (pod("a", gpu=1.7),), [1.0]),
    NeedCase(
        "weights_are_normalised",
        (pod("a", gpu=1.0, rps=0.0), pod("b", gpu=0.0, rps=10.0)),
        [0.25, 0.75],
        RuntimePolicy(need_weight_requests=3.0, need_weight_gpu=1.0),
    ),
    NeedCase(
        "zero_weights_need_nothing",
        (pod("a", gpu=1.0, rps=5.0),),
        [0.0],
        RuntimePolicy(need_weight_requests=0.0, need_weight_gpu=0.0),
    ),
]


@pytest.mark.parametrize("case", NEED_CASES, ids=[c.id for c in NEED_CASES])
def test_pod_needs(case: NeedCase) -> None:
    assert pod_needs(case.pods, default_terms(case.policy), NOW) == pytest.approx(case.needs)


@pytest.mark.parametrize(
    ("need", "cost"),
    [(0.0, 0), (0.099, 0), (0.1, 100), (0.55, 500), (0.999, 900), (1.0, 900)],
    ids=["zero", "just_below_first_edge", "first_edge", "middle", "almost_one", "one"],
)
def test_needs_fall_into_ten_buckets(need: float, cost: int) -> None:
    assert cost_of(need) == cost
    assert rank_pods((pod(gpu=need),), [WeightedTerm(GpuBusyTerm(), 1.0)], NOW).costs == (cost,)


@dataclass(frozen=True, slots=True)
class UniqueModelsTerm:
    """A stand-in for §7's third term: the share of models only this pod served recently."""

    unique_share: dict[str, float]
    name: str = "unique_models"

    def scores(self, pods: Sequence[PodSample], now: float) -> list[float | None]:
        return [self.unique_share.get(p.name) for p in pods]


def test_a_third_term_plugs_in_beside_the_others() -> None:
    pods = (pod("a", gpu=0.5, rps=10.0), pod("b", gpu=0.5, rps=10.0))
    terms = [*default_terms(RuntimePolicy()), WeightedTerm(UniqueModelsTerm({"b": 1.0}), 1.0)]
    assert pod_needs(pods, terms, NOW) == pytest.approx([0.75 / 2, 1.75 / 2])
    assert removal_order(pods, pod_needs(pods, terms, NOW)) == ["a", "b"]


def test_term_names_say_what_they_score() -> None:
    assert [t.term.name for t in TERMS] == [RequestShareTerm().name, GpuBusyTerm().name, CacheFillTerm().name,
                                            UniqueCopyTerm(600.0).name]
    assert [t.term.name for t in TERMS] == ["requests", "gpu", "cache", "unique"]


def test_a_runtime_without_gpus_uses_every_cost_bucket() -> None:
    from autoscaler.model import PodSample
    from autoscaler.policies.policy import RuntimePolicy
    from autoscaler.policies.ranking import default_terms, rank_pods

    pods = [PodSample(name=f"p{i}", sampled_at=0.0, requests_per_second=rate) for i, rate in enumerate((0, 50, 100))]
    ranking = rank_pods(pods, default_terms(RuntimePolicy()), NOW)
    assert ranking.needs == (0.0, 0.5, 1.0)
    assert ranking.costs == (0, 500, 900)
