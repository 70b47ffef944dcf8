"""The cache-fill term of the need (docs/design.md, Choosing the pod to remove): keep the pods holding models.

Request share and GPU busy alone make an old quiet pod, which holds the only copies of the quiet models, the
first to go; a new pod whose cache is nearly empty loses almost nothing. Numbers by hand.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import PodSample
from autoscaler.policies.config import ConfigError
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.policy_values import apply_overrides
from autoscaler.policies.ranking import default_terms, pod_needs, rank_pods, removal_order
from tests.policies.builders import NOW, PROPERTIES, pod

THREE = (
    pod("old-quiet", rps=2.0, gpu=0.1, cache=1.0),  # full cache of quiet models
    pod("new", rps=10.0, gpu=0.5, cache=0.1),  # started lately, copies of hot models only
    pod("busy", rps=20.0, gpu=0.9, cache=1.0),
)


def test_without_the_cache_term_the_old_quiet_pod_goes_first() -> None:
    # Weights requests 0.5, gpu 0.5, cache 0 (before the term); max r = 20:
    #   old-quiet: 0.5 x 2/20 + 0.5 x 0.1 = 0.10 -> bucket 1 -> 100
    #   new:       0.5 x 10/20 + 0.5 x 0.5 = 0.50 -> bucket 5 -> 500
    #   busy:      0.5 x 1 + 0.5 x 0.9 = 0.95 -> bucket 9 -> 900
    ranking = rank_pods(THREE, default_terms(RuntimePolicy(need_weight_cache=0.0)), NOW)
    assert ranking.needs == pytest.approx((0.10, 0.50, 0.95))
    assert ranking.costs == (100, 500, 900)
    assert removal_order(THREE, ranking.needs) == ["old-quiet", "new", "busy"]


def test_with_cache_weight_one_the_nearly_empty_new_pod_goes_first() -> None:
    # Weights 0.5, 0.5, 1 (sum 2):
    #   old-quiet: (0.05 + 0.05 + 1 x 1.0) / 2 = 0.55  -> 500
    #   new:       (0.25 + 0.25 + 1 x 0.1) / 2 = 0.30  -> 300
    #   busy:      (0.50 + 0.45 + 1 x 1.0) / 2 = 0.975 -> 900
    ranking = rank_pods(THREE, default_terms(RuntimePolicy(need_weight_cache=1.0)), NOW)
    assert ranking.needs == pytest.approx((0.55, 0.30, 0.975))
    assert ranking.costs == (500, 300, 900)
    assert removal_order(THREE, ranking.needs) == ["new", "old-quiet", "busy"]


def test_shipped_weights_keep_the_full_caches_and_remove_the_new_pod() -> None:
    # Shipped weights 0.5, 0.5, 2 (sum 3):
    #   old-quiet: (0.05 + 0.05 + 2 x 1.0) / 3 = 2.1 / 3  = 0.70  -> 700
    #   new:       (0.25 + 0.25 + 2 x 0.1) / 3 = 0.7 / 3  = 0.233 -> 200
    #   busy:      (0.50 + 0.45 + 2 x 1.0) / 3 = 2.95 / 3 = 0.983 -> 900
    ranking = rank_pods(THREE, default_terms(RuntimePolicy()), NOW)
    assert ranking.needs == pytest.approx((0.70, 0.7 / 3, 2.95 / 3))
    assert ranking.costs == (700, 200, 900)
    assert removal_order(THREE, ranking.needs) == ["new", "old-quiet", "busy"]


def test_among_equally_full_caches_request_share_and_gpu_still_decide() -> None:
    # Shipped weights 0.5, 0.5, 2 (sum 3), every cache full; max r = 20:
    #   idle: (0 + 0 + 2) / 3           = 0.667 -> 600
    #   half: (0.25 + 0.25 + 2) / 3     = 0.833 -> 800
    #   hot:  (0.5 + 0.5 + 2) / 3       = 1.0   -> 900
    pods = (pod("hot", rps=20.0, gpu=1.0, cache=1.0), pod("idle", rps=0.0, gpu=0.0, cache=1.0),
            pod("half", rps=10.0, gpu=0.5, cache=1.0))
    ranking = rank_pods(pods, default_terms(RuntimePolicy()), NOW)
    assert ranking.needs == pytest.approx((1.0, 2 / 3, 2.5 / 3))
    assert ranking.costs == (900, 600, 800)
    assert removal_order(pods, ranking.needs) == ["idle", "half", "hot"]


def test_a_pod_without_a_cache_reading_is_not_protected_by_the_term() -> None:
    # Weights 0.5, 0.5, 3 (sum 4); b reports no cache fill, which counts as 0:
    #   a: (0.5 x 1 + 0.5 x 0.2 + 3 x 0.5) / 4 = 2.1 / 4 = 0.525
    #   b: (0.5 x 1 + 0.5 x 0.2 + 0) / 4 = 0.6 / 4 = 0.15
    pods = (pod("a", rps=5.0, gpu=0.2, cache=0.5), pod("b", rps=5.0, gpu=0.2))
    assert pod_needs(pods, default_terms(RuntimePolicy(need_weight_cache=3.0)), NOW) == pytest.approx([0.525, 0.15])


def test_a_fill_above_one_is_a_full_cache_and_no_pod_reporting_drops_the_term() -> None:
    # Cache weight 1 alone: a reading of 1.3 counts as 1. With no pod reporting fill, only gpu is left.
    policy = RuntimePolicy(need_weight_requests=0.0, need_weight_gpu=0.0, need_weight_cache=1.0)
    needs = pod_needs((pod("a", cache=1.3), pod("b", cache=0.25)), default_terms(policy), NOW)
    assert needs == pytest.approx([1.0, 0.25])
    policy = RuntimePolicy(need_weight_requests=0.0, need_weight_gpu=1.0, need_weight_cache=1.0)
    assert pod_needs((pod("a", gpu=0.4), pod("b", gpu=0.8)), default_terms(policy), NOW) == pytest.approx([0.4, 0.8])


def test_the_weight_is_a_policy_key_and_must_not_be_negative() -> None:
    assert apply_overrides(RuntimePolicy(), {"need_weight_cache": "2"}).need_weight_cache == 2.0
    with pytest.raises((ConfigError, ValueError), match="need_weight_cache"):
        apply_overrides(RuntimePolicy(), {"need_weight_cache": "-1"})


_ratio = st.floats(0.0, 1.0)
_signal = st.one_of(st.none(), _ratio)


@PROPERTIES
@given(
    others=st.lists(st.tuples(_signal, _signal, _signal), max_size=5),
    rps=st.one_of(st.none(), st.floats(0.0, 500.0)),
    gpu=_signal,
    fuller=_ratio,
    emptier=st.one_of(st.none(), _ratio),
    weights=st.tuples(st.floats(0.0, 5.0), st.floats(0.0, 5.0), st.floats(0.0, 5.0)),
)
def test_with_everything_else_equal_an_emptier_cache_never_ranks_as_more_needed(
    others: list[tuple[float | None, float | None, float | None]],
    rps: float | None,
    gpu: float | None,
    fuller: float,
    emptier: float | None,
    weights: tuple[float, float, float],
) -> None:
    if emptier is not None and emptier > fuller:
        fuller, emptier = emptier, fuller
    pods: list[PodSample] = [
        pod(f"o{i}", rps=None if r is None else 100.0 * r, gpu=g, cache=c) for i, (r, g, c) in enumerate(others)
    ]
    pods += [pod("full", rps=rps, gpu=gpu, cache=fuller), pod("empty", rps=rps, gpu=gpu, cache=emptier)]
    policy = RuntimePolicy(need_weight_requests=weights[0], need_weight_gpu=weights[1], need_weight_cache=weights[2])
    ranking = rank_pods(pods, default_terms(policy), NOW)
    full_need, empty_need = ranking.needs[-2], ranking.needs[-1]
    full_cost, empty_cost = ranking.costs[-2], ranking.costs[-1]
    assert full_need is not None and empty_need is not None and full_cost is not None and empty_cost is not None
    assert empty_need <= full_need
    assert empty_cost <= full_cost
