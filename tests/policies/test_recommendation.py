"""The replica recommendation (DESIGN §6): each term, the winner, the cap, and the fixed point."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from autoscaler.policies.aggregation import Aggregate, aggregate, power_mean
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.recommendation import PROPOSAL_LIMIT, ceil_pods, recommend
from tests.policies.builders import NOW, PROPERTIES, pods_with


def agg(
    n: int = 4,
    *,
    gpu: float | None = None,
    rate: float | None = None,
    qsum: float = 0.0,
    qmax: float | None = None,
    pressure: float | None = None,
) -> Aggregate:
    """An aggregate as §5 would produce it, without going through pods."""
    return Aggregate(
        pods=(),
        fresh=(),
        weights=(),
        ready=n,
        n=n,
        coverage=1.0,
        gpu_busy=gpu,
        request_rate=rate,
        queue_delay_sum_s=qsum,
        queue_delay_max_s=qmax,
        cache_pressure=pressure,
        cache_full=pressure is not None and pressure > 0.0,
        oldest_sample_at=NOW,
    )


@dataclass(frozen=True)
class Case:
    id: str
    agg: Aggregate
    desired: int
    winner: str
    proposals: dict[str, int | None] = field(default_factory=dict)  # only the keys to check
    policy: RuntimePolicy = field(default_factory=RuntimePolicy)


CASES = [
    Case("even_load_at_target_keeps_the_pods", agg(4, gpu=0.8), 4, "gpu", {"gpu": 4}),
    Case("even_load_above_target_adds_pods", agg(4, gpu=1.0), 5, "gpu", {"gpu": 5}),
    Case(
        "one_hot_pod_counts_more_than_the_mean",
        agg(4, gpu=math.sqrt(0.21)),  # [0.9, 0.1, 0.1, 0.1]: mean 0.3 would ask for 2
        3,
        "gpu",
        {"gpu": 3},
    ),
    Case("one_idle_pod_lets_demand_fall", agg(4, gpu=math.sqrt(0.27)), 3, "gpu", {"gpu": 3}),
    Case("all_zero_falls_to_min_replicas", agg(4, gpu=0.0, rate=0.0), 1, "min_replicas", {"gpu": 0}),
    Case("single_pod_busy_asks_for_two", agg(1, gpu=0.9), 2, "gpu", {"gpu": 2}),
    Case("float_fuzz_does_not_add_a_pod", agg(3, gpu=0.8000000000000002), 3, "gpu", {"gpu": 3}),
    Case(
        "request_rate_proposes_when_a_target_is_set",
        agg(4, gpu=0.2, rate=150.0),
        6,
        "requests",
        {"requests": 6, "gpu": 1},
        RuntimePolicy(target_rps_per_pod=100.0),
    ),
    Case("request_rate_without_target_proposes_nothing", agg(4, rate=1e6), 1, "min_replicas", {"requests": None}),
    Case(
        "queue_above_target_adds_the_backlog_in_pods",
        agg(4, gpu=0.5, qsum=20.0, qmax=0.5),
        6,
        "queue",
        {"queue": 4 + 2, "gpu": 3},
    ),
    Case("queue_below_target_proposes_nothing", agg(4, gpu=0.5, qsum=0.12, qmax=0.04), 3, "gpu", {"queue": None}),
    Case("cache_with_room_proposes_nothing", agg(4, gpu=0.1, pressure=0.0), 1, "gpu", {"cache": None}),
    Case(
        "cache_full_and_thrashing_is_capped",
        agg(4, gpu=0.1, pressure=3.0),
        5,
        "cache",
        {"cache": 5},  # ceil(4 * min(1.2, 3.0))
    ),
    Case("cache_full_but_calm_asks_for_fewer", agg(10, pressure=0.25), 3, "cache", {"cache": 3}),
    Case("no_gpus_makes_no_gpu_proposal", agg(4, rate=50.0), 1, "min_replicas", {"gpu": None}),
    Case(
        "max_replicas_caps_the_winner",
        agg(10, gpu=1.0),
        8,
        "max_replicas",
        {"gpu": 13},
        RuntimePolicy(max_replicas=8),
    ),
    Case(
        "min_replicas_is_the_floor",
        agg(4, gpu=0.2),
        3,
        "min_replicas",
        {"gpu": 1, "min_replicas": 3},
        RuntimePolicy(min_replicas=3),
    ),
    Case(
        "a_signal_equal_to_the_floor_wins_the_tie",
        agg(3, gpu=0.8),
        3,
        "gpu",
        {"gpu": 3, "min_replicas": 3},
        RuntimePolicy(min_replicas=3),
    ),
    Case("no_fresh_pods_proposes_the_floor", agg(0), 1, "min_replicas", {"gpu": None, "queue": None}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_recommend(case: Case) -> None:
    rec = recommend(case.agg, case.policy)
    assert (rec.desired, rec.winner) == (case.desired, case.winner)
    assert set(rec.proposals) == {"gpu", "requests", "queue", "cache", "min_replicas"}
    for term, expected in case.proposals.items():
        assert rec.proposals[term] == expected, term


@pytest.mark.parametrize(
    ("x", "pods"),
    [(0.0, 0), (3.0, 3), (3.0000000000000004, 3), (3.01, 4), (99.99999999999999, 100), (math.inf, PROPOSAL_LIMIT)],
    ids=["zero", "whole", "fuzz_above_whole", "real_fraction", "large_fuzz", "infinite_is_limited"],
)
def test_ceil_pods_ignores_float_fuzz(x: float, pods: int) -> None:
    assert ceil_pods(x) == pods


# --- properties -------------------------------------------------------------------------------------

busy = st.floats(min_value=0.0, max_value=1.0)
maybe = st.one_of(st.none(), st.floats(min_value=0.0, max_value=5.0))


pod_signals = st.tuples(
    st.one_of(st.none(), busy),  # gpu busy
    maybe,  # queue delay
    st.one_of(st.none(), busy),  # cache used ratio
    st.one_of(st.none(), st.floats(min_value=0.0, max_value=1e5)),  # lru age
)


@PROPERTIES
@given(
    signals=st.lists(pod_signals, min_size=1, max_size=12),
    min_replicas=st.integers(min_value=1, max_value=5),
    extra=st.one_of(st.none(), st.integers(min_value=0, max_value=40)),
)
def test_every_term_is_bounded_by_demand(
    signals: list[tuple[float | None, float | None, float | None, float | None]],
    min_replicas: int,
    extra: int | None,
) -> None:
    gpus, queues, caches, lrus = (list(column) for column in zip(*signals, strict=True))
    policy = RuntimePolicy(min_replicas=min_replicas, max_replicas=None if extra is None else min_replicas + extra)
    a = aggregate(pods_with(gpu=gpus, queue=queues, cache=caches, lru=lrus), policy, NOW)
    rec = recommend(a, policy)
    p = rec.proposals
    busiest = max((g for g in gpus if g is not None), default=0.0)
    if p["gpu"] is not None:
        assert p["gpu"] <= math.ceil(a.n * busiest / policy.target_gpu_busy)
    if p["queue"] is not None:
        assert p["queue"] <= a.n + math.ceil(a.queue_delay_sum_s / policy.queue_drain_s)
    if p["cache"] is not None:
        assert p["cache"] <= math.ceil(a.n * policy.cache_pressure_cap)
    cap = policy.max_replicas if policy.max_replicas is not None else PROPOSAL_LIMIT
    assert min_replicas <= rec.desired <= cap
    assert rec.desired == min(cap, max(v for v in p.values() if v is not None))


@PROPERTIES
@given(gpus=st.lists(busy, min_size=1, max_size=16), index=st.integers(min_value=0), bump=busy)
def test_desired_never_falls_when_a_pod_gets_busier(gpus: list[float], index: int, bump: float) -> None:
    busier = list(gpus)
    busier[index % len(gpus)] = min(1.0, busier[index % len(gpus)] + bump)
    policy = RuntimePolicy()
    before = recommend(aggregate(pods_with(gpu=list(gpus)), policy, NOW), policy).desired
    after = recommend(aggregate(pods_with(gpu=list(busier)), policy, NOW), policy).desired
    assert after >= before


hot_pods = st.lists(st.floats(min_value=0.05, max_value=1.0), min_size=1, max_size=10)


@PROPERTIES
@given(hot=hot_pods, idle=st.integers(min_value=0, max_value=60), p=st.floats(min_value=1.0, max_value=4.0))
def test_idle_pod_added_never_raises_demand_by_a_whole_pod_past_the_fixed_point(
    hot: list[float], idle: int, p: float
) -> None:
    target = 0.8
    values = hot + [0.0] * idle
    n = len(values)
    before = n * power_mean(values, p) / target
    assume(before <= n)  # past the fixed point: the pods we have cover the demand
    after = (n + 1) * power_mean([*values, 0.0], p) / target
    assert after - before < 1.0


@PROPERTIES
@given(
    hot=hot_pods,
    p=st.floats(min_value=1.0, max_value=4.0),
    target=st.floats(min_value=0.5, max_value=0.95),
    rps_scale=st.floats(min_value=1.0, max_value=500.0),
)
def test_idle_pods_added_never_ratchet_up(hot: list[float], p: float, target: float, rps_scale: float) -> None:
    """Hot pods keep all the load and every added pod stays idle: replicas := desired still settles."""
    max_replicas = 1000
    policy = RuntimePolicy(
        skew_order=p, target_gpu_busy=target, target_rps_per_pod=rps_scale * target, max_replicas=max_replicas
    )
    replicas = len(hot)
    for _ in range(max_replicas):
        idle = [0.0] * (replicas - len(hot))
        gpu = [*hot, *idle]
        rec = recommend(agg(replicas, gpu=power_mean(gpu, p), rate=power_mean([g * rps_scale for g in gpu], p)), policy)
        if rec.desired <= replicas:
            break
        replicas = rec.desired
    else:
        pytest.fail("replicas kept rising")
    assert replicas < max_replicas
