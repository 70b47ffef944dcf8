"""ModelMesh's janitor unloads the extra copies of models no longer busy while the caches are close to full."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.simulation.cluster import Cluster, ClusterShape

SHAPE = ClusterShape(pod_rps=10.0, cache_models=2, load_time_s=10.0, startup_delay_s=30.0, slo_queue_s=0.1)


def _fill(cluster: Cluster, layout: list[list[tuple[int, float]]]) -> None:
    """Put each pod's (model, last used) copies on it, loaded at time 0."""
    for pod, held in zip(cluster.pods, layout, strict=True):
        for model, used in held:
            cluster.copies.load(pod, model, 0.0, used)


def test_a_second_copy_unused_for_a_tenth_of_the_caches_age_goes_from_the_less_desirable_pod() -> None:
    # `removeModelCopies`, two copies: unloaded when last used longer ago than a tenth of the cache's age (the
    # oldest copy, at 0: 3600 s, so 360 s), by the instance behind the other in PLACEMENT_ORDER (both full, their
    # oldest copies equally old: the name decides, pod-2 after pod-1).
    cluster = Cluster(SHAPE, 3, tick_s=5.0)
    _fill(cluster, [[(1, 3000.0), (4, 3000.0)], [(0, 0.0), (2, 3000.0)], [(0, 0.0), (3, 3000.0)]])
    assert cluster.settle(3600.0)  # routing is redone: a copy went
    assert cluster.holders[0] == [cluster.pods[1]] and cluster.janitor_removals == 1
    assert list(cluster.pods[2].cache) == [3]


def test_the_janitor_unloads_nothing_while_the_caches_have_room() -> None:
    # "only unload if cluster is close to full": 1 slot free in 6 is 16%, over 5%.
    cluster = Cluster(SHAPE, 3, tick_s=5.0)
    _fill(cluster, [[(1, 3000.0)], [(0, 0.0), (2, 3000.0)], [(0, 0.0), (3, 3000.0)]])
    assert not cluster.settle(3600.0)
    assert len(cluster.holders[0]) == 2 and cluster.janitor_removals == 0


def test_a_second_copy_used_recently_stays() -> None:
    cluster = Cluster(SHAPE, 3, tick_s=5.0)
    _fill(cluster, [[(1, 0.0), (4, 3000.0)], [(2, 3000.0), (0, 3300.0)], [(3, 3000.0), (0, 3300.0)]])
    cluster.settle(3600.0)  # used 300 s ago, under a tenth of 3600 s
    assert len(cluster.holders[0]) == 2 and cluster.janitor_removals == 0


def test_the_janitor_runs_every_six_minutes_on_each_pods_own_grid() -> None:
    # `scheduleAtFixedRate(janitorTask(), 1L, LOCAL_JANITOR_FREQ_SECS, SECONDS)`, 6 minutes; the pods of the
    # start ran theirs at -2, -1 and 0 s, so the next runs are at 358, 359 and 360 s.
    cluster = Cluster(SHAPE, 3, tick_s=5.0)
    cluster.settle(0.0)
    _fill(cluster, [[(1, 300.0), (4, 300.0)], [(0, 0.0), (2, 300.0)], [(0, 0.0), (3, 300.0)]])
    assert not cluster.settle(355.0)
    assert cluster.settle(360.0) and cluster.janitor_removals == 1


def test_a_model_copied_by_a_scale_down_loses_the_extra_copy_once_nobody_uses_it() -> None:
    # Both behaviours together: the pre-shutdown gives model 0, held on the leaving pod and one other, a second
    # copy again on the third pod, keeping its last use (0); the caches are full, and at the next janitor run
    # that copy, unused for longer than a tenth of the cache's age, goes from the pod behind in PLACEMENT_ORDER.
    cluster = Cluster(SHAPE, 4, tick_s=5.0)
    leaving, holder, spare, _ = cluster.pods
    _fill(cluster, [[(0, 0.0), (5, 3000.0)], [(0, 0.0), (2, 3000.0)], [], [(1, 3000.0), (4, 3000.0)]])
    leaving.deletion_cost = -1
    cluster.scale_to(3, 3500.0)
    assert sorted(p.name for p in cluster.holders[0]) == [holder.name, spare.name]
    assert cluster.migrated_loads == 2  # model 5 (no other copy) first, then model 0, both to the pod with room
    assert list(spare.cache.items()) == [(0, 0.0), (5, 3000.0)]
    cluster.settle(3600.0)
    assert cluster.holders[0] == [holder] and cluster.janitor_removals == 1


def _three_copies(heavy_ago: float | None = None, loaded_at: float = 0.0) -> Cluster:
    """Model 0 on pods 0-2, used 100 s before 14,400 s; every cache full of single copies used at 0."""
    cluster = Cluster(SHAPE, 4, tick_s=5.0)
    for index, pod in enumerate(cluster.pods):
        cluster.copies.load(pod, 10 + index, 0.0, 0.0)
        if index < 3:
            cluster.copies.load(pod, 0, loaded_at, 14_300.0)
        else:
            cluster.copies.load(pod, 20, 0.0, 0.0)
    if heavy_ago is not None:
        for pod in cluster.pods[:3]:
            pod.heavy[0] = 14_400.0 - heavy_ago
    return cluster


def test_a_third_copy_of_a_model_no_longer_heavy_goes() -> None:
    # Three copies: one goes when none was heavy in the last 5 hours (`minAgeMs`, at its cap), none loaded in the
    # last 30 minutes, none unloaded in the last 80 s, and the copy takes no requests. The first pod's janitor
    # unloads it; the other two then see two copies, used 100 s ago: well within a tenth of 4 hours.
    cluster = _three_copies()
    cluster.settle(14_400.0)
    assert len(cluster.holders[0]) == 2 and cluster.janitor_removals == 1


def test_a_third_copy_heavy_within_five_hours_or_loaded_within_half_an_hour_stays() -> None:
    for cluster in (_three_copies(heavy_ago=4 * 3600.0), _three_copies(loaded_at=14_400.0 - 1200.0)):
        cluster.settle(14_400.0)
        assert len(cluster.holders[0]) == 3 and cluster.janitor_removals == 0
    cluster = _three_copies(heavy_ago=5 * 3600.0 + 10.0)
    cluster.settle(14_400.0)
    assert len(cluster.holders[0]) == 2


def test_the_rate_check_stamps_a_copy_heavy_at_three_quarters_of_its_threshold() -> None:
    # `if (rpm > heavyRpms) ce.setLastHeavyTime(now)`, heavyRpms three quarters of the copy's threshold: alone on
    # a 20 req/s pod the threshold is 18 req/s, so 14 req/s is heavy (over 13.5) and asks for no copy.
    cluster = Cluster(ClusterShape(pod_rps=20.0, load_time_s=10.0), 2, tick_s=5.0)
    cluster.route(0.0, [7], [14.0], 60.0)
    holder = cluster.holders[7][0]
    for k in range(3):
        cluster.settle(5.0 * k)
        cluster.step(5.0 * k)
    cluster.settle(15.0)
    assert holder.heavy == {7: 10.0} and cluster.copies.copying == {}


@settings(max_examples=150, deadline=None)
@given(st.integers(2, 5), st.integers(1, 45), st.data())
def test_the_janitor_never_unloads_a_models_last_copy(pods: int, capacity: int, data: st.DataObject) -> None:
    # `removeModelCopies` needs two copies or more and `isLoadedElsewhere` before it unloads: every model held
    # before a run is held after, and a pod unloads at most 5% of its capacity a run (at least one copy).
    shape = ClusterShape(pod_rps=10.0, cache_models=capacity)
    cluster = Cluster(shape, pods, tick_s=5.0)
    pool = capacity + pods  # models shared between pods, caches mostly full: the janitor has work
    for pod in cluster.pods:
        free = data.draw(st.integers(0, 1) | st.integers(0, capacity))
        held = data.draw(st.lists(st.integers(0, pool), unique=True, min_size=capacity - free, max_size=capacity))
        for model in held:
            used = data.draw(st.floats(0.0, 20_000.0))
            cluster.copies.load(pod, model, data.draw(st.sampled_from([0.0, 19_000.0])), used)
            if data.draw(st.booleans()):
                pod.heavy[model] = data.draw(st.floats(0.0, 20_000.0))
    before = {model: len(holders) for model, holders in cluster.holders.items()}
    sizes = [len(p.cache) for p in cluster.pods]
    free = sum(capacity - n for n in sizes)
    cluster.settle(20_000.0)
    assert set(cluster.holders) == set(before)
    for pod, size in zip(cluster.pods, sizes, strict=True):
        assert size - len(pod.cache) <= max(1, capacity // 20)
    if free * 100 // (capacity * pods) > 5:
        assert cluster.janitor_removals == 0
    assert cluster.janitor_removals == sum(before.values()) - sum(len(h) for h in cluster.holders.values())
