"""Whole replays: nothing is lost or counted twice, pod-hours are what the pods ran, and the policies differ
where they should (skew) and agree where they should (even load)."""

from __future__ import annotations

import math
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.policies.policy import RuntimePolicy
from autoscaler.simulation.cluster import Cluster, ClusterShape
from autoscaler.simulation.engine import PolicyResult, oracle, simulate
from autoscaler.simulation.hpa_manifest import behavior_from_manifest
from autoscaler.simulation.policies import FixedPolicy, MeanHpaPolicy, SimPolicy, SkewAwarePolicy, SyncOutcome
from autoscaler.simulation.shipped import SHIPPED_BEHAVIOR
from autoscaler.simulation.synthetic_trace import synthetic
from autoscaler.simulation.trace import Trace, from_rows
from autoscaler.simulation.trace_buckets import buckets

ROOT = Path(__file__).resolve().parents[2]
SHAPE = ClusterShape(pod_rps=20.0, cache_models=20, load_time_s=10.0, startup_delay_s=30.0)


def policies(maximum: int = 12) -> list[SimPolicy]:
    return [FixedPolicy(4), MeanHpaPolicy(2, maximum),
            SkewAwarePolicy(RuntimePolicy(min_replicas=2, max_replicas=maximum), 2, maximum, SHIPPED_BEHAVIOR)]


def replay(trace: Trace, policy: SimPolicy, initial: int = 4, shape: ClusterShape = SHAPE) -> PolicyResult:
    length, parts = buckets(trace, 5.0)
    return simulate(parts, length, 5.0, shape, policy, initial)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), models=st.integers(1, 40), rps=st.floats(5.0, 150.0),
       shape=st.sampled_from(["mixed", "bursty", "churn"]))
def test_every_request_of_the_trace_is_served_and_counted_once(seed: int, models: int, rps: float,
                                                               shape: str) -> None:
    # Served, or failed because every pod refused its model's load (ModelMesh's churn limit): never both,
    # never neither; a failed request also counts as delayed.
    trace = synthetic(models=models, hours=0.5, mean_rps=rps, shape=shape, seed=seed)
    for policy in policies():
        result = replay(trace, policy)
        assert math.isclose(result.requests, trace.total_requests, rel_tol=1e-9, abs_tol=1e-6)
        assert math.isclose(result.served + result.refused_requests, trace.total_requests, rel_tol=1e-9,
                            abs_tol=1e-6)
        assert result.refused_requests <= result.delayed_requests + 1e-6


def test_pod_hours_are_the_integral_of_ready_and_starting_pods_and_fixed_never_scales() -> None:
    trace = synthetic(models=30, hours=2, mean_rps=120.0, shape="bursty", seed=5)
    for policy in policies():
        result = replay(trace, policy)
        # Rebuild the pod count from the scale events alone and integrate it over the trace.
        pods, since, total = 4, 0.0, 0.0
        for event in result.events:
            assert event.before == pods
            total += pods * (event.at_s - since)
            pods, since = event.after, event.at_s
        total += pods * (trace.duration_s - since)
        assert math.isclose(result.pod_hours, total / 3600.0, rel_tol=1e-9)
        if policy.name == "fixed":
            assert result.scale_events == 0 and set(result.timeline.replicas) == {4}
        else:
            assert result.scale_events > 0


def even_cluster(pods: int, per_pod_rps: float) -> Cluster:
    """`pods` Ready pods each serving one model at `per_pod_rps`, with their exporter windows full."""
    cluster = Cluster(SHAPE, pods, tick_s=5.0)
    cluster.route(0.0, list(range(pods)), [per_pod_rps] * pods, 60.0)
    cluster.route(0.0, list(range(pods)), [per_pod_rps] * pods, 60.0)
    for k in range(8):
        cluster.step(5.0 * k)
    return cluster


def test_even_load_gives_the_same_proposals_for_mean_hpa_and_skew_aware() -> None:
    # Same targets (80% busy), so on even load the power mean is the mean and both HPAs' metrics propose the
    # same replicas (their behaviors then differ: that is the point of the shipped one).
    for pods in (2, 5, 9):
        for busy in (0.3, 0.5, 0.8, 0.95, 1.0):
            cluster = even_cluster(pods, busy * SHAPE.pod_rps)
            mean, skew = policies(maximum=40)[1:]
            a = mean.sync(60.0, cluster)
            b = skew.sync(60.0, cluster)
            assert a.proposed is not None and b.proposed is not None
            assert max(2, a.proposed) == max(2, b.proposed), (pods, busy, a, b)  # both floored at minReplicas 2


def test_a_hot_model_on_one_pod_makes_skew_aware_scale_up_earlier() -> None:
    # Four pods share 40 quiet models at 14 req/s per pod (70% busy: both hold at 4); from minute 5 one model
    # grows by 1 req/s every minute. Its pod saturates long before the mean reaches the 80% target.
    times, names, counts = [], [], []
    for minute in range(40):
        for m in range(40):
            times.append(minute * 60.0)
            names.append(f"quiet-{m}")
            counts.append(1.4 * 60)
        times.append(minute * 60.0)
        names.append("hot")
        counts.append(max(0, minute - 4) * 60.0)
    trace = from_rows(times, names, counts)
    shape = ClusterShape(pod_rps=20.0, cache_models=50)
    first_up = {}
    for policy in policies()[1:]:
        result = replay(trace, policy, initial=4, shape=shape)
        first_up[policy.name] = next(e.at_s for e in result.events if e.after > e.before)
    assert first_up["skew-aware"] < first_up["mean-hpa"] - 60, first_up


def test_the_shipped_behavior_is_what_the_manifests_ship() -> None:
    manifests = sorted((ROOT / "manifests").rglob("hpa-*.yaml"))
    assert manifests
    for path in manifests:
        assert behavior_from_manifest(yaml.safe_load(path.read_text())) == SHIPPED_BEHAVIOR, path


def test_the_oracle_counts_full_pods_per_interval_and_the_loads_no_policy_avoids() -> None:
    # Per minute: 126, 60, 0 and 3 requests, i.e. 2.1, 1, 0 and 0.05 req/s; pods of 1 req/s need 3, 1, 0, 1.
    trace = from_rows([0.0, 0.0, 60.0, 180.0], ["a", "b", "c", "d"], [120.0, 6.0, 60.0, 3.0])
    best = oracle(trace, ClusterShape(pod_rps=1.0, cache_models=1), target_lru_age_s=120.0, warm_s=60.0)
    assert best.pod_hours == (3 + 1 + 0 + 1) / 60
    # With one model per pod, the models used in the last 2 minutes: 2, 3, 1 (c), 1 (d) pods.
    assert best.cache_pod_hours == (3 + 3 + 1 + 1) / 60
    assert best.first_loads == 2  # c and d appear after the first minute, which starts loaded


def test_mean_hpa_counts_a_just_ready_pod_without_metrics_as_missing_not_idle() -> None:
    # Four pods at 75% busy and two that just became Ready and have not been scraped yet. The HPA has no metric
    # for those two: on a scale-down it counts them at the target (4 x 75% + 2 x 80%) / 6 = 76.7%, within the
    # tolerance of 80%: it holds 6. Read as idle pods, the mean would be 50% and it would drop to 4 at once.
    cluster = even_cluster(4, 0.75 * SHAPE.pod_rps)
    cluster.scale_to(6, 40.0)
    assert cluster.promote(40.0 + SHAPE.startup_delay_s)
    mean = MeanHpaPolicy(2, 12)
    outcome = mean.sync(40.0 + SHAPE.startup_delay_s, cluster)
    assert outcome.proposed == 6 and outcome.desired == 6, outcome


def test_skew_aware_without_deletion_costs_leaves_the_pods_to_the_replica_sets_newest_first() -> None:
    # One hot pod and three idle ones: with costs the idle pods rank lowest; without (the adapter's
    # `--deletion-cost off`) every pod keeps cost 0 and a scale-down by one removes the newest, pod-3.
    cluster = Cluster(SHAPE, 4, tick_s=5.0)
    cluster.route(0.0, [0], [15.0], 60.0)
    for k in range(8):
        cluster.step(5.0 * k)
    policy = RuntimePolicy(min_replicas=2, max_replicas=12)
    ranked = SkewAwarePolicy(policy, 2, 12, SHIPPED_BEHAVIOR)
    ranked.refresh(40.0, cluster)
    hot = cluster.holders[0][0]
    assert hot.deletion_cost > max(p.deletion_cost for p in cluster.pods if p is not hot)
    SkewAwarePolicy(policy, 2, 12, SHIPPED_BEHAVIOR, deletion_costs=False).refresh(45.0, cluster)
    assert {p.deletion_cost for p in cluster.pods} == {0}
    assert cluster.scale_to(3, 45.0) == ["pod-3"]


def test_a_request_that_waits_for_a_cold_load_on_a_full_pod_is_delayed_once() -> None:
    # One pod, far over its capacity all along, and a new model every minute: every request queues past the
    # SLO, and those of each new model also wait for its load. Each is one delayed request, not two
    # (`--max-replicas 1` on a busy trace reported a delayed ratio of 1.0003).
    times = [60.0 * m for m in range(20) for _ in range(2)]
    names = [name for m in range(20) for name in ("hot", f"new-{m}")]
    trace = from_rows(times, names, [6000.0, 600.0] * 20)
    result = replay(trace, FixedPolicy(1), initial=1)
    assert result.cold_loads == 19 and result.delayed_loading > 0
    assert result.delayed_requests <= result.requests * (1 + 1e-9)
    assert result.delayed_ratio <= 1.0 + 1e-9


@dataclass
class CountingPolicy(FixedPolicy):
    """Fixed replicas that records when the HPA asked it."""

    synced_at: list[float] = field(default_factory=list)

    def sync(self, now: float, cluster: Cluster) -> SyncOutcome:
        self.synced_at.append(now)
        return super().sync(now, cluster)


@pytest.mark.parametrize("tick_s", [1.0, 2.0, 4.0, 5.0, 10.0])
def test_the_hpa_syncs_every_15_s_whatever_the_tick(tick_s: float) -> None:
    # The HPA syncs every 15 s (docs/design.md); a tick that does not divide 15 s must not stretch that to
    # 16 s (tick 2 or 4) or 20 s (tick 10): over an hour the HPA acts 240 times, at most one tick late.
    trace = from_rows([60.0 * m for m in range(60)], ["a"] * 60, [600.0] * 60)
    length, parts = buckets(trace, tick_s)
    policy = CountingPolicy(2)
    simulate(parts, length, tick_s, SHAPE, policy, 2)
    assert len(policy.synced_at) == 3600 // 15 - 1  # the first at 15 s
    assert all(0.0 <= at - 15.0 * k < tick_s for k, at in enumerate(policy.synced_at, start=1))


def test_the_oracle_of_a_week_of_5000_models_needs_memory_for_its_rows_not_for_every_model_each_interval(
) -> None:
    # A week of Prometheus data at a 15 s step, 5,000 models, a million rows with requests: the oracle took
    # 2.8 GB (every model in every interval, several times over); a week at 1 s would not fit at all.
    rng = np.random.default_rng(0)
    models, intervals = 5000, 7 * 86400 // 15
    key = np.unique(rng.integers(0, intervals, 1_000_000) * models + rng.integers(0, models, 1_000_000))
    trace = Trace(tuple(f"m{i}" for i in range(models)), 0.0, 15.0, intervals, key // models, key % models,
                  np.ones(len(key)))
    tracemalloc.start()
    try:
        oracle(trace, SHAPE, target_lru_age_s=600.0, warm_s=15.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 200 * 2**20, f"{peak / 2**20:.0f} MiB"


@settings(max_examples=30, deadline=None)
@given(uses=st.lists(st.tuples(st.integers(0, 30), st.integers(0, 4)), min_size=1, unique=True),
       lookback_s=st.sampled_from([60.0, 120.0, 300.0]))
def test_the_cache_oracle_counts_each_interval_the_models_used_within_the_lru_age(
        uses: list[tuple[int, int]], lookback_s: float) -> None:
    slots, models = (np.array(column, dtype=np.int64) for column in zip(*uses, strict=True))
    trace = Trace(("m0", "m1", "m2", "m3", "m4"), 0.0, 60.0, int(slots.max()) + 1, slots, models,
                  np.ones(len(uses)))
    best = oracle(trace, ClusterShape(pod_rps=1e9, cache_models=1), target_lru_age_s=lookback_s)
    recent = [len({m for s, m in uses if t - lookback_s / 60.0 < s <= t}) for t in range(trace.intervals)]
    assert best.cache_pod_hours == pytest.approx(sum(recent) / 60.0)  # a model per pod, requests no weight
