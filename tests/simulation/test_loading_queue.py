"""One loading queue a pod: the copies the rate check, the regular-use rule and a scale-down's pre-shutdown ask
for load `load_concurrency` at a time on each pod, in the order they were asked for.

ModelMesh hands every load to its pod's loading threads (`maxLoadingConcurrency`, 1 in ModelMesh Serving's
built-in adapters); the loads beyond them wait in the pod's loading queue. Numbers by hand.
"""

from __future__ import annotations

from dataclasses import replace

from autoscaler.simulation.cluster import Cluster, ClusterShape, SimPod

SHAPE = ClusterShape(pod_rps=20.0, cache_models=4, load_time_s=10.0, startup_delay_s=30.0)


def loaded_at(cluster: Cluster, model: int, times: range, pod: SimPod | None = None) -> float:
    """The first of `times` at which a settle finds a loaded copy of `model` on `pod` (the second pod)."""
    pod = pod or cluster.pods[1]
    for now in times:
        cluster.settle(float(now))
        if pod in cluster.holders.get(model, []):
            return float(now)
    raise AssertionError(f"model {model} not loaded on {pod.name} by {times.stop}")


def test_two_copies_asked_of_one_pod_at_once_load_one_after_the_other() -> None:
    # Copies of models 0 and 1 asked of the second pod at t=100: model 0 loads from 100 to 110, model 1 from 110
    # to 120 (it was ready at 110 with both loading at once).
    cluster = Cluster(SHAPE, 2, tick_s=5.0)
    cluster.copies.start_copy(0, cluster.pods[1], 100.0)
    cluster.copies.start_copy(1, cluster.pods[1], 100.0)
    assert loaded_at(cluster, 0, range(100, 130)) == 110.0
    assert loaded_at(cluster, 1, range(110, 130)) == 120.0


def test_a_runtime_that_loads_two_at_once_loads_both_copies_in_the_load_time() -> None:
    cluster = Cluster(replace(SHAPE, load_concurrency=2), 2, tick_s=5.0)
    cluster.copies.start_copy(0, cluster.pods[1], 100.0)
    cluster.copies.start_copy(1, cluster.pods[1], 100.0)
    assert loaded_at(cluster, 1, range(100, 130)) == 110.0


def test_a_copy_asked_of_a_pod_loading_a_pre_shutdowns_copies_waits_for_them() -> None:
    # A scale-down at t=200 sends the second pod the two models only the leaving pod held (10 s each, one after
    # the other: loaded at 210 and 220); the rate check's copy of model 5, asked of it at 200 too, loads third,
    # from 220 to 230.
    cluster = Cluster(SHAPE, 3, tick_s=5.0)
    leaving, spare, other = cluster.pods
    for model in (0, 1):
        cluster.copies.load(leaving, model, 100.0 + model)
    for model in (2, 3, 5, 6):  # a full pod, recently used: it refuses the pre-shutdown's copies
        cluster.copies.load(other, model, 199.0)
    leaving.deletion_cost = -1
    cluster.scale_to(2, 200.0)
    assert sorted(cluster.copies.loading_on(0) | {p.name for p in cluster.holders[0]}) == [spare.name]
    cluster.copies.start_copy(5, spare, 200.0)
    assert loaded_at(cluster, 5, range(200, 240), spare) == 230.0


def test_a_copy_asked_of_an_idle_pod_long_after_its_last_load_takes_the_load_time() -> None:
    cluster = Cluster(SHAPE, 2, tick_s=5.0)
    cluster.copies.start_copy(0, cluster.pods[1], 100.0)
    cluster.copies.start_copy(1, cluster.pods[1], 500.0)
    assert loaded_at(cluster, 1, range(500, 530)) == 510.0


def test_the_warm_start_leaves_every_loading_thread_free() -> None:
    # Warming loads the hot models' copies at once, before the trace: none of them holds back the first copy the
    # replay asks for. A model at 60 req/s (three pods' worth) warms onto all three pods.
    cluster = Cluster(SHAPE, 3, tick_s=5.0)
    cluster.warm(0.0, [0], [60.0])
    assert len(cluster.holders[0]) == 3
    cluster.copies.start_copy(1, cluster.pods[1], 0.0)
    assert loaded_at(cluster, 1, range(0, 30)) == 10.0
