"""The unique-copy need term (docs/design.md, Choosing the pod to remove): the pod that alone served models
in the last `target_lru_age_s` is kept; copies other Ready pods also served, copies served long ago and
copies on pods that are not Ready protect nobody."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from hypothesis import assume, given
from hypothesis import strategies as st

from autoscaler.model import PodSample
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.policy_values import apply_overrides, policy_problem
from autoscaler.policies.ranking import default_terms, pod_needs, rank_pods, removal_order
from tests.policies.builders import NOW, PROPERTIES, pod

WINDOW = 600.0
# Only the unique-copy term weighted: the needs are its scores.
UNIQUE_ONLY = RuntimePolicy(need_weight_requests=0.0, need_weight_gpu=0.0, need_weight_cache=0.0,
                            need_weight_unique=1.0, target_lru_age_s=WINDOW)


def served(*models: str, ago: float = 60.0) -> dict[str, float]:
    return {m: NOW - ago for m in models}


def with_models(sample: PodSample, models: Mapping[str, float] | None) -> PodSample:
    return replace(sample, recent_models=models)


def test_the_pod_alone_serving_models_is_kept_over_busier_ones() -> None:
    """A alone served m1 and m2; B and C both served m3; C also served m4 an hour ago (outside 600 s).
    Unique copies: A 2, B 0 (m3 is on C too), C 0 (m3 shared, m4 too old): scores A 1, B 0, C 0.
    Weights 0.5 requests, 0.5 GPU, 2 cache, 2 unique (sum 5); A is the quiet pod (10 of the top 40 rps,
    GPU 0.2), B and C busy (40 rps, GPU 0.8), every cache half full:
      A: (0.5 x 0.25 + 0.5 x 0.2 + 2 x 0.5 + 2 x 1) / 5 = 3.225 / 5 = 0.645 -> cost 600
      B, C: (0.5 x 1 + 0.5 x 0.8 + 2 x 0.5 + 0) / 5 = 1.9 / 5 = 0.38   -> cost 300
    Without per-model data the same pods rank the other way round: A (0.125 + 0.1 + 1) / 3 = 0.408 -> 400,
    B and C 1.9 / 3 = 0.633 -> 600: the quiet pod holding the only copies of m1 and m2 would go first."""
    policy = RuntimePolicy(need_weight_requests=0.5, need_weight_gpu=0.5, need_weight_cache=2.0,
                           need_weight_unique=2.0, target_lru_age_s=WINDOW)
    pods = (
        with_models(pod("a", rps=10.0, gpu=0.2, cache=0.5), served("m1", "m2")),
        with_models(pod("b", rps=40.0, gpu=0.8, cache=0.5), served("m3", ago=30.0)),
        with_models(pod("c", rps=40.0, gpu=0.8, cache=0.5), {**served("m3", ago=10.0), **served("m4", ago=3600.0)}),
    )
    ranking = rank_pods(pods, default_terms(policy), NOW)
    assert ranking.costs == (600, 300, 300)
    assert ranking.unique_models == (2, 0, 0)  # what /debug shows per pod
    assert removal_order(pods, ranking.needs) == ["b", "c", "a"]
    blind = tuple(with_models(p, None) for p in pods)
    assert rank_pods(blind, default_terms(policy), NOW).costs == (400, 600, 600)
    assert rank_pods(blind, default_terms(policy), NOW).unique_models is None


def test_a_copy_on_a_pod_that_is_not_ready_protects_nobody() -> None:
    """A served m1, which D (not Ready, removed first anyway) served too; B alone served m2 and m3.
    Unique copies among the Ready pods: A 1 (D does not count), B 2: needs A 1/2, B 1; D has none.
    Were D Ready, m1 would be shared: A 0, B 2, D 1 (m5): needs 0, 1, 1/2."""
    a = with_models(pod("a"), served("m1"))
    b = with_models(pod("b"), served("m2", "m3"))
    d = with_models(pod("d", ready=False), served("m1", "m5"))
    assert pod_needs((a, b, d), default_terms(UNIQUE_ONLY), NOW) == [0.5, 1.0, None]
    assert pod_needs((a, b, replace(d, ready=True)), default_terms(UNIQUE_ONLY), NOW) == [0.0, 1.0, 0.5]


def test_a_pod_without_per_model_data_is_not_protected_by_the_term() -> None:
    """A alone served m1; B reports no per-model use (None); C reports but served nothing ({}).
    A scores 1, B counts 0 (as a missing signal does for every term), C 0."""
    pods = (with_models(pod("a"), served("m1")), pod("b"), with_models(pod("c"), {}))
    assert pod_needs(pods, default_terms(UNIQUE_ONLY), NOW) == [1.0, 0.0, 0.0]
    assert removal_order(pods, pod_needs(pods, default_terms(UNIQUE_ONLY), NOW)) == ["b", "c", "a"]


def test_when_no_copy_is_unique_every_reporting_pod_needs_nothing_for_it() -> None:
    pods = (with_models(pod("a"), served("m1")), with_models(pod("b"), served("m1")))
    assert pod_needs(pods, default_terms(UNIQUE_ONLY), NOW) == [0.0, 0.0]


def test_need_weight_unique_is_a_policy_key_that_must_not_be_negative() -> None:
    assert apply_overrides(RuntimePolicy(), {"need_weight_unique": "3"}).need_weight_unique == 3.0
    problem = policy_problem(RuntimePolicy(need_weight_unique=-1.0))
    assert problem is not None and problem[0] == "need_weight_unique"


MODELS = [f"m{i}" for i in range(8)]
ages = st.sampled_from([0.0, 30.0, 599.0, 600.0, 601.0, 3600.0])
model_sets = st.dictionaries(st.sampled_from(MODELS), ages.map(lambda a: NOW - a), max_size=6)
ready_runtimes = st.lists(model_sets, min_size=1, max_size=6).map(
    lambda sets: tuple(with_models(pod(f"p{i}", rps=1.0, gpu=0.5, cache=0.5), s) for i, s in enumerate(sets)))


def unique_copies(pods: tuple[PodSample, ...]) -> list[int]:
    """Each pod's models served in the window that no other pod served then, counted by hand (sets)."""
    recent = [{m for m, t in (p.recent_models or {}).items() if t >= NOW - WINDOW} for p in pods]
    return [len(mine - set().union(*(r for j, r in enumerate(recent) if j != i))) for i, mine in enumerate(recent)]


@PROPERTIES
@given(pods=ready_runtimes)
def test_the_pod_removed_first_never_holds_more_unique_copies_than_another(pods: tuple[PodSample, ...]) -> None:
    ranking = rank_pods(pods, default_terms(UNIQUE_ONLY), NOW)
    counts = dict(zip((p.name for p in pods), unique_copies(pods), strict=True))
    first = removal_order(pods, ranking.needs)[0]
    assert all(counts[first] <= u for u in counts.values())
    for i, ui in enumerate(counts.values()):  # and the costs follow the counts
        for j, uj in enumerate(counts.values()):
            if ui < uj:
                assert ranking.costs[i] <= ranking.costs[j]  # type: ignore[operator]  # all Ready: int costs


@PROPERTIES
@given(pods=ready_runtimes, data=st.data(), weights=st.sampled_from([(0.5, 0.5, 2.0, 2.0), (0.0, 0.0, 0.0, 1.0)]))
def test_a_copy_of_its_model_elsewhere_never_raises_a_pods_need(
    pods: tuple[PodSample, ...], data: st.DataObject, weights: tuple[float, float, float, float],
) -> None:
    """Another pod's copy of a model this pod served recently, or of one no pod served, takes nothing this pod
    holds alone: its need does not rise. (A copy of a third pod's unique model can raise it: the term is
    relative to the pod holding the most, and that pod may then hold fewer.)"""
    assume(len(pods) >= 2)
    i = data.draw(st.integers(0, len(pods) - 1), label="this pod")
    j = data.draw(st.integers(0, len(pods) - 1).filter(lambda k: k != i), label="other pod")
    own = sorted(m for m, t in (pods[i].recent_models or {}).items() if t >= NOW - WINDOW)
    model = data.draw(st.sampled_from([*own, "new-model"]), label="model copied")
    policy = RuntimePolicy(need_weight_requests=weights[0], need_weight_gpu=weights[1], need_weight_cache=weights[2],
                           need_weight_unique=weights[3], target_lru_age_s=WINDOW)
    before = pod_needs(pods, default_terms(policy), NOW)[i]
    copied = list(pods)
    copied[j] = with_models(pods[j], {**(pods[j].recent_models or {}), model: NOW - 1.0})
    after = pod_needs(copied, default_terms(policy), NOW)[i]
    assert after <= before  # type: ignore[operator]  # Ready pods: needs are floats


@PROPERTIES
@given(pods=st.lists(st.builds(pod, name=st.sampled_from(["a", "b", "c"]), rps=st.sampled_from([None, 0.0, 5.0]),
                               gpu=st.sampled_from([None, 0.3]), cache=st.sampled_from([None, 0.9]),
                               ready=st.booleans()), max_size=4).map(tuple),
       w=st.sampled_from([0.5, 2.0, 7.0]))
def test_without_per_model_data_the_ranking_is_that_of_the_three_signal_terms(
    pods: tuple[PodSample, ...], w: float,
) -> None:
    assert rank_pods(pods, default_terms(RuntimePolicy(need_weight_unique=w)), NOW) == rank_pods(
        pods, default_terms(RuntimePolicy(need_weight_unique=0.0)), NOW)


@PROPERTIES
@given(sets=st.lists(st.one_of(st.none(), model_sets), min_size=1, max_size=6),
       ready=st.lists(st.booleans(), max_size=6))
def test_the_unique_copies_are_the_models_no_other_ready_pod_served_in_the_window(
    sets: list[dict[str, float] | None], ready: list[bool],
) -> None:
    """`unique_models` (and the counts the term scores by) against a count by hand, model by model: a model a
    Ready pod served in the window counts for it when no other Ready pod served it in the window; a pod without
    per-model data has no count, a pod not Ready none either, and with no Ready pod reporting there are none."""
    pods = tuple(with_models(pod(f"p{i}", ready=i >= len(ready) or ready[i]), models) for i, models in enumerate(sets))
    since = NOW - WINDOW
    expected: list[int | None] = []
    for this in pods:
        if not this.ready or this.recent_models is None:
            expected.append(None)
            continue
        count = 0
        for model, at in this.recent_models.items():
            if at < since:
                continue
            elsewhere = False
            for other in pods:
                if other is not this and other.ready and other.recent_models is not None:
                    other_at = other.recent_models.get(model)
                    if other_at is not None and other_at >= since:
                        elsewhere = True
            if not elsewhere:
                count += 1
        expected.append(count)
    reporting = [u for u in expected if u is not None]
    assert rank_pods(pods, default_terms(UNIQUE_ONLY), NOW).unique_models == (tuple(expected) if reporting else None)
