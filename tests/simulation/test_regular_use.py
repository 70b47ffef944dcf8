"""ModelMesh's second copy for regular use (kserve/modelmesh src/main/java/com/ibm/watson/modelmesh/
ModelMesh.java `rateTrackingTask`: SECOND_COPY_MIN_AGE_SECS 420, SECOND_COPY_MAX_AGE_SECS 2400, and no second
copy unless the caches are at least 10% free). Times by hand."""

from __future__ import annotations

from autoscaler.simulation.cluster import Cluster, ClusterShape
from autoscaler.simulation.regular_use import RegularUse


def test_a_use_7_to_40_minutes_after_a_prior_one_asks_for_a_second_copy() -> None:
    uses = RegularUse()
    assert not uses.used(1, 0.0)
    assert not uses.used(1, 300.0)  # 5 minutes later: too soon
    assert uses.used(1, 900.0)  # 15 minutes after the first use (10 after the second)


def test_use_without_a_break_or_after_a_long_silence_does_not() -> None:
    steady = RegularUse()
    assert not any(steady.used(2, t) for t in range(0, 3600, 10))  # every 10 s for an hour
    rare = RegularUse()
    assert not rare.used(3, 0.0)
    assert not rare.used(3, 3000.0)  # 50 minutes later: past the 40 minute window


def test_the_runtime_loads_the_second_copy_elsewhere_only_while_its_caches_have_room() -> None:
    roomy = Cluster(ClusterShape(pod_rps=20.0, cache_models=10, load_time_s=10.0), 2, tick_s=5.0)
    roomy.route(0.0, [5], [0.2], 60.0)
    roomy.route(600.0, [5], [0.2], 60.0)  # used again 10 minutes later
    assert roomy.settle(610.0) and len(roomy.holders[5]) == 2 and roomy.copy_loads == 1
    # 19 of the 20 places taken: 5% free, under the 10% ModelMesh asks for
    full = Cluster(ClusterShape(pod_rps=20.0, cache_models=10, load_time_s=10.0), 2, tick_s=5.0)
    full.route(0.0, list(range(19)), [0.01] * 19, 60.0)
    full.route(600.0, [5], [0.2], 60.0)
    assert not full.settle(610.0) and len(full.holders[5]) == 1


def test_second_copies_go_to_a_pod_with_room_rather_than_evicting_on_full_ones() -> None:
    # ModelMesh's placement (PLACEMENT_ORDER) puts any load on a pod with free space before a full one, however
    # many loads that pod already has under way: a new, empty pod takes every second copy, and no model's
    # only copy on a full pod is evicted for one.
    shape = ClusterShape(pod_rps=20.0, cache_models=10, load_time_s=10.0)
    runtime = Cluster(shape, 2, tick_s=5.0)
    runtime.route(0.0, list(range(20)), [0.01] * 20, 60.0)  # two full pods, one copy of each model
    runtime.scale_to(3, 0.0)
    assert runtime.promote(30.0)
    runtime.route(600.0, list(range(6)), [0.01] * 6, 60.0)  # six of them used again 10 minutes later
    runtime.settle(650.0)  # the new pod loads them one at a time: five of the six by 650
    assert runtime.copy_loads == 5
    runtime.settle(660.0)
    empty = runtime.pods[2]
    assert sorted(empty.cache) == [0, 1, 2, 3, 4, 5]
    assert all(m in runtime.holders for m in range(20))  # nothing evicted from the full pods
    assert runtime.copy_loads == 6


def test_second_copies_stop_going_to_a_pod_once_its_loads_under_way_fill_it() -> None:
    # Twelve second copies and a new pod with room for ten: ten go there, and the two left go where a load on
    # full pods goes (the oldest least recently used copy), not onto a pod that would evict copies just loaded.
    shape = ClusterShape(pod_rps=20.0, cache_models=10, load_time_s=10.0)
    runtime = Cluster(shape, 2, tick_s=5.0)
    runtime.route(0.0, list(range(20)), [0.01] * 20, 60.0)
    runtime.scale_to(3, 0.0)
    assert runtime.promote(30.0)
    runtime.route(600.0, list(range(12)), [0.01] * 12, 60.0)
    for now in range(610, 710, 10):  # ten loads one after the other on the new pod: the last from 690 to 700
        runtime.settle(float(now))
    assert runtime.copy_loads == 12
    assert len(runtime.pods[2].cache) == 10
    assert all(len(runtime.holders[m]) == 2 for m in range(12))  # every second copy stayed loaded
