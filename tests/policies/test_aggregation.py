"""Skew-aware aggregation (DESIGN §5): the power mean, freshness, cache pressure, bad inputs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import PodSample
from autoscaler.policies.aggregation import aggregate
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.power_mean import power_mean
from autoscaler.policies.samples import clean, clean_sample, fresh_time, gpu_time
from autoscaler.policies.signals import FRESH, SIGNAL_GPU
from tests.policies.builders import NOW, PROPERTIES, pod, pods_with
from tests.policies.test_fast_path import policies, runtimes
from tests.support.policy_readings import is_fresh, request_load

NAN = math.nan
INF = math.inf


def cleaned(pods: Sequence[PodSample]) -> tuple[PodSample, ...]:
    """The pods as every source hands them over: garbled values absent (`PodSample`, tests/sources)."""
    return tuple(clean_sample(p) for p in pods)


# --- power mean --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MeanCase:
    id: str
    values: list[float]
    p: float
    expected: float


MEAN_CASES = [
    MeanCase("even_load_gives_the_common_value", [0.3, 0.3, 0.3], 2, 0.3),
    MeanCase("even_load_is_exact_for_awkward_floats", [0.1] * 7, 3, 0.1),
    MeanCase("one_hot_pod_pulls_above_the_mean", [0.9, 0.1, 0.1, 0.1], 2, math.sqrt(0.21)),
    MeanCase("one_idle_pod_pulls_below_the_busy_value", [0.6, 0.6, 0.6, 0.0], 2, math.sqrt(0.27)),
    MeanCase("all_zero_is_zero", [0.0, 0.0, 0.0], 2, 0.0),
    MeanCase("single_pod_is_its_own_value", [0.7], 2, 0.7),
    MeanCase("order_one_is_the_plain_mean", [1.0, 2.0, 6.0], 1, 3.0),
    MeanCase("order_three", [1.0, 2.0], 3, (9 / 2) ** (1 / 3)),
    MeanCase("infinite_order_is_the_max", [1.0, 5.0, 2.0], math.inf, 5.0),
    MeanCase("no_values_is_zero", [], 2, 0.0),
    MeanCase("huge_values_do_not_overflow", [1e300, 1e300, 0.0], 4, 1e300 * (2 / 3) ** 0.25),
]


@pytest.mark.parametrize("case", MEAN_CASES, ids=[c.id for c in MEAN_CASES])
def test_power_mean(case: MeanCase) -> None:
    assert power_mean(case.values, case.p) == pytest.approx(case.expected, rel=1e-12)


def test_power_mean_is_exact_when_values_are_equal() -> None:
    assert power_mean([0.1, 0.1, 0.1], 2) == 0.1


@pytest.mark.parametrize("p", [0.5, 0.0, -1.0, NAN], ids=["half", "zero", "negative", "nan"])
def test_power_mean_refuses_an_order_below_one(p: float) -> None:
    with pytest.raises(ValueError, match="order must be >= 1"):
        power_mean([1.0, 2.0], p)


@pytest.mark.parametrize("bad", [NAN, INF, -0.5], ids=["nan", "inf", "negative"])
def test_power_mean_refuses_invalid_values(bad: float) -> None:
    with pytest.raises(ValueError, match="finite and >= 0"):
        power_mean([1.0, bad], 2)


loads = st.lists(st.floats(min_value=0.0, max_value=1e6, allow_nan=False), min_size=1, max_size=40)
orders = st.one_of(st.sampled_from([1.0, 2.0, 3.0]), st.floats(min_value=1.0, max_value=16.0))


@PROPERTIES
@given(values=loads, p=orders)
def test_power_mean_lies_between_mean_and_max(values: list[float], p: float) -> None:
    m = power_mean(values, p)
    mean = math.fsum(values) / len(values)
    assert mean * (1 - 1e-12) <= m <= max(values)


@PROPERTIES
@given(values=loads, p=orders, index=st.integers(min_value=0), bump=st.floats(min_value=0.0, max_value=1e3))
def test_power_mean_never_falls_when_one_input_rises(values: list[float], p: float, index: int, bump: float) -> None:
    raised = list(values)
    raised[index % len(values)] += bump
    assert power_mean(raised, p) >= power_mean(values, p) * (1 - 1e-12)


@PROPERTIES
@given(values=loads, p=orders)
def test_power_mean_rises_with_skew_order(values: list[float], p: float) -> None:
    assert power_mean(values, p + 1.0) >= power_mean(values, p) * (1 - 1e-12)


# --- aggregate ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AggCase:
    id: str
    pods: tuple[PodSample, ...]
    expected: dict[str, object]
    policy: RuntimePolicy = field(default_factory=RuntimePolicy)


AGG_CASES = [
    AggCase(
        "even_load",
        pods_with(gpu=[0.5] * 4, rps=[10.0] * 4),
        {"n": 4, "coverage": 1.0, "gpu_busy": 0.5, "request_rate": 10.0, "weights": (0.25,) * 4},
    ),
    AggCase(
        "one_hot_pod",
        pods_with(gpu=[0.9, 0.1, 0.1, 0.1], rps=[90.0, 10.0, 10.0, 10.0]),
        {
            "gpu_busy": math.sqrt(0.21),
            "request_rate": math.sqrt(2100.0),
            "weights": (8100 / 8400, 100 / 8400, 100 / 8400, 100 / 8400),
        },
    ),
    AggCase(
        "one_idle_pod",
        pods_with(gpu=[0.6, 0.6, 0.6, 0.0], rps=[30.0, 30.0, 30.0, 0.0]),
        {"gpu_busy": math.sqrt(0.27), "request_rate": math.sqrt(675.0), "weights": (1 / 3, 1 / 3, 1 / 3, 0.0)},
    ),
    AggCase(
        "all_zero",
        pods_with(gpu=[0.0] * 3, rps=[0.0] * 3, queue=[0.0] * 3),
        {"gpu_busy": 0.0, "request_rate": 0.0, "queue_excess_s": 0.0, "saturated": 0, "weights": (1 / 3,) * 3},
    ),
    AggCase(
        "single_pod",
        pods_with(gpu=[0.7], rps=[42.0]),
        {"n": 1, "ready": 1, "gpu_busy": 0.7, "request_rate": 42.0, "weights": (1.0,)},
    ),
    AggCase(
        "cache_with_room",
        pods_with(cache=[0.95, 0.95, 0.5], lru=[100.0, 200.0, 900.0], models=[10.0, 10.0, 4.0]),
        {"cache_pressure": 0.0, "cache_full": False},
    ),
    AggCase(
        "cache_full_and_thrashing",
        pods_with(cache=[0.95, 0.92, 0.99], lru=[100.0, 200.0, 150.0], models=[10.0, 12.0, 9.0]),
        {"cache_pressure": 600.0 / 200.0, "cache_full": True},
    ),
    AggCase(
        "cache_full_but_old_models_is_calm",
        pods_with(cache=[0.95, 0.95], lru=[1200.0, 3000.0]),
        {"cache_pressure": 600.0 / 3000.0, "cache_full": True},
    ),
    AggCase(
        "pod_holding_no_model_gives_room",
        pods_with(cache=[0.95, 0.95, 0.95], lru=[100.0, 200.0, None], models=[10.0, 12.0, None]),
        {"cache_pressure": 0.0, "cache_full": False},
    ),
    AggCase(
        "pod_with_zero_models_gives_room",
        pods_with(cache=[0.95, 0.95], lru=[100.0, 200.0], models=[10.0, 0.0]),
        {"cache_pressure": 0.0, "cache_full": False},
    ),
    AggCase(  # the exporter leaves the age out when it is 0 or less on a pod with models: the LRU copy just used
        "full_caches_whose_lru_copies_were_all_just_used_are_at_their_highest_pressure",
        pods_with(cache=[0.97] * 4, lru=[None] * 4, models=[20.0] * 4),
        {"cache_pressure": 600.0 / 1.0, "cache_full": True},
    ),
    AggCase(
        "a_just_used_lru_copy_beside_an_older_one_reads_the_older",
        pods_with(cache=[0.97, 0.97], lru=[None, 200.0], models=[20.0, 20.0]),
        {"cache_pressure": 600.0 / 200.0, "cache_full": True},
    ),
    AggCase(
        "lru_age_zero_means_no_lru",
        pods_with(cache=[0.95, 0.95], lru=[100.0, 0.0]),
        {"cache_pressure": 0.0, "cache_full": False},
    ),
    AggCase(
        "no_cache_signals_is_unknown_pressure",
        pods_with(gpu=[0.5, 0.5]),
        {"cache_pressure": None, "cache_full": False},
    ),
    AggCase(
        "nan_negative_and_inf_inputs_are_absent_not_zero",  # as every source hands them over (`PodSample`)
        cleaned(pods_with(gpu=[0.8, NAN, -0.1, INF], rps=[-5.0, 20.0, NAN, 20.0], queue=[NAN, 0.15, -1.0, INF])),
        {
            "n": 4,
            "gpu_busy": 0.8,
            "request_rate": 20.0,
            "queue_excess_s": 0.15 - 0.05,  # the one clean delay's backlog over target_queue_delay_s
            "saturated": 1,
            "weights": (0.0, 0.5, 0.0, 0.5),
        },
    ),
    AggCase(
        "no_gpus",
        pods_with(rps=[10.0, 20.0], cache=[0.5, 0.5]),
        {"gpu_busy": None, "request_rate": pytest.approx(math.sqrt(250.0))},
    ),
    AggCase(
        "stale_pod_counts_at_its_last_value",
        (pod("a", gpu=0.5, age=10.0), pod("b", gpu=0.5, age=30.0), pod("c", gpu=1.0, age=46.0)),
        # The values are held for c, so they stand on its last sample too: their timestamp is c's, and c counts in
        # the power mean at its last busy, M2(0.5, 0.5, 1.0) = sqrt(0.5) (left out, a stale idle pod raised it).
        # The source's lag is the fresh samples' alone (`fresh_sample_at`): c says nothing of it.
        {"n": 2, "ready": 3, "coverage": 2 / 3, "gpu_busy": math.sqrt(0.5), "gpu_pods": 3,
         "oldest_sample_at": NOW - 46.0, "fresh_sample_at": NOW - 30.0},
    ),
    AggCase(
        "stale_gpu_reading_dates_the_values_it_holds",
        (pod("a", gpu=0.5, age=10.0), replace(pod("b", gpu=0.9, age=5.0), gpu_sampled_at=NOW - 60.0)),
        {"n": 2, "gpu_busy": math.sqrt((0.25 + 0.81) / 2), "gpu_pods": 2, "oldest_sample_at": NOW - 60.0,
         "fresh_sample_at": NOW - 10.0},
    ),
    AggCase(
        "never_sampled_pod_adds_no_time",
        (pod("a", gpu=0.5, age=10.0), pod("b", age=None)),
        {"n": 1, "oldest_sample_at": NOW - 10.0},
    ),
    AggCase(
        "never_sampled_pod_is_stale",
        (pod("a", gpu=0.5), pod("b", age=None)),
        {"n": 1, "ready": 2, "coverage": 0.5, "fresh": (True, False)},
    ),
    AggCase(
        "not_ready_pod_is_left_out",
        (pod("a", gpu=0.4, rps=5.0), pod("b", gpu=1.0, rps=100.0, ready=False)),
        {"n": 1, "ready": 1, "coverage": 1.0, "gpu_busy": 0.4, "fresh": (True, False), "weights": (1.0, 0.0)},
    ),
    AggCase(
        "no_ready_pods_has_no_coverage",
        (pod("a", gpu=0.4, ready=False),),
        {"n": 0, "ready": 0, "coverage": 0.0, "gpu_busy": None, "oldest_sample_at": None},
    ),
    AggCase(
        "skew_order_one_is_the_plain_mean",
        pods_with(gpu=[0.9, 0.1, 0.1, 0.1]),
        {"gpu_busy": 0.3},
        RuntimePolicy(skew_order=1.0),
    ),
    AggCase(  # the usual pod (all five signals): a delay exactly at target_queue_delay_s (0.05 s) is no backlog
        "queue_exactly_at_target_is_not_saturated",
        pods_with(gpu=[0.4], rps=[10.0], queue=[0.05], cache=[0.5]),
        {"saturated": 0, "queue_excess_s": 0.0},
    ),
    AggCase(
        "queue_backlog_is_the_excess_over_target_of_the_pods_above_it",
        pods_with(queue=[0.2, 0.05, None, 0.0]),
        {"queue_excess_s": 0.2 - 0.05, "saturated": 1},
    ),
]


@pytest.mark.parametrize("case", AGG_CASES, ids=[c.id for c in AGG_CASES])
def test_aggregate(case: AggCase) -> None:
    agg = aggregate(case.pods, case.policy, NOW)
    for name, expected in case.expected.items():
        actual = getattr(agg, name)
        numeric = isinstance(expected, float) or (isinstance(expected, tuple) and isinstance(expected[0], float))
        if numeric:
            assert actual == pytest.approx(expected, rel=1e-12), name
        else:
            assert actual == expected, name


def test_request_load_is_fresh_pods_times_the_power_mean() -> None:
    agg = aggregate(pods_with(rps=[90.0, 10.0, 10.0, 10.0]), RuntimePolicy(), NOW)
    assert request_load(agg) == pytest.approx(4 * math.sqrt(2100.0))


def test_invalid_signals_are_made_absent() -> None:
    shown = clean_sample(pod(gpu=NAN, lru=-3.0, cache=INF, rps=2.0))
    assert (shown.gpu_busy, shown.lru_age_s, shown.cache_used_ratio, shown.requests_per_second) == (
        None, None, None, 2.0)


def test_a_valid_pod_is_passed_through_without_a_copy() -> None:
    sample = pod(gpu=0.5, rps=1.0, queue=0.0, lru=10.0, cache=0.3, models=2.0)
    assert clean_sample(sample) is sample


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0.0, 0.0), (2.5, 2.5), (None, None), (NAN, None), (INF, None), (-INF, None), (-1e-9, None)],
    ids=["zero", "positive", "none", "nan", "inf", "minus_inf", "tiny_negative"],
)
def test_clean_keeps_only_finite_non_negative_values(value: float | None, expected: float | None) -> None:
    assert clean(value) == expected


@pytest.mark.parametrize(
    ("age", "fresh"),
    [(0.0, True), (45.0, True), (45.01, False), (-30.0, True), (None, False)],
    ids=["just_sampled", "exactly_max_staleness", "just_too_old", "clock_ahead", "never_sampled"],
)
def test_freshness_is_judged_against_max_staleness(age: float | None, fresh: bool) -> None:
    assert is_fresh(pod(age=age), NOW, 45.0) is fresh
    assert aggregate((pod(age=age),), RuntimePolicy(max_staleness_s=45.0), NOW).fresh == (fresh,)


@PROPERTIES
@given(
    gpus=st.lists(
        st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True, width=32)), min_size=1, max_size=12
    )
)
def test_aggregate_never_yields_nan_inf_or_negative(gpus: list[float | None]) -> None:
    pods = cleaned(pods_with(gpu=gpus, rps=gpus, queue=gpus, lru=gpus, cache=gpus))  # as sources hand them over
    agg = aggregate(pods, RuntimePolicy(), NOW)
    for value in (agg.gpu_busy, agg.request_rate, agg.cache_pressure, agg.queue_excess_s, agg.coverage):
        assert value is None or (math.isfinite(value) and value >= 0.0)
    assert all(math.isfinite(w) and 0.0 <= w <= 1.0 for w in agg.weights)
    if any(w > 0.0 for w in agg.weights):
        assert math.fsum(agg.weights) == pytest.approx(1.0)


@PROPERTIES
@given(pods=runtimes, policy=policies)
def test_the_values_are_dated_no_later_than_any_sample_they_stand_on(pods: tuple[PodSample, ...],
                                                                      policy: RuntimePolicy) -> None:
    """The `timestamp` served (`oldest_sample_at`) is no later than any sample behind the values: each used
    signal's, and the last one of each Ready pod whose stale load or GPU reading holds them."""
    agg = aggregate(pods, policy, NOW)
    behind = []
    for index, p in enumerate(pods):
        if not p.ready:
            continue
        load_fresh = fresh_time(p.sampled_at, NOW, policy.max_staleness_s)
        used_load = any(state == FRESH for signal, state in agg.pod_signals[index] if signal != SIGNAL_GPU)
        if not load_fresh or used_load:
            behind.append(p.sampled_at)
        if p.gpu_busy is not None:
            behind.append(gpu_time(p))
    times = [t for t in behind if t is not None and math.isfinite(t)]
    if times:
        assert agg.oldest_sample_at is not None and agg.oldest_sample_at <= min(times)
        assert agg.oldest_sample_at in times
    else:
        assert agg.oldest_sample_at is None


@PROPERTIES
@given(pods=runtimes, policy=policies)
def test_the_source_lag_is_that_of_the_fresh_samples_used_alone(pods: tuple[PodSample, ...],
                                                                 policy: RuntimePolicy) -> None:
    """`fresh_sample_at` (what `modelmesh_autoscaler_metric_freshness_seconds` measures) is the oldest time of a
    signal used fresh: a stale pod's last sample, which dates the served `timestamp` back, is not in it, so one
    dead exporter does not read as a lagging source. It is never older than the `timestamp`."""
    agg = aggregate(pods, policy, NOW)
    used = []
    for index, p in enumerate(pods):
        for signal, state in agg.pod_signals[index]:
            if state == FRESH:
                used.append(gpu_time(p) if signal == SIGNAL_GPU else p.sampled_at)
    if used:
        assert agg.fresh_sample_at == min(t for t in used if t is not None)
        assert agg.oldest_sample_at is not None and agg.oldest_sample_at <= agg.fresh_sample_at
    else:
        assert agg.fresh_sample_at is None
