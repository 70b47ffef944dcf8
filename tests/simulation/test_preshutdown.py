"""A scale-down's pre-shutdown copies every model of the leaving pod, not only those no other pod holds."""

from __future__ import annotations

from autoscaler.simulation.cluster import Cluster, ClusterShape

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
    cluster.copies.start_copy(0, loader, 150.0)
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
