"""A scale-down's pre-shutdown copies every model of the leaving pod, not only those no other pod holds."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.simulation.cluster import Cluster, ClusterShape
from autoscaler.simulation.engine import simulate
from autoscaler.simulation.policies import FixedPolicy, SyncOutcome
from autoscaler.simulation.synthetic_trace import synthetic
from autoscaler.simulation.trace_buckets import buckets
from tests.simulation import runs
from tests.simulation.ticks import delayed_over

SHAPE = ClusterShape(pod_rps=10.0, cache_models=2, load_time_s=10.0, startup_delay_s=30.0, slo_queue_s=0.1)


def test_a_scale_down_copies_a_model_held_elsewhere_to_a_pod_without_it() -> None:
    # ModelMesh.java `preShutdown` calls `triggerNewModelCopyElsewhere` for every model in the leaving pod's cache,
    # which excludes the model's current holders ("toExclude.addAll(current)"): model 0, on the leaving pod and
    # on one other, gets a new copy on the third pod, and keeps two copies.
    cluster = Cluster(SHAPE, 3, tick_s=5.0)
    leaving, holder, spare = cluster.pods
    cluster.copies.load(leaving, 0, 100.0)
    cluster.copies.load(holder, 0, 100.0)
    cluster.copies.load(spare, 1, 100.0)
    leaving.deletion_cost = -1
    assert cluster.scale_to(2, 200.0) == [leaving.name]
    assert sorted(p.name for p in cluster.holders[0]) == [holder.name, spare.name]
    assert spare.cache[0] == 100.0  # the copy keeps its last use (the leaving copy's lruTime)
    assert cluster.migrated_loads == 1


def test_a_model_every_other_pod_holds_or_loads_gets_no_new_copy() -> None:
    # With the holders and the pods loading it excluded there is nowhere to put a copy: the model keeps those.
    cluster = Cluster(SHAPE, 3, tick_s=5.0)
    leaving, holder, loader = cluster.pods
    for pod in (leaving, holder):
        cluster.copies.load(pod, 0, 100.0)
    cluster.copies.start_copy(0, loader, 150.0, 170.0)
    leaving.deletion_cost = -1
    cluster.scale_to(2, 155.0)
    assert cluster.holders[0] == [holder] and cluster.migrated_loads == 0
    cluster.settle(160.0)
    assert sorted(p.name for p in cluster.holders[0]) == [holder.name, loader.name]


def test_two_leaving_pods_holding_a_model_ask_for_one_copy_between_them() -> None:
    # Both pods' pre-shutdowns exclude the same holders (the model record as the scale-down found it); the
    # second request finds the copy the first one loads, on a pod it did not exclude, and loads nothing more.
    cluster = Cluster(SHAPE, 4, tick_s=5.0)
    first, second, holder, spare = cluster.pods
    for pod in (first, second, holder):
        cluster.copies.load(pod, 0, 100.0)
    first.deletion_cost = second.deletion_cost = -1
    cluster.scale_to(2, 200.0)
    assert sorted(p.name for p in cluster.holders[0]) == [holder.name, spare.name]
    assert cluster.migrated_loads == 1


ROOMY = replace(SHAPE, cache_models=3)
"""Room on the pod that stays for every model of the one that leaves."""


def leaving_with(models_rates: dict[int, float], shape: ClusterShape = ROOMY) -> tuple[Cluster, list[int],
                                                                                          list[float]]:
    """Two Ready pods, the first (the one a scale-down removes) alone holding `models_rates`' models, the last
    used most recently, routed at those request rates; the second empty."""
    cluster = Cluster(shape, 2, tick_s=5.0)
    leaving = cluster.pods[0]
    models, rates = list(models_rates), list(models_rates.values())
    for t, model in enumerate(models):
        cluster.copies.load(leaving, model, 100.0 + t)
    leaving.deletion_cost = -1
    cluster.route(190.0 + len(models), models, rates, 60.0)
    for t, model in enumerate(models):  # the routing used them all at once: their last uses one second apart
        leaving.cache[model] = 190.0 + t
    return cluster, models, rates


def delayed_after_scale_down(cluster: Cluster, models: list[int], rates: list[float], seconds: float) -> float:
    """Scale to one pod at t=200 (as the simulation does: remove, route what is left of a 60 s bucket, serve
    5 s ticks), and the requests delayed in the next `seconds`."""
    cluster.scale_to(1, 200.0)
    cluster.route(200.0, models, rates, 60.0)
    delayed = 0.0
    for k in range(int(seconds // 5)):
        cluster.settle(200.0 + 5 * k)
        delayed += cluster.step(200.0 + 5 * k).delayed
    return delayed


def test_the_requests_for_a_model_whose_only_copy_leaves_wait_for_its_copy_to_load() -> None:
    # ModelMesh's pre-shutdown removes the leaving pod's cache entry (`ce.remove()`) and then asks for a copy
    # elsewhere: model 0's 6 requests/s wait the 10 s load on the pod that stays, 60 requests, all of them delayed
    # (the pod that stays serves 10/s, so none queue).
    cluster, models, rates = leaving_with({0: 6.0})
    delayed = delayed_after_scale_down(cluster, models, rates, 30.0)
    assert delayed == 60.0
    assert cluster.delayed_loading == 60.0


def test_a_pod_loads_the_models_a_pre_shutdown_sends_it_one_at_a_time() -> None:
    # ModelMesh Serving's built-in adapters load one model at a time (maxLoadingConcurrency 1); the pre-shutdown
    # sends the most recently used model first: model 1 (used last) loads from 200 to 210, model 0 from 210 to
    # 220. At 1 request/s each: 10 + 20 = 30 requests wait.
    cluster, models, rates = leaving_with({0: 1.0, 1: 1.0})
    assert delayed_after_scale_down(cluster, models, rates, 60.0) == 30.0


def test_a_runtime_that_loads_two_models_at_once_waits_the_load_time_for_each() -> None:
    cluster, models, rates = leaving_with({0: 1.0, 1: 1.0}, replace(ROOMY, load_concurrency=2))
    assert delayed_after_scale_down(cluster, models, rates, 60.0) == 20.0


def test_a_model_with_a_loaded_copy_elsewhere_is_served_by_it_while_the_new_copy_loads() -> None:
    cluster = Cluster(SHAPE, 3, tick_s=5.0)
    leaving, holder, spare = cluster.pods
    for pod in (leaving, holder):
        cluster.copies.load(pod, 0, 100.0)
    leaving.deletion_cost = -1
    cluster.route(200.0, [0], [4.0], 60.0)
    cluster.scale_to(2, 200.0)
    cluster.route(200.0, [0], [4.0], 60.0)
    assert spare in cluster.holders[0]  # the pre-shutdown's copy
    assert delayed_over(cluster, 200.0, 6) == 0.0


def test_a_wait_longer_than_the_bucket_counts_on_into_the_next() -> None:
    # Model 1 is used last and loads first (200-210); model 0 waits until 220. A bucket that ends at 215 counts
    # model 0's wait to 215 (15 requests at 1/s, and model 1's 10); the next bucket's routing counts the last 5.
    cluster, models, rates = leaving_with({0: 1.0, 1: 1.0})
    cluster.scale_to(1, 200.0)
    cluster.route(200.0, models, rates, 15.0)
    delayed = delayed_over(cluster, 200.0, 3)
    assert delayed == 25.0
    cluster.route(215.0, models, rates, 60.0)
    assert delayed_over(cluster, 215.0, 6) == 5.0


def test_requests_counted_waiting_for_a_load_on_a_pod_that_goes_are_counted_where_they_go_instead() -> None:
    # A cold load on a pod counts its model's requests of the next 10 s delayed at once (a fluid). Removed 5 s
    # later, that pod takes none of them: they go where the model is loaded next and count there. Before, they
    # counted twice: model 0 at 1 request/s, 10 delayed on the pod that went and 10 on the one it went to, 20
    # delayed of the 15 requests that arrived in the 15 s.
    cluster = Cluster(ROOMY, 1, tick_s=5.0)
    cluster.scale_to(2, -30.0)
    cluster.promote(0.0)
    staying, going = cluster.pods
    for model in (1, 2, 3):  # the pod that stays is full (of old copies): the cold load goes to the empty one
        cluster.copies.load(staying, model, -1000.0)
    cluster.route(0.0, [0], [1.0], 60.0)
    assert cluster.holders[0] == [going]
    delayed = cluster.step(0.0).delayed
    going.deletion_cost = -1
    cluster.scale_to(1, 5.0)
    cluster.route(5.0, [0], [1.0], 55.0)
    delayed += delayed_over(cluster, 5.0, 2)
    assert cluster.arrived == 15.0
    assert delayed == 15.0


def test_a_runtime_that_loads_one_model_at_a_time_delays_more_after_a_scale_down(tmp_path: Path) -> None:
    # 20 models at 10 req/s each for 15 minutes (13 pods), then at 0.5 req/s for 25: mean-hpa removes most pods,
    # and the models whose copies all left wait while the two pods that stay load them. One load at a time, as
    # ModelMesh Serving's built-in adapters, they wait longer than eight at a time.
    trace = tmp_path / "drop.csv"
    rows = ["timestamp_s,model,requests"]
    rows += [f"{60 * m},model-{i},{600 if m < 15 else 30}" for m in range(40) for i in range(20)]
    trace.write_text("\n".join(rows) + "\n")
    waited = {}
    for concurrency in ("1", "8"):
        result = runs.simulate(tmp_path, trace, "--policies", "mean-hpa", "--load-concurrency", concurrency)
        assert result.returncode == 0, result.stderr
        written = runs.report(tmp_path)
        assert written["cluster"]["load_concurrency"] == int(concurrency)
        assert f"load 10 s ({concurrency} at a time)" in (tmp_path / "out" / "report.md").read_text()
        mean_hpa = written["policies"]["mean-hpa"]
        assert mean_hpa["migrated_loads"] > 0
        waited[concurrency] = mean_hpa["delayed_waiting_for_loads"]
    assert waited["1"] > waited["8"] > 0
    refused = runs.simulate(tmp_path, trace, "--load-concurrency", "0")
    assert refused.returncode == 2 and "--load-concurrency" in refused.stderr and "at least 1" in refused.stderr


@dataclass
class ScheduledPolicy(FixedPolicy):
    """Replicas from a schedule: `plan[k]` from the k-th HPA sync on (the last one after)."""

    plan: list[int] = field(default_factory=list)
    syncs: int = 0

    def sync(self, now: float, cluster: Cluster) -> SyncOutcome:
        replicas = self.plan[min(self.syncs, len(self.plan) - 1)]
        self.syncs += 1
        return SyncOutcome(replicas, "the schedule", proposed=replicas)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), models=st.integers(1, 60), rps=st.floats(5.0, 120.0),
       plan=st.lists(st.integers(1, 8), min_size=1, max_size=40), concurrency=st.integers(1, 3),
       cache=st.integers(2, 20))
def test_scale_downs_lose_no_request_and_delay_each_at_most_once(seed: int, models: int, rps: float, plan: list[int],
                                                                 concurrency: int, cache: int) -> None:
    # Whatever the scale-downs, their copies' waits count requests that arrive, once: served (or failed to the
    # churn limit) exactly once, and no more delayed than arrived.
    shape = ClusterShape(pod_rps=20.0, cache_models=cache, load_time_s=10.0, startup_delay_s=30.0,
                         load_concurrency=concurrency)
    trace = synthetic(models=models, hours=0.25, mean_rps=rps, shape="churn", seed=seed)
    length, parts = buckets(trace, 5.0)
    result = simulate(parts, length, 5.0, shape, ScheduledPolicy(plan[0], plan=plan), plan[0])
    assert math.isclose(result.requests, trace.total_requests, rel_tol=1e-9, abs_tol=1e-6)
    assert math.isclose(result.served + result.refused_requests, trace.total_requests, rel_tol=1e-9, abs_tol=1e-6)
    assert result.delayed_requests <= result.requests * (1 + 1e-9) + 1e-6
