"""One count of cold loads in every output: the table's, the loading-thread line's and report.json's.

A reviewer found report.md giving mean-hpa 13,290 cold loads in its table and "waited for a loading thread:
11761 cold loads" below it. The table counts every load a request asked for of a model held nowhere; the waits
line counted only those a loading thread took. The others never ran: evicted from a full cache before their turn
(the model's next request loads it again, another cold load), on a pod a scale-down removed first (its
pre-shutdown copies the model elsewhere, counted moved by scale-down, not as another cold load), or still queued
when the trace ended. The line now says which of the table's cold loads it counts, and report.json why the others
did not run.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.simulation.cluster import Cluster, ClusterShape
from autoscaler.simulation.engine import simulate
from autoscaler.simulation.synthetic_trace import synthetic
from autoscaler.simulation.trace_buckets import buckets
from tests.simulation import runs
from tests.simulation.test_preshutdown import ScheduledPolicy
from tests.simulation.ticks import delayed_over

SHAPE = ClusterShape(pod_rps=10.0, cache_models=5, load_time_s=10.0, startup_delay_s=30.0, slo_queue_s=0.1,
                     min_churn_age_s=0.0)
"""No churn limit: a full pod takes a load in place of its oldest copy, however recent."""


def never_ran(cluster: Cluster, now: float) -> dict[str, int]:
    waits = cluster.load_waits(now)
    return {"evicted": waits.cold_evicted, "pod_removed": waits.cold_pod_removed, "queued_at_end": waits.cold_queued}


def test_report_md_and_report_json_say_which_of_the_tables_cold_loads_waited_for_a_loading_thread(
        tmp_path: Path) -> None:
    # One pod (fixed, --min-replicas 1) serves model-a; at 60 s ten models held nowhere are asked for at once. One
    # thread, 25 s a load: they start at 60, 85 and 110 s, and the trace ends at 120 s with seven still queued.
    # The table counts the ten cold loads; the waits line counted the three a thread took as "3 cold loads".
    rows = "0,model-a,60\n60,model-a,60\n" + "".join(f"60,model-{i},60\n" for i in range(10))
    trace = runs.write_trace(tmp_path, rows)
    result = runs.simulate(tmp_path, trace, "--policies", "fixed", "--min-replicas", "1", "--load-time", "25")
    assert result.returncode == 0, result.stderr
    fixed = runs.report(tmp_path)["policies"]["fixed"]
    assert fixed["cold_loads"] == 10
    assert fixed["load_waits_s"]["cold_loads"]["loads"] == 3
    assert fixed["cold_loads_never_ran"] == {"evicted": 0, "pod_removed": 0, "queued_at_end": 7}
    text = (tmp_path / "out" / "report.md").read_text()
    assert "| fixed | " in text and " | 10 (0) | " in text
    assert ("waited for a loading thread (1 a pod): 3 of the 10 cold loads (7 never got one: 7 still queued when "
            "the trace ended): mean 25 s, p95 50 s, longest 50 s") in text


def test_a_cold_load_on_a_pod_removed_while_it_runs_counts_once_and_its_model_moves() -> None:
    # One model, asked for at 100 s on the newest of two pods (the other full of older copies), which a scale-down
    # removes at 105 s, its load under way. ModelMesh's pre-shutdown copies the model to the pod that stays: a
    # move (migrated_loads), whose load its requests wait for, not a second cold load, at this routing or the next.
    cluster = Cluster(SHAPE, 2, tick_s=5.0)
    old, new = cluster.pods
    for model in range(10, 15):
        cluster.copies.load(old, model, 50.0)
    cluster.route(100.0, [0], [1.0], 60.0)
    assert 0 in new.cache and cluster.cold_loads == 1
    old.deletion_cost, new.deletion_cost = 1, 0
    assert cluster.scale_to(1, 105.0) == [new.name]
    cluster.route(105.0, [0], [1.0], 55.0)
    delayed_over(cluster, 105.0, 4)
    cluster.route(160.0, [0], [1.0], 60.0)
    assert (cluster.cold_loads, cluster.migrated_loads) == (1, 1)
    assert len(cluster.load_waits(160.0).cold) == 1  # a thread took it: it waited 0 s
    assert never_ran(cluster, 160.0) == {"evicted": 0, "pod_removed": 0, "queued_at_end": 0}


def test_a_cold_load_queued_on_a_pod_removed_before_its_turn_never_ran() -> None:
    # As above, but the new pod's thread is busy with a copy from 95 to 105 s: the cold load asked at 100 s has not
    # started when the pod goes at 102 s. It is still one cold load (a request found its model nowhere), one a
    # thread never took, and the model moves to the pod that stays.
    cluster = Cluster(SHAPE, 2, tick_s=5.0)
    old, new = cluster.pods
    for model in range(10, 15):
        cluster.copies.load(old, model, 50.0)
    cluster.copies.start_copy(7, new, 95.0, 115.0)
    cluster.route(100.0, [0], [1.0], 60.0)
    old.deletion_cost, new.deletion_cost = 1, 0
    cluster.scale_to(1, 102.0)
    cluster.route(102.0, [0], [1.0], 58.0)
    delayed_over(cluster, 102.0, 4)
    cluster.route(160.0, [0], [1.0], 60.0)
    assert (cluster.cold_loads, cluster.migrated_loads) == (1, 1)
    assert len(cluster.load_waits(160.0).cold) == 0
    assert never_ran(cluster, 160.0) == {"evicted": 0, "pod_removed": 1, "queued_at_end": 0}


def test_a_cold_load_evicted_before_its_turn_never_ran_and_the_next_request_loads_again() -> None:
    # A pod of two cache places loads model 7's copy from 100 to 110; cold loads of models 3 and 4 at 105 queue
    # behind it. At 106 a load of model 5 evicts model 3's copy, whose load had not started: a cold load that
    # never ran. Model 3's next request, at 160, finds it nowhere: a second cold load, which runs.
    cluster = Cluster(replace(SHAPE, cache_models=2), 1, tick_s=5.0)
    pod = cluster.pods[0]
    cluster.copies.start_copy(7, pod, 100.0, 120.0)
    cluster.route(105.0, [3, 4], [1.0, 1.0], 60.0)
    cluster.copies.load(pod, 5, 106.0)
    assert cluster.cold_loads == 2
    cluster.route(160.0, [3], [1.0], 60.0)
    assert cluster.cold_loads == 3
    assert len(cluster.load_waits(200.0).cold) == 2
    assert never_ran(cluster, 200.0) == {"evicted": 1, "pod_removed": 0, "queued_at_end": 0}


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), models=st.integers(1, 60), rps=st.floats(5.0, 120.0),
       plan=st.lists(st.integers(1, 8), min_size=1, max_size=40), concurrency=st.integers(1, 3),
       cache=st.integers(2, 20))
def test_every_cold_load_either_waited_for_a_thread_or_is_said_why_it_never_ran(
        seed: int, models: int, rps: float, plan: list[int], concurrency: int, cache: int) -> None:
    # Whatever the scale-ups, scale-downs and evictions: the cold loads counted are those a loading thread took
    # (their waits) and those evicted, removed with their pod or still queued before one did, each once.
    shape = ClusterShape(pod_rps=20.0, cache_models=cache, load_time_s=10.0, startup_delay_s=30.0,
                         load_concurrency=concurrency, min_churn_age_s=0.0)
    trace = synthetic(models=models, hours=0.25, mean_rps=rps, shape="churn", seed=seed)
    length, parts = buckets(trace, 5.0)
    result = simulate(parts, length, 5.0, shape, ScheduledPolicy(plan[0], plan=plan), plan[0])
    waits = result.load_waits
    ran = len(waits.cold)
    assert result.cold_loads == ran + waits.cold_evicted + waits.cold_pod_removed + waits.cold_queued
