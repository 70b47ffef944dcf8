"""The simulated runtime keeps the pods its models in use fill (docs/design.md, Recommendation: the cache need):
a runtime that uses more models within `target_lru_age_s` than one pod fewer holds does not scale down to
that, however idle its GPUs, and one that uses fewer does (the need is bounded by the models, not the pods)."""

from __future__ import annotations

from autoscaler.policies.policy import RuntimePolicy
from autoscaler.simulation.cluster import Cluster, ClusterShape
from autoscaler.simulation.policies import SkewAwarePolicy
from autoscaler.simulation.shipped import SHIPPED_BEHAVIOR

SHAPE = ClusterShape(pod_rps=20.0, cache_models=20, load_time_s=10.0, startup_delay_s=30.0)
TICK_S = 15.0


def replicas_after(models: int, minutes: float = 40.0) -> tuple[list[int], str]:
    """Three pods of 20 copies, `models` models spread over them (model m on pod m % 3), each asked for at
    0.1 req/s all along: 0.1 x `models` req/s on pods that serve 20, a GPU term of 1 pod. The skew-aware
    policy and the HPA (shipped behavior) sync every tick and the cluster follows; the replicas it went
    through, and the last view's reason."""
    cluster = Cluster(SHAPE, 3, tick_s=TICK_S)
    ids = list(range(models))
    for model in ids:
        cluster.copies.load(cluster.pods[model % 3], model, 0.0)
    policy = SkewAwarePolicy(RuntimePolicy(min_replicas=1, max_replicas=6), 1, 6, SHIPPED_BEHAVIOR)
    replicas = []
    for k in range(int(minutes * 60 / TICK_S)):
        now = TICK_S * k
        cluster.route(now, ids, [0.1] * models, TICK_S)
        cluster.step(now)
        if k >= 2:  # every pod has served a tick: each reports its windows
            outcome = policy.sync(now, cluster)
            cluster.scale_to(outcome.desired, now)
            replicas.append(cluster.replicas)
    assert policy.last_view is not None
    return replicas, policy.last_view.reason


def test_a_runtime_using_more_models_than_two_pods_hold_keeps_three() -> None:
    # 50 models in use, 20 a pod: 2 pods hold 40, so 50 need ceil(50 / 20) = 3. The GPUs want 1 pod
    # (5 req/s on pods that serve 20), and no cache is full (17 of 20 copies), so before the cache need the
    # runtime went to 1 pod and reloaded the models it kept asking for.
    replicas, reason = replicas_after(50)
    assert min(replicas) == 3 and replicas[-1] == 3
    assert reason == "cache: 50 copies in use within 600 s need 3 pods at 20 models a pod"


def test_a_runtime_using_fewer_models_than_two_pods_hold_goes_to_two() -> None:
    # 30 models, 10 a pod: ceil(30 / 20) = 2 pods hold them; the GPUs want 1. The cache need holds 2, not 3:
    # it follows the models in use, not the pods there are.
    replicas, _ = replicas_after(30)
    assert replicas[-1] == 2 and min(replicas) == 2
