"""The simulated pods tell the adapter which models they served, and the unique-copy need term keeps the pod
that alone holds the quiet models (docs/design.md, Choosing the pod to remove)."""

from __future__ import annotations

import pytest

from autoscaler.policies.policy import RuntimePolicy
from autoscaler.simulation.cluster import Cluster, ClusterShape
from autoscaler.simulation.policies import SkewAwarePolicy
from autoscaler.simulation.shipped import SHIPPED_BEHAVIOR

SHAPE = ClusterShape(pod_rps=20.0, cache_models=20, load_time_s=10.0, startup_delay_s=30.0)
QUIET = list(range(20))  # one pod's whole cache, each model asked for now and then
HOT = list(range(100, 120))  # the two other pods' caches, the same models on both


def quiet_pod_cluster() -> Cluster:
    """Three full pods: pod-0 alone holds the 20 quiet models (0.05 req/s each, asked for until 20 s);
    pod-1 and pod-2 both hold the 20 busy ones (1 req/s each, all along). 40 s of that, so every pod reports
    its windows."""
    cluster = Cluster(SHAPE, 3, tick_s=5.0)
    quiet, busy, other = cluster.pods
    for model in QUIET:
        cluster.copies.load(quiet, model, 0.0)
    for model in HOT:
        cluster.copies.load(busy, model, 0.0)
        cluster.copies.load(other, model, 0.0)
    for k in range(8):
        quiet_models = QUIET if k <= 4 else []
        cluster.route(5.0 * k, quiet_models + HOT, [0.05] * len(quiet_models) + [1.0] * len(HOT), 5.0)
        cluster.step(5.0 * k)
    return cluster


def test_the_simulated_pods_report_the_models_they_served_and_when() -> None:
    cluster = quiet_pod_cluster()
    quiet = {s.name: s for s in cluster.samples(40.0)}["pod-0"]
    assert quiet.recent_models == {str(m): 20.0 for m in QUIET}  # last asked for at 20 s


def scale_down_once(weight: float) -> tuple[list[str], int]:
    """One refresh with the unique-copy term at `weight`, a scale-down by one pod, and the same load again:
    which pod went, and the models that lost their place: cold loads, and models no pod holds after it (with
    every cache full of copies used seconds ago, each pod refuses their load: ModelMesh's churn limit)."""
    cluster = quiet_pod_cluster()
    policy = SkewAwarePolicy(RuntimePolicy(min_replicas=2, max_replicas=12, need_weight_unique=weight), 2, 12,
                             SHIPPED_BEHAVIOR)
    policy.refresh(40.0, cluster)
    removed = cluster.scale_to(2, 40.0)
    before = cluster.cold_loads
    cluster.route(45.0, QUIET + HOT, [0.05] * len(QUIET) + [1.0] * len(HOT), 5.0)
    return removed, cluster.cold_loads - before + sum(1 for m in QUIET + HOT if m not in cluster.holders)


@pytest.mark.parametrize("weight", [1.0, 2.0])
def test_skew_aware_with_the_term_removes_a_pod_whose_models_another_holds(weight: float) -> None:
    # Without the term the quiet pod ranks lowest (least busy, caches all full); its models move to the two
    # busy pods as ModelMesh's pre-shutdown moves them, but a full pod whose copies were all used seconds ago
    # refuses them (the churn limit), so they are lost and their requests fail. With the term, a busy pod goes,
    # and the other holds every model it had.
    blind, lost = scale_down_once(0.0)
    assert blind == ["pod-0"] and lost > 0
    kept, none_lost = scale_down_once(weight)
    assert kept != ["pod-0"] and none_lost == 0
