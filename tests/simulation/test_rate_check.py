"""ModelMesh's rate check in the simulated runtime: when a hot model gets more copies, and how many.

Source: kserve/modelmesh src/main/java/com/ibm/watson/modelmesh/ModelMesh.java (`rateTrackingTask`,
l.5619-5857). Numbers by hand.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.simulation.cluster import Cluster, ClusterShape
from autoscaler.simulation.rate_check import (
    copies_to_load,
    copy_threshold,
    excluded,
    fair_level,
    loaded_since,
    recent_load_cutoff,
    threshold,
    young_copies,
)

SHAPE = ClusterShape(pod_rps=20.0, cache_models=100, load_time_s=10.0)


def run(cluster: Cluster, models: list[int], rates: list[float], until: float, start: float = 0.0) -> None:
    """Replay a constant load as the engine does: settle, re-route when something changed, serve."""
    cluster.route(start, models, rates, until - start)
    now = start
    while now < until:
        if cluster.settle(now):
            cluster.route(now, models, rates, until - now)
        cluster.step(now)
        now += cluster.tick_s


def test_the_threshold_is_90_percent_of_what_one_pod_serves() -> None:
    # Latency-based mode: 90% of the copy's bandwidth (`getRpmScaleThreshold`, l.2766-2796).
    assert threshold(20.0) == 18.0
    assert threshold(50.0) == 45.0


def test_a_copy_under_the_threshold_asks_for_none_though_its_pod_is_busy() -> None:
    # l.5762: `if (rpm < scaleUpRpms) continue`. A copy at 17 req/s on a 20 req/s pod (85% busy, past the
    # 80% an older simulator copied at) is under 18 req/s: no copy, however long it runs.
    cluster = Cluster(SHAPE, 3, tick_s=5.0)
    run(cluster, [1], [17.0], 600.0)
    assert (len(cluster.holders[1]), cluster.copy_loads) == (1, 0)


def test_a_copys_bandwidth_is_what_its_pod_has_left_for_it() -> None:
    # The threshold is 90% of the copy's measured bandwidth, max concurrency over the time a request takes in the
    # model server (l.2766-2796); a request takes longer while the pod serves other models. 20 req/s pods:
    assert copy_threshold(20.0, 30.0, 30.0, 300.0, fair_level([30.0], 20.0), 1) == 18.0  # alone: 90% of 20
    assert copy_threshold(20.0, 4.0, 16.0, 40.0, fair_level([4.0] * 4, 20.0), 4) == 0.9 * 8.0  # 12 of 20 taken: 8 left
    # 24 req/s on a pod serving 20, four models at 6: the pod's time goes round them, 5 each.
    assert copy_threshold(20.0, 6.0, 24.0, 60.0, fair_level([6.0] * 4, 20.0), 4) == 0.9 * 5.0
    # A hot model at 20 beside 40 at 0.1 (24 on 20): the quiet ones are served whole (4), the hot one gets 16.
    level = fair_level([20.0] + [0.1] * 40, 20.0)
    assert math.isclose(level, 16.0)
    assert math.isclose(copy_threshold(20.0, 20.0, 24.0, 200.0, level, 41), 0.9 * 16.0)
    assert copy_threshold(20.0, 0.1, 24.0, 8.0, level, 41) > 0.1  # a quiet copy on it does not ask
    assert copy_threshold(20.0, 0.5, 24.0, 5.0, level, 41) == 2000.0 / 60.0  # under 8 since it loaded (l.2780)
    # Just under capacity (19.99 of 20, 21 copies in use) a quiet copy at 0.5 req/s had 0.51 left, threshold 0.46,
    # and asked; its requests wait in the model server behind at most 21 x maxConc (l.2689-2712): 0.9 x 19.99 / 21.
    assert math.isclose(copy_threshold(20.0, 0.5, 19.99, 50.0, math.inf, 21), 0.9 * 19.99 / 21)


@given(st.lists(st.floats(0.0, 50.0), min_size=1, max_size=60), st.floats(1.0, 100.0))
def test_the_fair_level_hands_out_exactly_what_a_saturated_pod_serves(rates: list[float], pod_rps: float) -> None:
    # Max-min fair: the copies under the level served whole, the others the level each, adding up to the pod.
    level = fair_level(rates, pod_rps)
    if sum(rates) <= pod_rps * (1.0 - 1e-9):
        assert level == math.inf
    elif level < math.inf:
        assert math.isclose(sum(min(rate, level) for rate in rates), pod_rps, rel_tol=1e-6)


def test_a_pod_at_80_percent_copies_none_of_its_models_and_a_saturated_one_copies_them() -> None:
    # The rate is per copy (`ce.getAndResetIntervalCount()`, l.5690). Four models at 4 req/s on a 20 req/s pod:
    # each has 20 - 12 = 8 req/s left, threshold 7.2: no copy. At 6 req/s (24 on 20) each has 5 left,
    # threshold 4.5: 6 // 4.5 = 1 more copy of each, on the two other pods: two a pod, which loads one at a time,
    # the second of them 20 s after the check that asked for them.
    models = [1, 2, 3, 4]
    for rate, copies in ((4.0, 1), (6.0, 2)):
        cluster = Cluster(ClusterShape(pod_rps=20.0, cache_models=4, load_time_s=10.0), 1, tick_s=5.0)
        run(cluster, models, [rate] * 4, 60.0)
        cluster.scale_to(3, 60.0)
        run(cluster, models, [rate] * 4, 135.0, start=60.0)
        assert [len(cluster.holders[m]) for m in models] == [copies] * 4


def test_copies_follow_the_rate_and_the_cap_of_a_third_of_the_pods() -> None:
    # l.5792-5795: min(rpm / threshold, candidates), and over 2 at most a third of the pods.
    assert copies_to_load(17.9, 18.0, 11, 12) == 0
    assert copies_to_load(18.0, 18.0, 11, 12) == 1
    assert copies_to_load(40.0, 18.0, 11, 12) == 2  # 40 // 18
    assert copies_to_load(100.0, 18.0, 11, 12) == 4  # 100 // 18 = 5, capped at 12 // 3
    assert copies_to_load(100.0, 18.0, 5, 6) == 2  # 5 > 2, capped at 6 // 3
    assert copies_to_load(60.0, 18.0, 3, 4) == 1  # 3 > 2, and 4 // 3 is 1
    assert copies_to_load(100.0, 18.0, 1, 12) == 1  # one pod left without a copy
    assert copies_to_load(100.0, 18.0, 0, 12) == 0


@given(st.floats(0.0, 1e4), st.floats(0.1, 1e3), st.integers(-5, 200), st.integers(0, 200))
def test_never_more_copies_than_candidates_nor_over_the_cap(rate: float, limit: float, candidates: int,
                                                             pods: int) -> None:
    copies = copies_to_load(rate, limit, candidates, pods)
    assert 0 <= copies <= max(0, candidates)
    assert copies <= max(2, pods // 3)


def test_a_recent_load_elsewhere_holds_the_next_copies_back() -> None:
    # l.5764-5769: skip when another pod's copy began loading after now - (interval + 10 s + 2 x load time).
    assert recent_load_cutoff(50.0, 10.0, 10.0) == 10.0
    assert loaded_since({"a": 10.5}, 10.0, "b") and not loaded_since({"a": 10.0}, 10.0, "b")
    assert not loaded_since({"b": 49.0}, 10.0, "b")  # the checking pod's own load does not count
    # On a cluster: 12 pods, one model at 200 req/s on one copy. The check at 10 s asks for 200 // 18 = 11,
    # capped at 12 // 3 = 4 copies; loaded at 20 s, each of the 5 takes 40 req/s, worth 2 more each. The
    # checks at 20, 30 and 40 s skip (the loads began at 10 s, after the cutoffs -20, -10 and 0 s); at 50 s the
    # cutoff is 10 s: the first copy asks for 2, and the others skip, those 2 having just begun.
    cluster = Cluster(SHAPE, 12, tick_s=5.0)
    run(cluster, [9], [200.0], 50.0)
    assert len(cluster.holders[9]) == 5
    run(cluster, [9], [200.0], 60.0, start=50.0)
    assert len(cluster.holders[9]) == 5  # asked for at 50 s, loading until 60 s
    cluster.settle(60.0)
    assert len(cluster.holders[9]) == 7


def test_pods_far_over_the_threshold_take_no_new_copy() -> None:
    # `getExcludeSet` l.5835-5856: other pods over max(4 x threshold, own rate - 2 x threshold).
    rates = [("a", 80.0), ("b", 10.0), ("c", 200.0)]
    assert excluded(rates, "b", 10.0, 18.0) == {"a", "c"}  # over 72
    assert excluded(rates, "c", 200.0, 18.0) == set()  # over 164: none but itself
    assert excluded(rates, "a", 80.0, 18.0) == {"c"}


def test_the_check_runs_every_10_seconds_on_the_rate_since_the_last() -> None:
    # RATE_CHECK_INTERVAL_MS 10 s (l.238). A model at 30 req/s for 5 s and then quiet averages 15 req/s over
    # the check's 10 s: under 18, no copy; the same 30 req/s for the whole 10 s asks for one.
    short = Cluster(SHAPE, 3, tick_s=5.0)
    short.route(0.0, [4], [30.0], 5.0)
    short.step(0.0)
    short.route(5.0, [4], [0.0], 5.0)
    short.step(5.0)
    short.settle(10.0)
    short.settle(20.0)
    assert short.copy_loads == 0
    steady = Cluster(SHAPE, 3, tick_s=5.0)
    run(steady, [4], [30.0], 10.0)
    steady.settle(10.0)
    steady.settle(20.0)
    assert steady.copy_loads == 1


@given(st.lists(st.floats(0.0, 5.0), max_size=30), st.floats(0.1, 1.0))
def test_a_copy_is_measured_from_its_8th_completion_however_the_checks_split_them(rates: list[float],
                                                                                   served: float) -> None:
    # ModelMesh adds completions up across checks until 64 (`countAndTimeSum`, reset only then: l.2766-2784): the
    # 2000 rpm fallback holds until the copy's 8th completion since it loaded, not while each check sees under 8.
    young = {7: 0.0}
    done = 0.0
    for rate in rates:
        young_copies(young, {7: rate, 8: 3.0}, 10.0, served)
        done += rate * 10.0 * served
        assert (7 in young) == (done < 8.0 - 1e-9) or abs(done - 8.0) < 1e-9
        assert 8 not in young  # only the copies it was given
    if 7 in young:
        assert young[7] < 8.0


def test_quiet_copies_on_a_saturated_pod_ask_for_copies_after_their_8th_request() -> None:
    # One pod holds 30 models at 0.75 req/s (22.5 req/s on 20): 7.5 requests arrive per 10 s check on each copy,
    # 6.7 complete. Copies that served a while (the warm start) have a measure, 90% of what the pod serves of
    # them, 0.6 req/s: each asks at the first check for a copy on the empty pod beside it. The same copies just
    # loaded keep the 2000 rpm fallback at the first check (6.7 completed) and ask at the second (13.3).
    shape = ClusterShape(pod_rps=20.0, cache_models=30, load_time_s=10.0)
    models = list(range(30))
    for loaded_now in (False, True):
        cluster = Cluster(shape, 1, tick_s=5.0)
        cluster.warm(0.0, models, [0.75] * 30)
        cluster.scale_to(2, 0.0)
        cluster.pods[1].ready = True  # an empty pod Ready beside it
        if loaded_now:
            cluster.pods[0].young = dict.fromkeys(cluster.pods[0].cache, 0.0)
        run(cluster, models, [0.75] * 30, 11.0)
        assert copied(cluster) == ([] if loaded_now else models)
        run(cluster, models, [0.75] * 30, 21.0, start=15.0)
        assert copied(cluster) == models


def copied(cluster: Cluster) -> list[int]:
    """The models with a copy on pod-1, loaded or loading."""
    loading = {model for model, pod in cluster.copies.copying if pod == "pod-1"}
    return sorted(loading | set(cluster.pods[1].cache))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.01, 1.0), min_size=4, max_size=40), st.integers(2, 4), st.floats(0.0, 0.02))
def test_no_check_copies_a_model_under_the_floor(quiet: list[float], replicas: int, slack: float) -> None:
    # Each copy lets at most its max concurrency into the model server (l.2689-2712): no request there takes longer
    # than the pod's copies in use x that concurrency over what it serves, so no copy's threshold (l.2795) is under
    # 0.9 x pod_rps / copies in use, whatever the pod's load: a model below 0.9 x pod_rps / all models is never
    # copied for its rate. A hot model fills `replicas` pods to within `slack` of capacity, where pods sit while the
    # HPA lags (routing levels them, their queues taken out of their rates): every copy there asked.
    shape = ClusterShape(pod_rps=20.0, cache_models=100, load_time_s=10.0)
    hot = max(0.0, replicas * shape.pod_rps * (1.0 - slack) - sum(quiet))
    models, rates = [*range(len(quiet)), 999], [*quiet, hot]
    cluster = Cluster(shape, replicas, tick_s=5.0)
    cluster.warm(0.0, models, [rate / 10.0 for rate in rates])  # warm at a tenth: the quiet models held once
    assert all(len(cluster.holders[m]) == 1 for m in range(len(quiet)))
    for start in range(0, 180, 10):  # a trace of 10 s buckets, each routed anew
        run(cluster, models, rates, start + 10.0, start=float(start))
    floor = 0.9 * shape.pod_rps / len(models)
    copied = [m for m, rate in enumerate(quiet)
              if rate < floor and len(cluster.holders[m]) + cluster.copies.loading(m) > 1]
    assert copied == []
    # Nor stamped heavy (over 3/4 of the threshold, l.5706-5710), which keeps a third copy 5 hours (janitor.py)
    heavy = {m for pod in cluster.pods for m in pod.heavy}
    assert [m for m, rate in enumerate(quiet) if rate < 0.75 * floor and m in heavy] == []
