"""The simulated ModelMesh runtime: queues, the LRU cache, copies, pods that start and go. Numbers by hand."""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import chain

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.simulation.cluster import Cluster, ClusterShape
from autoscaler.simulation.fluid import share_over_threshold, water_fill
from autoscaler.simulation.pods import SimPod, new_pod
from autoscaler.simulation.routing import route_to_two

SHAPE = ClusterShape(pod_rps=10.0, cache_models=2, load_time_s=10.0, startup_delay_s=30.0, slo_queue_s=0.1)


def test_a_pod_over_capacity_queues_and_delays_what_waits_past_the_slo() -> None:
    cluster = Cluster(SHAPE, 1, tick_s=5.0)
    cluster.route(0.0, [0], [15.0], 60.0)
    first = cluster.step(0.0)
    # The model was held nowhere: one cold load, and the 15 req/s of its 10 s load wait: 150 requests.
    # The queue then grows at 15 - 10 = 5 req/s and passes the SLO threshold (10 req/s x 0.1 s = 1 request)
    # after 0.2 s, but the requests that queue in these two ticks are those 150, already delayed: a request
    # is delayed once. 25 are left queued.
    assert first.cold_loads == 1 and first.delayed == pytest.approx(150.0)
    assert cluster.pods[0].backlog == pytest.approx(25.0)
    second = cluster.step(5.0)
    assert second.delayed == pytest.approx(0.0) and second.overloaded  # over the threshold all along
    cluster.route(10.0, [0], [5.0], 50.0)
    third = cluster.step(10.0)
    # Draining at 5 req/s from 50 queued: above the threshold for the whole tick; 25 left.
    assert third.delayed == pytest.approx(25.0)
    assert cluster.pods[0].backlog == pytest.approx(25.0)
    assert cluster.arrived == pytest.approx(175.0) and cluster.served == pytest.approx(150.0)


def test_a_full_cache_evicts_the_least_recently_used_model() -> None:
    cluster = Cluster(SHAPE, 1, tick_s=5.0)
    pod = cluster.pods[0]
    # (Each use 10 minutes apart: a full pod refuses a load while its oldest copy is under 300 s old, below.)
    cluster.route(0.0, [0, 1], [1.0, 2.0], 60.0)
    cluster.route(600.0, [1], [2.0], 60.0)  # model 1 used again, model 0 not
    cluster.route(1200.0, [2], [1.0], 60.0)
    assert list(pod.cache) == [1, 2] and 0 not in cluster.holders
    cluster.route(1800.0, [0], [1.0], 60.0)  # back: a cold load again, evicting model 1 (last used at 600)
    assert list(pod.cache) == [2, 0]
    assert cluster.cold_loads == 4


def test_requests_go_to_the_least_busy_copy_and_hot_models_get_another_copy() -> None:
    # ModelMesh's rate check (ModelMesh.java l.238, l.5619-5806) runs every 10 s: a copy at 30 req/s passes
    # 90% of a 20 req/s pod (18 req/s) and asks for 30 // 18 = 1 more copy, which loads in 10 s. Until then
    # the requests stay on the loaded copy (ForwardingLB, l.4309-4390).
    cluster = Cluster(ClusterShape(pod_rps=20.0, load_time_s=10.0), 3, tick_s=5.0)
    cluster.route(0.0, [7, 8], [4.0, 30.0], 60.0)
    hot = cluster.holders[8][0]
    quiet = cluster.holders[7][0]
    assert hot is not quiet  # the hot model was placed on a pod less busy than the quiet model's
    assert (hot.rate, cluster.copy_loads) == (30.0, 0)
    cluster.step(0.0)
    assert not cluster.settle(5.0)  # no rate check yet
    cluster.step(5.0)
    assert not cluster.settle(10.0)  # the check asked for a copy; it is loading
    cluster.step(10.0)
    assert not cluster.settle(15.0) and hot.rate == 30.0
    cluster.step(15.0)
    assert cluster.settle(20.0) and cluster.copy_loads == 1
    cluster.route(20.0, [7, 8], [4.0, 30.0], 40.0)
    copies = cluster.holders[8]
    assert len(copies) == 2 and quiet not in copies  # the copy went to the idle pod, not the quiet one
    # The first pod queued 10 req/s beyond its 20 for 20 s: 200 requests, counted as 20 req/s of work while
    # routing. 30 req/s levels both at (20 + 30) / 2 = 25: the first copy takes 5, the new one 25.
    assert sorted(p.rate for p in copies) == [5.0, 25.0]


def test_new_pods_start_empty_and_a_removed_pods_models_move_to_the_pods_that_stay() -> None:
    # ModelMesh's pre-shutdown (src/main/java/com/ibm/watson/modelmesh/ModelMesh.java, `preShutdown`) asks
    # for a copy elsewhere of every model in the leaving pod's cache (`triggerNewModelCopyElsewhere`) and
    # serves until they load: a scale-down moves models. Only with no Ready pod left do they go with it.
    cluster = Cluster(SHAPE, 1, tick_s=5.0)
    cluster.route(0.0, [0], [5.0], 60.0)
    assert cluster.scale_to(2, 0.0) == []
    new = cluster.pods[1]
    assert not new.ready and not cluster.settle(29.0)
    assert cluster.settle(30.0) and new.ready and not new.cache
    cluster.pods[0].deletion_cost, cluster.pods[1].deletion_cost = 0, 100
    assert cluster.scale_to(1, 40.0) == ["pod-0"]
    assert list(new.cache.items()) == [(0, 0.0)]  # moved, still last used at 0
    cluster.route(40.0, [0], [5.0], 60.0)
    assert (cluster.cold_loads, cluster.cold_loads_after_removal, cluster.migrated_loads) == (1, 0, 1)
    cluster.scale_to(0, 50.0)  # nowhere to go: lost
    cluster.scale_to(1, 50.0)
    cluster.settle(80.0)
    cluster.route(80.0, [0, 1], [5.0, 1.0], 40.0)  # model 1 was never loaded: a first load, not a lost one
    assert (cluster.cold_loads, cluster.cold_loads_after_removal) == (3, 1)


def test_not_ready_pods_go_first_and_queued_requests_move_to_a_remaining_pod() -> None:
    cluster = Cluster(SHAPE, 2, tick_s=5.0)
    cluster.route(0.0, [0], [30.0], 60.0)
    cluster.step(0.0)
    busy = cluster.holders[0][0]
    queued = busy.backlog
    assert queued > 0
    cluster.scale_to(3, 5.0)  # one starting pod
    assert cluster.scale_to(2, 5.0) == ["pod-2"]  # not Ready: removed first, whatever its cost
    busy.deletion_cost = -1
    cluster.scale_to(1, 5.0)
    assert cluster.pods[0].backlog == pytest.approx(queued)  # nothing lost


@dataclass
class Loaded:
    rate: float


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.0, 100.0), min_size=1, max_size=8), st.floats(0.0, 200.0))
def test_water_fill_places_the_whole_rate_and_never_on_a_busier_copy(rates: list[float], rate: float) -> None:
    pods = [Loaded(r) for r in rates]
    took = water_fill(pods, rate)
    assert math.isclose(sum(p.rate for p in pods), sum(rates) + rate, rel_tol=1e-9, abs_tol=1e-9)
    level = max(p.rate for p in took)
    for pod, before in zip(pods, rates, strict=True):
        assert pod.rate >= before
        if pod not in took:
            assert pod.rate == before and before >= level - 1e-9  # only copies already at or above the level


@pytest.mark.parametrize(("b0", "slope", "share"), [
    (0.0, 5.0, 0.96),  # grows past 1 request after 0.2 s of a 5 s tick
    (3.0, 5.0, 1.0),  # above all along
    (0.5, -1.0, 0.0),  # below all along
    (3.0, -1.0, 0.4),  # drains to the threshold after 2 s
    (3.0, 0.0, 1.0),
])
def test_share_of_a_tick_a_queue_spends_over_the_threshold(b0: float, slope: float, share: float) -> None:
    assert share_over_threshold(b0, slope, 5.0, 1.0) == pytest.approx(share)


def test_pods_report_cache_fill_and_lru_age_as_modelmesh_does() -> None:
    # ModelMesh publishes the share of its cache in use and the age of its least recently used model; the
    # ranking's cache term reads the first. Two models of room per pod.
    cluster = Cluster(SHAPE, 2, tick_s=5.0)
    old, other = cluster.pods
    cluster.route(0.0, [0, 1], [1.0, 2.0], 60.0)
    cluster.route(60.0, [1], [2.0], 60.0)  # model 1 used again at 60, model 0 last at 0
    cluster.step(60.0)
    cluster.scale_to(3, 60.0)
    cluster.settle(90.0)
    cluster.step(90.0)
    new = cluster.pods[2]
    by_name = {s.name: s for s in cluster.samples(100.0)}
    assert {p.name: len(p.cache) for p in (old, other, new)} == {old.name: 1, other.name: 1, new.name: 0}
    held = {name: cluster.holders[m][0].name for m, name in ((0, "m0"), (1, "m1"))}
    m0, m1 = by_name[held["m0"]], by_name[held["m1"]]
    assert (m0.cache_used_ratio, m0.models_loaded, m0.lru_age_s) == (0.5, 1.0, 100.0)  # one of two slots; used at 0
    assert (m1.cache_used_ratio, m1.lru_age_s) == (0.5, 40.0)  # used at 60
    empty = by_name[new.name]
    assert (empty.cache_used_ratio, empty.models_loaded, empty.lru_age_s) == (0.0, 0.0, None)  # nothing loaded yet


def test_a_load_evicts_a_model_nobody_asks_for_rather_than_one_in_use() -> None:
    # ModelMesh's cache is an LRU (ModelMesh.java: `runtimeCache`, a ConcurrentLinkedHashMap): a model whose
    # requests keep coming is recently used whenever a load evicts. Model 0 was used before model 1, but it is
    # asked for again in the bucket that loads model 2: model 1 goes.
    cluster = Cluster(SHAPE, 1, tick_s=5.0)
    pod = cluster.pods[0]
    cluster.route(0.0, [0], [1.0], 60.0)
    cluster.route(600.0, [1], [1.0], 60.0)
    cluster.route(1200.0, [0, 2], [5.0, 1.0], 60.0)
    assert sorted(pod.cache) == [0, 2] and cluster.cold_loads == 3


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 5), st.lists(st.floats(0.1, 5.0), min_size=1, max_size=12), st.data())
def test_a_scale_down_with_room_left_keeps_every_model(pods: int, rates: list[float], data: st.DataObject) -> None:
    # ModelMesh.java `preShutdown`: the leaving pod's models are loaded elsewhere before it stops. While the
    # pods that stay have room for them, no model is lost and none needs a cold load again.
    shape = ClusterShape(pod_rps=20.0, cache_models=30, load_time_s=10.0)
    cluster = Cluster(shape, pods, tick_s=5.0)
    models = list(range(len(rates)))
    cluster.route(0.0, models, rates, 60.0)
    held = set(cluster.holders)
    keep = data.draw(st.integers(1, pods - 1))
    cluster.scale_to(keep, 60.0)
    assert set(cluster.holders) == held
    cluster.route(60.0, models, rates, 60.0)
    assert cluster.cold_loads == len(models) and cluster.cold_loads_after_removal == 0


def test_a_full_pod_whose_oldest_copy_is_recent_refuses_a_load_and_its_requests_fail() -> None:
    # ModelMesh.java, the cache-miss loop: "limit the rate of cache churn - if we are full and our LRU entry is
    # recent, reject the load rather than thrashing" (`minChurnAgeMs`, `tas.min_churn_age_ms`, 10x
    # max(3 s, load timeout / 3): 300 s with modelmesh-serving's 90 s runtimes). Every pod refuses, so the
    # request fails ("Cache churn threshold exceeded"); nothing is evicted. Once the oldest copy is 300 s old,
    # the load goes ahead.
    cluster = Cluster(SHAPE, 1, tick_s=5.0)
    pod = cluster.pods[0]
    cluster.route(0.0, [0, 1], [1.0, 1.0], 60.0)
    for k in range(12):
        cluster.step(5.0 * k)
    cluster.route(60.0, [2], [2.0], 60.0)  # the oldest copy here was used 60 s ago
    for k in range(12):
        cluster.step(60.0 + 5.0 * k)
    assert list(pod.cache) == [0, 1] and cluster.cold_loads == 2
    assert cluster.refused == pytest.approx(120.0)  # 2 req/s for the 60 s until the next routing
    assert cluster.delayed >= cluster.refused  # a request that fails did not meet the SLO
    assert cluster.arrived == pytest.approx(cluster.served + cluster.queued() + cluster.refused)
    cluster.route(300.0, [2], [2.0], 60.0)  # model 0 and 1 last used at 0: 300 s old, the load goes ahead
    assert list(pod.cache) == [1, 2] and cluster.cold_loads == 3


def test_a_pod_with_room_takes_a_load_however_recent_its_copies() -> None:
    # The churn limit applies to full pods only (`isFull(remaining)`): another pod with room takes the load.
    cluster = Cluster(SHAPE, 2, tick_s=5.0)
    cluster.route(0.0, [0, 1], [1.0, 1.0], 60.0)
    cluster.route(60.0, [2, 3], [1.0, 1.0], 60.0)
    assert cluster.cold_loads == 4 and cluster.refused == 0.0 and len(cluster.holders) == 4


def test_a_scale_down_does_not_evict_newer_copies_for_the_leaving_pods_older_ones() -> None:
    # ModelMesh's pre-shutdown asks for each leaving copy elsewhere with its last use (`triggerNewModelCopyElsewhere`
    # with the cache entry's lruTime); a full pod drops such a load at once when that last use is older than its own
    # oldest copy ("the new entry was immediately evicted ... Discard the load", ModelMesh.java). Pod A's models,
    # last used at 0, do not displace pod B's, used at 400: they are lost, and come back as cold loads.
    cluster = Cluster(SHAPE, 2, tick_s=5.0)
    leaving, staying = cluster.pods
    for model in (0, 1):
        cluster.copies.load(leaving, model, 0.0)
    for model in (2, 3):
        cluster.copies.load(staying, model, 400.0)
    leaving.deletion_cost = -1
    assert cluster.scale_to(1, 800.0) == [leaving.name]
    assert list(staying.cache) == [2, 3] and cluster.migrated_loads == 0
    assert 0 not in cluster.holders and 1 not in cluster.holders


def test_a_scale_down_moves_a_leaving_copy_newer_than_the_oldest_one_where_it_goes() -> None:
    cluster = Cluster(SHAPE, 2, tick_s=5.0)
    leaving, staying = cluster.pods
    cluster.copies.load(leaving, 0, 500.0)
    for model in (2, 3):
        cluster.copies.load(staying, model, 400.0)
    leaving.deletion_cost = -1
    cluster.scale_to(1, 800.0)
    assert list(staying.cache) == [3, 0] and cluster.migrated_loads == 1  # 2, the oldest (400), made room


def test_pods_report_their_copies_last_uses_as_they_change_between_syncs() -> None:
    # The exporter's per-model recency (`recent_models`) feeds the unique-copy need term; an HPA sync reads it
    # every 15 s, between routings and in the middle of them. Two pods of two slots, model 0 on one of them.
    cluster = Cluster(SHAPE, 2, tick_s=5.0)
    cluster.route(0.0, [0], [1.0], 60.0)
    cluster.step(0.0)
    holder = cluster.holders[0][0]
    first = {s.name: s.recent_models for s in cluster.samples(15.0)}
    assert first[holder.name] == {"0": 0.0}
    assert {s.name: s.recent_models for s in cluster.samples(30.0)} == first  # nothing routed since
    cluster.route(60.0, [0, 1], [1.0, 1.0], 60.0)  # model 0 used again at 60, model 1 loaded at 60
    cluster.step(60.0)
    second = {s.name: dict(s.recent_models or {}) for s in cluster.samples(75.0)}
    assert second[holder.name]["0"] == 60.0
    assert sorted(chain.from_iterable(second.values())) == ["0", "1"]
    cluster.scale_to(1, 75.0)  # the pod that stays takes a copy of the other's model (pre-shutdown)
    (left,) = cluster.samples(90.0)
    assert sorted(left.recent_models or {}) == ["0", "1"]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([0.0, 1.5, 7.25, 10.0]) | st.floats(0.0, 100.0),
       st.sampled_from([0.0, 1.5, 7.25, 10.0]) | st.floats(0.0, 100.0), st.floats(0.0, 200.0))
def test_a_model_on_two_pods_is_routed_as_on_several_to_the_bit(first: float, second: float, rate: float) -> None:
    """Routing's two-holder way (`route_to_two`) against its general way over `water_fill`, for equal rates too:
    the same rates to the last bit (the README's tables are measured with them), the same shares and the same
    copies marked used."""
    def pods() -> tuple[SimPod, SimPod]:
        a, b = new_pod("a", 0.0, 0.0, SHAPE, 5.0), new_pod("b", 0.0, 0.0, SHAPE, 5.0)
        for pod, at in ((a, first), (b, second)):
            pod.rate = at
            pod.cache.update({7: 0.0, 8: 0.0})  # model 7 the least recently used: marking it used moves it last
        return a, b

    fast = pods()
    route_to_two(*fast, 7, rate, 60.0)
    general = pods()
    before = [pod.rate for pod in general]
    for pod in water_fill(general, rate):
        pod.cache[7] = 60.0
        pod.cache.move_to_end(7)
    for pod, was in zip(general, before, strict=True):
        if pod.rate > was:
            pod.shares[7] = pod.rate - was
    for one, other in zip(fast, general, strict=True):
        assert (one.rate.hex(), one.shares, list(one.cache.items())) == (
            other.rate.hex(), other.shares, list(other.cache.items()))
