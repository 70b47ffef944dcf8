"""Where the simulated runtime loads a model nobody holds, and its extra copies: ModelMesh's placement.

ModelMesh's cache-miss balancer (kserve/modelmesh src/main/java/com/ibm/watson/modelmesh/ModelMesh.java:
the `PLACEMENT_ORDER` comparator and `CacheMissForwardingLB.getNext`) prefers a pod with free space and the
fewest models, or when all are full the one holding the oldest LRU entry, and skips pods much busier than the
least busy candidate (1.5x for a model used in the last 5 s, 1.1x for a copy the rate task asks for). It does
not pick the least busy pod. Numbers by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autoscaler.simulation.cluster import Cluster, ClusterShape
from autoscaler.simulation.placement import choose_pod


@dataclass
class Pod:
    name: str
    cache: dict[int, float] = field(default_factory=dict)
    rate: float = 0.0


def test_a_new_model_goes_to_the_pod_with_the_fewest_models_not_the_least_busy() -> None:
    crowded = Pod("a", {0: 10.0, 1: 20.0, 2: 30.0}, rate=3.0)  # 180 req/min
    sparse = Pod("b", {3: 40.0}, rate=4.0)  # 240 req/min: within 1.5x of 180
    assert choose_pod([crowded, sparse], capacity=4, now=100.0, last_used_ago_s=0.0) is sparse


def test_a_pod_much_busier_than_the_least_busy_candidate_is_skipped() -> None:
    crowded = Pod("a", {0: 10.0, 1: 20.0, 2: 30.0}, rate=3.0)  # 180 req/min
    sparse = Pod("b", {3: 40.0}, rate=8.0)  # 480 req/min > 1.5 x 180 = 270
    assert choose_pod([crowded, sparse], capacity=4, now=100.0, last_used_ago_s=0.0) is crowded
    # a model last used a minute ago tolerates 3x (540 req/min): the sparse pod again
    assert choose_pod([crowded, sparse], capacity=4, now=100.0, last_used_ago_s=60.0) is sparse


def test_free_space_first_then_among_full_pods_the_oldest_lru_entry() -> None:
    full_old = Pod("a", {0: 10.0, 1: 300.0})
    full_new = Pod("b", {2: 200.0, 3: 300.0})
    with_room = Pod("c", {4: 390.0})
    assert choose_pod([full_old, full_new, with_room], capacity=2, now=400.0, last_used_ago_s=0.0) is with_room
    # both full: the LRU entries differ by 190 s, over 45 s and over a tenth of the oldest's age (39 s)
    assert choose_pod([full_new, full_old], capacity=2, now=400.0, last_used_ago_s=0.0) is full_old


def test_a_new_pod_collects_the_first_loads_of_models_nobody_holds() -> None:
    shape = ClusterShape(pod_rps=20.0, cache_models=10, load_time_s=10.0)
    cluster = Cluster(shape, 2, tick_s=5.0)
    cluster.route(0.0, [0, 1, 2, 3], [0.5, 0.5, 0.5, 0.5], 60.0)
    assert sorted(len(p.cache) for p in cluster.pods) == [2, 2]  # spread by model count
    cluster.scale_to(3, 0.0)
    cluster.settle(30.0)
    new = cluster.pods[2]
    cluster.route(30.0, [0, 1, 2, 3, 4, 5], [0.5, 0.5, 0.5, 0.5, 1.2, 1.3], 60.0)
    # Model 4 lands on the empty pod. Model 5 goes there too, as it holds one model against two, although
    # the old pods (1 req/s each) are now less busy than it (1.2 req/s): least-busy placement would not.
    assert sorted(new.cache) == [4, 5]
    assert cluster.cold_loads == 6
