"""The replica recommendation (DESIGN §6): each term, the winner, the cap, and the fixed point."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from autoscaler.model import PodSample
from autoscaler.names import ServedMetric
from autoscaler.policies.aggregation import aggregate
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import PROPOSAL_LIMIT, RuntimePolicy
from autoscaler.policies.power_mean import power_mean
from autoscaler.policies.recommendation import ceil_pods, recommend
from tests.policies.builders import NOW, PROPERTIES, pod, pods_with, snapshot


def pods(**columns: list[float | None]) -> tuple[PodSample, ...]:
    return pods_with(**columns)


DRAIN_15 = RuntimePolicy(queue_drain_s=15.0)
"""The cases below drain queues in 15 s (the default before the simulator chose 60 s): round numbers."""


@dataclass(frozen=True)
class Case:
    id: str
    pods: tuple[PodSample, ...]
    desired: int
    winner: str
    proposals: dict[str, int | None] = field(default_factory=dict)  # only the keys to check
    policy: RuntimePolicy = field(default_factory=lambda: DRAIN_15)
    held: dict[str, int] = field(default_factory=dict)  # the last refresh's proposals
    seen: frozenset[str] = frozenset()  # signals the runtime reported before


# Every expected number below was worked out by hand from DESIGN §6 (target GPU busy 0.8, queue target
# 0.05 s, drain 15 s, cache cap 1.2, target LRU age 600 s); the comment shows the arithmetic.
CASES = [
    Case("even_load_at_target_keeps_the_pods", pods(gpu=[0.8] * 4), 4, "gpu", {"gpu": 4}),  # 4*0.8/0.8
    Case("even_load_above_target_adds_pods", pods(gpu=[1.0] * 4), 5, "gpu", {"gpu": 5}),  # 4/0.8 = 5
    # [0.9, 0.1, 0.1, 0.1]: M_2 = sqrt(0.84/4) = 0.458; 4*0.458/0.8 = 2.29 -> 3 (the mean would ask for 2)
    Case("one_hot_pod_counts_more_than_the_mean", pods(gpu=[0.9, 0.1, 0.1, 0.1]), 3, "gpu", {"gpu": 3}),
    Case("all_idle_falls_to_one", pods(gpu=[0.0] * 4), 1, "min_replicas", {"gpu": 0}),
    Case("single_pod_busy_asks_for_two", pods(gpu=[0.9]), 2, "gpu", {"gpu": 2}),  # 0.9/0.8 = 1.125
    Case("float_fuzz_does_not_add_a_pod", pods(gpu=[0.8000000000000002] * 3), 3, "gpu", {"gpu": 3}),
    Case(
        "request_rate_proposes_when_a_target_is_set",
        pods(gpu=[0.2] * 4, rps=[150.0] * 4),
        6,  # 4*150/100
        "requests",
        {"requests": 6, "gpu": 1},
        RuntimePolicy(target_rps_per_pod=100.0),
    ),
    Case(
        "cpu_runtime_without_a_request_target_keeps_its_ready_pods",
        pods(rps=[500.0, 400.0, 0.0, 0.0], queue=[0.0] * 4),
        4,
        "ready_pods",
        {"requests": None, "gpu": None, "ready_pods": 4},
    ),
    Case(
        # D = 4*0.5/0.8 = 2.5; excess = 15.05 - 0.05 = 15 pod-s over 15 s = 1 pod; 2.5 + 1 = 3.5 -> 4
        "queue_adds_the_excess_backlog_on_top_of_demand",
        pods(gpu=[0.5] * 4, queue=[15.05, 0.05, 0.0, 0.0]),
        4,
        "queue",
        {"queue": 4, "gpu": 3},
    ),
    Case(
        # one pod at 0.2 s: 2.5 + 0.15/15 = 2.51 -> 3, the same as the GPU term: no extra pod per step
        "a_small_persistent_queue_asks_for_no_pod_beyond_demand",
        pods(gpu=[0.5] * 4, queue=[0.2, 0.0, 0.0, 0.0]),
        3,
        "gpu",
        {"queue": 3, "gpu": 3},
    ),
    Case(
        # no capacity signal: anchor = 2 saturated pods; excess 2*30 = 60 pod-s / 15 s = 4; 2 + 4 = 6
        "queue_without_capacity_signal_anchors_on_saturated_pods",
        pods(rps=[10.0, 10.0], queue=[30.05, 30.05]),
        6,
        "queue",
        {"queue": 6, "ready_pods": 2},
    ),
    Case(
        # one saturated pod among 4 on a CPU runtime: 1 + 0.15/15 -> 2; the Ready pods (4) stay
        "queue_without_capacity_signal_never_scales_down",
        pods(rps=[10.0] * 4, queue=[0.2, 0.0, 0.0, 0.0]),
        4,
        "ready_pods",
        {"queue": 2, "ready_pods": 4},
    ),
    Case("queue_below_target_proposes_nothing", pods(gpu=[0.5] * 4, queue=[0.04] * 4), 3, "gpu", {"queue": None}),
    Case("cache_with_room_proposes_nothing", pods(gpu=[0.1] * 4, cache=[0.5] * 4), 1, "gpu", {"cache": None}),
    Case(
        # pressure 600/100 = 6, capped at 1.2: 4*1.2 = 4.8 -> 5
        "cache_full_and_thrashing_is_capped",
        pods(gpu=[0.1] * 4, cache=[0.95] * 4, lru=[100.0] * 4),
        5,
        "cache",
        {"cache": 5, "gpu": 1},
    ),
    Case(
        # pressure 600/2400 = 0.25: 10*0.25 = 2.5 -> 3; GPU 10*0.1/0.8 = 1.25 -> 2
        "cache_full_but_calm_asks_for_fewer",
        pods(gpu=[0.1] * 10, cache=[0.95] * 10, lru=[2400.0] * 10),
        3,
        "cache",
        {"cache": 3, "gpu": 2},
    ),
    Case(
        "max_replicas_caps_the_winner",
        pods(gpu=[1.0] * 10),
        8,
        "max_replicas",
        {"gpu": 13},  # 10/0.8 = 12.5
        RuntimePolicy(max_replicas=8),
    ),
    Case(
        "min_replicas_is_the_floor",
        pods(gpu=[0.2] * 4),
        3,
        "min_replicas",
        {"gpu": 1, "min_replicas": 3},
        RuntimePolicy(min_replicas=3),
    ),
    Case(
        "a_signal_equal_to_the_floor_wins_the_tie",
        pods(gpu=[0.8] * 3),
        3,
        "gpu",
        {"gpu": 3, "min_replicas": 3},
        RuntimePolicy(min_replicas=3),
    ),
    Case(
        # the hot pod's GPU series vanished: 3*0.1/0.8 -> 1 from the rest, but the held 5 stands
        "gpu_missing_on_the_hot_pod_keeps_the_gpu_proposal",
        pods(gpu=[None, 0.1, 0.1, 0.1], rps=[100.0, 10.0, 10.0, 10.0]),
        5,
        "gpu",
        {"gpu": 5},
        held={"gpu": 5},
    ),
    Case(
        "gpu_missing_on_every_pod_keeps_the_last_proposal",
        pods(rps=[100.0, 10.0, 10.0, 10.0]),
        5,
        "gpu",
        {"gpu": 5, "ready_pods": None},
        held={"gpu": 5},
        seen=frozenset({"gpu"}),
    ),
    Case(
        "gpu_missing_on_one_pod_may_still_rise",
        pods(gpu=[None, 1.0, 1.0, 1.0]),
        4,  # 3*1.0/0.8 = 3.75 -> 4, above the held 2
        "gpu",
        {"gpu": 4},
        held={"gpu": 2},
    ),
    Case(
        "queue_missing_on_the_saturated_pod_keeps_the_queue_proposal",
        pods(gpu=[0.5] * 4, queue=[None, 0.0, 0.0, 0.0]),
        6,
        "queue",
        {"queue": 6, "gpu": 3},
        held={"queue": 6, "gpu": 3},
    ),
    Case(
        # the queue rides on the larger capacity term: GPU 2*0.8/0.8 = 2, requests 2*300/100 = 6; excess
        # 30.05 - 0.05 = 30 pod-s over the default 60 s drain = 0.5: 6 + 0.5 = 6.5 -> 7 (on the GPU: 2.5 -> 3)
        "queue_rides_on_the_request_term_when_it_is_larger",
        pods(gpu=[0.8, 0.8], rps=[300.0, 300.0], cache=[0.5, 0.5], queue=[30.05, 0.0]),
        7,
        "queue",
        {"queue": 7, "requests": 6, "gpu": 2},
        RuntimePolicy(target_rps_per_pod=100.0),
    ),
    Case(
        # no capacity term: 1 saturated pod + (120.05 - 0.05) / 60 = 1 + 2 = 3, as many as the Ready pods:
        # the signal beats the floor it equals
        "queue_equal_to_the_ready_pods_wins_the_tie",
        pods(rps=[10.0, 10.0, 10.0], queue=[120.05, 0.0, 0.0]),
        3,
        "queue",
        {"queue": 3, "ready_pods": 3},
        RuntimePolicy(),
    ),
    Case(
        # a queue exactly at target_queue_delay_s (0.05 s) is not a backlog: no queue proposal; GPU 0.4/0.8 -> 1
        "queue_exactly_at_target_proposes_nothing",
        pods(gpu=[0.4], rps=[10.0], queue=[0.05], cache=[0.5]),
        1,
        "gpu",
        {"queue": None, "gpu": 1},
        RuntimePolicy(),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_recommend(case: Case) -> None:
    rec = recommend(aggregate(case.pods, case.policy, NOW, case.seen), case.policy, case.held)
    assert (rec.desired, rec.winner) == (case.desired, case.winner)
    assert set(rec.proposals) == {"gpu", "requests", "queue", "cache", "ready_pods", "min_replicas"}
    for term, expected in case.proposals.items():
        assert rec.proposals[term] == expected, term


def test_a_term_computed_exactly_at_its_held_proposal_is_not_held() -> None:
    """GPU missing on pod-2 only: 2 of 3 fresh (coverage 0.67 >= 0.5), 2*0.8/0.8 = 2.0 pods, exactly the held 2:
    the term did not fall, so /debug names no hold for it."""
    policy = RuntimePolicy()
    rec = recommend(aggregate(pods(gpu=[0.8, 0.8, None]), policy, NOW), policy, {"gpu": 2})
    assert (rec.proposals["gpu"], rec.desired) == (2, 2)
    assert "gpu" not in rec.held


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
        excess = sum(max(0.0, q - policy.target_queue_delay_s) for q in queues if q is not None)
        anchor = a.n * busiest / policy.target_gpu_busy if p["gpu"] is not None else a.saturated
        assert p["queue"] <= math.ceil(anchor + excess / policy.queue_drain_s + 1e-9)
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


hot_pod = st.tuples(
    st.floats(min_value=0.05, max_value=1.0),  # GPU busy (ignored on a CPU runtime)
    st.floats(min_value=0.0, max_value=60.0),  # requests per second
    st.floats(min_value=0.0, max_value=3.0),  # queue delay: the backlog that stays on this pod
    st.one_of(st.none(), st.floats(min_value=1.0, max_value=5000.0)),  # LRU age with full caches, or room
)


@settings(max_examples=60, deadline=None)
@given(
    hot=st.lists(hot_pod, min_size=1, max_size=6),
    gpus=st.booleans(),
    p=st.floats(min_value=1.0, max_value=4.0),
    target=st.floats(min_value=0.5, max_value=0.95),
    rps_target=st.one_of(st.none(), st.floats(min_value=20.0, max_value=200.0)),
    drain=st.floats(min_value=5.0, max_value=60.0),
)
def test_replicas_set_to_desired_reach_a_fixed_point_below_the_cap(
    hot: list[tuple[float, float, float, float | None]],
    gpus: bool,
    p: float,
    target: float,
    rps_target: float | None,
    drain: float,
) -> None:
    """Every term at once: hot pods keep their load and their queues (queued requests stay on their pod),
    every added pod is idle. Where caches are full, they stay full with a constant working set: the global
    LRU age grows with the pods that hold it (an added pod's cache fills with the same models, so the least
    recently used copy gets older). Iterating `replicas := desired` through `decide` (holds and the
    no-capacity floor included) must settle, far below `max_replicas`.
    """
    max_replicas = 10_000
    policy = RuntimePolicy(
        skew_order=p, target_gpu_busy=target, target_rps_per_pod=rps_target, queue_drain_s=drain,
        scale_down_tau_s=0.0, max_replicas=max_replicas,
    )

    full = hot[0][3]
    def fleet(replicas: int, now: float) -> tuple[PodSample, ...]:
        cache = {"cache": 0.5, "lru": None} if full is None else {"cache": 0.95, "lru": full * replicas / len(hot)}
        busy = [
            pod(f"hot-{i}", gpu=b if gpus else None, rps=r, queue=q, models=3.0, now=now, **cache)
            for i, (b, r, q, _) in enumerate(hot)
        ]
        idle = [
            pod(f"idle-{i}", gpu=0.0 if gpus else None, rps=0.0, queue=0.0, models=3.0, now=now, **cache)
            for i in range(replicas - len(hot))
        ]
        return (*busy, *idle)

    replicas = len(hot)
    memory = None
    history = []
    for step in range(200):
        now = NOW + 15.0 * step
        view, memory = decide(snapshot(fleet(replicas, now), now=now), policy, memory, now, 30.0)
        desired = view.values[ServedMetric.DESIRED_REPLICAS].value
        assert desired is not None
        history.append(int(desired))
        if max(len(hot), int(desired)) == replicas:  # the hot pods stay: fewer is the same fleet
            break
        replicas = max(len(hot), int(desired))
    else:
        pytest.fail(f"replicas never settled: {history[:10]} ... {history[-10:]}")
    assert replicas < max_replicas


def test_one_queued_pod_with_idle_pods_added_settles_at_once() -> None:
    """The reproduction of the old ratchet: one CPU pod at 0.2 s queue delay, idle pods added one by one.
    The old queue term asked for n + 1 at every step (1 -> 41 in 40 steps); now the Ready pods are kept
    and nothing more is asked: 1 saturated pod + 0.15 pod-s / 15 s = 1.01 -> 2 pods at most."""
    policy = RuntimePolicy(scale_down_tau_s=0.0, max_replicas=100)
    memory = None
    served = []
    for replicas in range(1, 41):
        fleet = (pod("hot", rps=5.0, queue=0.2), *(pod(f"idle-{i}", rps=0.0, queue=0.0) for i in range(replicas - 1)))
        view, memory = decide(snapshot(fleet), policy, memory, NOW + replicas, 30.0)
        served.append(view.values[ServedMetric.DESIRED_REPLICAS].value)
    assert served[:3] == [2.0, 2.0, 3.0]
    assert served[3:] == [float(n) for n in range(4, 41)]  # the pods we have, never one more
