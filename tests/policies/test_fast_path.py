"""The fast per-pod path gives exactly what the plain one it replaced gave, on any pods (hypothesis).

`plain_policies` holds the previous implementation; here both run on the same random runtimes: valid
signals and garbled ones made absent as the sources do (NaN, infinities, negatives: `PodSample`), stale,
future and missing timestamps, separate GPU stamps, pods not Ready, every `seen` set, and policies that
move each threshold. Equal means equal dataclasses: every value, weight, state and count, and the same
floats (the sums run in the same order).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import PodSample, PodViews
from autoscaler.policies import decision
from autoscaler.policies.aggregation import HELD_SAMPLE_S, aggregate
from autoscaler.policies.decision import decide
from autoscaler.policies.podviews import examine_pods, pod_views
from autoscaler.policies.policy import PROPOSAL_LIMIT, RuntimePolicy, lower_bound
from autoscaler.policies.power_mean import power_mean, power_mean_bounded, rate_summary, request_weights
from autoscaler.policies.ranking import WeightedTerm, default_terms, rank_pods
from autoscaler.policies.recommendation import ceil_pods
from autoscaler.policies.runtime_aggregate import Aggregate
from autoscaler.policies.samples import clean_sample, oldest_fresh
from autoscaler.policies.signals import SIGNAL_MODELS, SIGNALS
from autoscaler.policies.smoothing import SmoothState, smooth
from tests.policies.builders import NOW, PROPERTIES, snapshot
from tests.policies.plain_decision import plain_decide
from tests.policies.plain_policies import (
    plain_aggregate,
    plain_pod_views,
    plain_power_mean,
    plain_rank_pods,
    plain_smooth,
)

signal = st.one_of(
    st.none(),
    st.sampled_from([0.0, 0.05, 0.5, 0.9, 1.0, 1.5, 600.0, math.nan, math.inf, -math.inf, -1.0]),
    st.floats(min_value=0.0, max_value=1e4),
)
# Ages around `max_staleness_s` (45 s by default) and `HELD_SAMPLE_S` (a stale pod's last sample counts up to it)
age = st.one_of(st.none(), st.sampled_from([math.nan, math.inf, -math.inf, 45.0, HELD_SAMPLE_S, HELD_SAMPLE_S + 0.5,
                                            3600.0]), st.floats(min_value=-30.0, max_value=120.0))


# Recent models: a few ids shared between pods, served at times inside, at the edge of and outside the
# default `target_lru_age_s` (600 s), or in the future; None (no per-model data) and {} (served nothing) too.
recent = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from([f"m{i}" for i in range(6)]),
                    st.sampled_from([0.0, 1.0, 300.0, 599.9, 600.0, 600.1, 3600.0, -10.0]).map(lambda a: NOW - a),
                    max_size=4),
)


# Built once: a strategy built inside `pods` was built and validated again for every pod drawn.
gpu_age = st.one_of(st.none(), age)
models_loaded = st.one_of(signal, st.sampled_from([0.0, 3.0]))
recency_horizons = st.sampled_from([None, 2.0, 300.0, 600.0, 3600.0, math.nan])


@st.composite
def pods(draw: st.DrawFn) -> PodSample:
    sampled, gpu_sampled = draw(age), draw(gpu_age)
    return clean_sample(PodSample(  # garbled values made absent, as every source hands them over (`PodSample`)
        name=f"pod-{draw(st.integers(min_value=0, max_value=99))}",
        ready=draw(st.booleans()),
        sampled_at=None if sampled is None else NOW - sampled,
        gpu_sampled_at=None if gpu_sampled is None else NOW - gpu_sampled,
        gpu_busy=draw(signal),
        requests_per_second=draw(signal),
        queue_delay_s=draw(signal),
        cache_misses_per_second=draw(signal),
        lru_age_s=draw(signal),
        cache_used_ratio=draw(signal),
        models_loaded=draw(models_loaded),
        recent_models=draw(recent),
        recency_horizon_s=draw(recency_horizons),
        no_gpu_collector=draw(st.booleans()),
    ))


policies = st.builds(
    RuntimePolicy,
    skew_order=st.sampled_from([1.0, 2.0, 3.5, math.inf]),
    target_rps_per_pod=st.sampled_from([None, 50.0]),
    target_queue_delay_s=st.sampled_from([0.0, 0.05, 1.0]),
    cache_full_ratio=st.sampled_from([0.5, 0.9]),
    max_staleness_s=st.sampled_from([0.0, 45.0, 90.0]),
    min_coverage=st.sampled_from([0.0, 0.5, 1.0]),
    need_weight_gpu=st.sampled_from([0.0, 0.5]),
    need_weight_unique=st.sampled_from([0.0, 2.0]),
    target_lru_age_s=st.sampled_from([300.0, 600.0]),
)
runtimes = st.lists(pods(), max_size=12).map(tuple)
seen_sets = st.frozensets(st.sampled_from((*SIGNALS, SIGNAL_MODELS)))


@PROPERTIES
@given(pods=runtimes, policy=policies, seen=seen_sets)
def test_fast_aggregate_equals_the_plain_one(pods: tuple[PodSample, ...], policy: RuntimePolicy,
                                             seen: frozenset[str]) -> None:
    assert aggregate(pods, policy, NOW, seen) == plain_aggregate(pods, policy, NOW, seen)


@PROPERTIES
@given(pods=runtimes, policy=policies, seen=seen_sets)
def test_fast_pod_views_equal_the_plain_ones(pods: tuple[PodSample, ...], policy: RuntimePolicy,
                                             seen: frozenset[str]) -> None:
    agg = aggregate(pods, policy, NOW, seen)
    ranking = rank_pods(agg.pods, default_terms(policy), NOW)
    assert pod_views(agg, ranking, NOW) == plain_pod_views(agg, ranking, NOW)


weights = st.sampled_from([0.0, 0.25, 0.5, 1.0, 3.0])
weighted_policies = st.builds(RuntimePolicy, need_weight_requests=weights, need_weight_gpu=weights,
                              need_weight_cache=weights, need_weight_unique=weights)


@PROPERTIES
@given(pods=runtimes, policy=weighted_policies)
def test_fast_ranking_equals_the_plain_one(pods: tuple[PodSample, ...], policy: RuntimePolicy) -> None:
    """Any mix of weights (0 leaves a term out) and of terms no Ready pod reports, the unique-copy term's
    against its plain count by sets: the same needs and costs, the same floats."""
    terms = default_terms(policy)
    assert rank_pods(pods, terms, NOW) == plain_rank_pods(pods, terms, NOW)


@PROPERTIES
@given(pods=runtimes, policy=weighted_policies, seen=seen_sets, reorder=st.booleans())
def test_pods_examined_in_two_passes_equal_the_aggregate_ranking_and_views(
    pods: tuple[PodSample, ...], policy: RuntimePolicy, seen: frozenset[str], reorder: bool,
) -> None:
    """The decision's two passes (`examine_pods`: needs and costs scored while the views are built) give
    the aggregate, needs, costs and views of the general functions, for any weights; with terms other than
    the default ones (here the same terms reordered, which changes the order of the float sums) it takes the
    general way."""
    terms = default_terms(policy)
    if reorder:
        terms = (terms[2], terms[0], terms[1], terms[3])
    agg = aggregate(pods, policy, NOW, seen)
    assert examine_pods(pods, policy, NOW, seen, terms) == (agg, pod_views(agg, rank_pods(agg.pods, terms, NOW), NOW))


def plain_examine(pods: tuple[PodSample, ...], policy: RuntimePolicy, now: float, seen: frozenset[str],
                  terms: tuple[WeightedTerm, ...]) -> tuple[Aggregate, PodViews]:
    """`examine_pods` composed from the plain implementations."""
    agg = plain_aggregate(pods, policy, now, seen)
    return agg, plain_pod_views(agg, plain_rank_pods(agg.pods, terms, now), now)


def _plain_policy_terms(policy: RuntimePolicy) -> tuple[tuple[WeightedTerm, ...], tuple[int, int | None]]:
    """`policy_terms.terms_and_bounds` without its cache: the terms and the view's bounds, made afresh."""
    return default_terms(policy), (lower_bound(policy), policy.max_replicas)


@PROPERTIES
@given(steps=st.lists(runtimes, min_size=1, max_size=5), policy=policies, source_ok=st.booleans())
def test_fast_decisions_equal_the_plain_ones_refresh_after_refresh(
    steps: list[tuple[PodSample, ...]], policy: RuntimePolicy, source_ok: bool,
) -> None:
    fast = plain = None
    for i, pods in enumerate(steps):
        now = NOW + 15.0 * i  # pods stay stamped at NOW: they age by 15 s a refresh
        fast_view, fast = decide(snapshot(pods, now=now, source_ok=source_ok), policy, fast, now, 30.0)
        with mock.patch.object(decision, "examine_pods", plain_examine), \
                mock.patch.object(decision, "terms_and_bounds", _plain_policy_terms):
            plain_view, plain = decide(snapshot(pods, now=now, source_ok=source_ok), policy, plain, now, 30.0)
        assert fast_view == plain_view
        assert fast == plain


bounded_policies = st.builds(
    RuntimePolicy,
    skew_order=st.sampled_from([1.0, 2.0, math.inf]),
    target_rps_per_pod=st.sampled_from([None, 50.0]),
    target_queue_delay_s=st.sampled_from([0.0, 0.05]),
    max_staleness_s=st.sampled_from([0.0, 45.0, 90.0]),
    min_coverage=st.sampled_from([0.0, 0.5, 1.0]),
    scale_down_tau_s=st.sampled_from([0.0, 300.0]),
    min_replicas=st.sampled_from([None, 2]),
    max_replicas=st.sampled_from([None, 1, 3, 40]),
    target_lru_age_s=st.sampled_from([15.0, 45.0, 600.0]),  # short: per-model use forgotten within the steps
)


@PROPERTIES
@given(steps=st.lists(st.tuples(runtimes, st.booleans(), st.booleans()), min_size=1, max_size=6),
       policy=bounded_policies)
def test_fast_decide_equals_the_plain_composition_refresh_after_refresh(
    steps: list[tuple[tuple[PodSample, ...], bool, bool]], policy: RuntimePolicy,
) -> None:
    fast = plain = None
    for i, (pods, source_ok, models_unread) in enumerate(steps):
        now = NOW + 15.0 * i
        taken = snapshot(pods, now=now, source_ok=source_ok, models_unread=models_unread)
        fast_view, fast = decide(taken, policy, fast, now, 30.0)
        plain_view, plain = plain_decide(taken, policy, plain, now, 30.0)
        assert fast_view == plain_view
        assert fast == plain
        assert list(fast_view.values) == list(plain_view.values)  # the order /debug and renders show
        assert list(fast_view.held) == list(plain_view.held)
        assert list(fast_view.signal_coverage) == list(plain_view.signal_coverage)
        assert list(fast_view.proposals) == list(plain_view.proposals)


@PROPERTIES
@given(x=st.one_of(st.floats(min_value=-1e300, max_value=1e300), st.sampled_from(
    [0.0, -0.0, 1.0, -1.0, 3.0000000000000004, 2.9999999999, 999_999.5, 1e6, -0.5, math.nan, math.inf])))
def test_ceil_pods_is_the_plain_formula(x: float) -> None:
    plain = PROPOSAL_LIMIT if not x < PROPOSAL_LIMIT else max(0, math.ceil(x - 1e-9 * max(1.0, abs(x))))
    assert ceil_pods(x) == plain


@PROPERTIES
@given(values=st.lists(st.one_of(signal, st.sampled_from([-0.0, 1e308, 5e-324])).filter(lambda x: x is not None),
                       max_size=40),
       p=st.one_of(st.sampled_from([1.0, 2.0, 3.0, math.inf, 0.5, math.nan]), st.floats(min_value=1.0,
                                                                                         max_value=8.0)))
def test_power_mean_is_the_plain_loop_to_the_bit(values: list[float], p: float) -> None:
    try:
        plain = plain_power_mean(values, p)
    except ValueError as error:
        try:
            power_mean(values, p)
        except ValueError as fast_error:
            assert str(fast_error) == str(error)  # the same value named
        else:
            raise AssertionError(f"power_mean({values}, {p}) did not raise {error}") from None
        return
    fast = power_mean(values, p)
    assert (fast, math.copysign(1.0, fast)) == (plain, math.copysign(1.0, plain))


def _bounds(values: list[float]) -> tuple[float, float]:
    """The bounds as the aggregation's pass finds them (`power_mean_bounded`)."""
    top, low = 0.0, math.inf
    for x in values:
        if x > top:
            top = x
        if x < low:
            low = x
    return top, low


def _outcome(compute: Callable[[], object]) -> object:
    """What a call gives: its result, or the message of the ValueError it raises."""
    try:
        return compute()
    except ValueError as error:
        return f"ValueError: {error}"


orders = st.one_of(st.sampled_from([1.0, 2.0, 3.0, math.inf, 0.5, math.nan]), st.floats(min_value=1.0, max_value=8.0))
mean_values = st.lists(st.one_of(signal, st.sampled_from([-0.0, 1e308, 5e-324])).filter(lambda x: x is not None),
                       min_size=1, max_size=40)


@PROPERTIES
@given(values=mean_values, p=orders)
def test_power_mean_with_bounds_found_on_the_way_is_the_plain_loop_to_the_bit(values: list[float], p: float) -> None:
    top, low = _bounds(values)
    fast = _outcome(lambda: power_mean_bounded(values, p, top, low))
    plain = _outcome(lambda: plain_power_mean(values, p))
    assert fast == plain
    if isinstance(fast, float) and isinstance(plain, float):
        assert math.copysign(1.0, fast) == math.copysign(1.0, plain)


@PROPERTIES
@given(rates=mean_values, p=orders, uncounted=st.lists(st.booleans(), max_size=40))
def test_rate_summary_is_the_plain_mean_and_the_weights_to_the_bit(
    rates: list[float], p: float, uncounted: list[bool],
) -> None:
    """One quotient per rate for both: the same power mean and shares as computed apart, pods not counted
    (`at` skips them, and they hold 0.0 in the rates given per pod) included."""
    at: list[int] = []
    i = 0  # pods so far
    for j in range(len(rates)):
        if j < len(uncounted) and uncounted[j]:
            i += 1  # a pod not counted before this one
        at.append(i)
        i += 1
    per_pod = [0.0] * i
    for j, r in zip(at, rates, strict=True):
        per_pod[j] = r
    top, low = _bounds(rates)
    fast = _outcome(lambda: rate_summary(per_pod, len(rates), p, top, low, lambda: at))
    plain = _outcome(lambda: (plain_power_mean(rates, p), request_weights(i, rates, at, p)))
    assert fast == plain


clock = st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                  st.floats(min_value=1.6e9, max_value=1.8e9), st.sampled_from([0.0, -0.0, NOW, NOW - 45.0]))


@PROPERTIES
@given(now=clock, bound=st.one_of(clock, st.sampled_from([45.0, 0.0, math.inf, -math.inf, math.nan])),
       t=clock, near=st.integers(min_value=-3, max_value=3))
def test_oldest_fresh_is_the_subtraction_to_the_bit(now: float, bound: float, t: float, near: int) -> None:
    """`t >= oldest_fresh(now, bound)` is `now - t <= bound` for any stamp, the ones next to the edge too."""
    edge = oldest_fresh(now, bound)
    if math.isfinite(edge):  # the floats around the edge, where rounding decides
        t = edge
        for _ in range(abs(near)):
            t = math.nextafter(t, math.inf if near > 0 else -math.inf)
    assert (t >= edge) == (now - t <= bound)


maybe_time = st.one_of(st.none(), st.floats(min_value=NOW - 100.0, max_value=NOW + 100.0), st.sampled_from([NOW]))
level = st.one_of(st.none(), st.floats(min_value=0.0, max_value=1e4), st.sampled_from([0.0, 1.0, 2.5, 3.0]))


@PROPERTIES
@given(value=level, updated_at=maybe_time, target=level, now=st.sampled_from([NOW, NOW + 15.0, NOW - 15.0]),
       tau=st.sampled_from([0.0, 300.0, 1e-9]), may_fall=st.booleans(), settle=st.sampled_from([0.0, 0.1]))
def test_smooth_is_the_plain_step_to_the_bit(
    value: float | None, updated_at: float | None, target: float | None, now: float, tau: float,
    may_fall: bool, settle: float,
) -> None:
    state = None if value is None or updated_at is None else SmoothState(value, updated_at)
    fast = smooth(state, target, now, tau, may_fall, settle)
    plain = plain_smooth(state, target, now, tau, may_fall, settle)
    assert fast == plain
    assert type(fast) is type(plain)
    if fast is not None and plain is not None:
        assert (fast is state) == (plain is state)  # the same state back when the clock did not move
