"""One refresh of one runtime: known / complete / held, served values, memory, pod views."""

from __future__ import annotations

import math
import pickle
from dataclasses import dataclass, fields, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import PodSample, PodView, PodViews, RuntimeView
from autoscaler.names import ServedMetric
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.runtime_memory import RuntimeMemory
from autoscaler.policies.smoothing import SmoothState
from tests.policies.builders import KEY, NOW, PROPERTIES, pod, pods_with, snapshot

DESIRED = ServedMetric.DESIRED_REPLICAS
GPU = ServedMetric.GPU_BUSY
LOAD = ServedMetric.REQUEST_LOAD
CACHE = ServedMetric.CACHE_PRESSURE
WINDOW = 30.0
POLICY = RuntimePolicy()


def busy_pods(*gpus: float, stale: tuple[int, ...] = (), now: float = NOW) -> tuple[PodSample, ...]:
    """Pods with GPU busy, a request rate proportional to it and a cache with room; some of them stale."""
    return tuple(
        pod(
            f"pod-{i}",
            gpu=g,
            rps=100.0 * g,
            queue=0.0,
            cache=0.5,
            lru=900.0,
            models=3.0,
            age=300.0 if i in stale else 5.0,
            now=now,
        )
        for i, g in enumerate(gpus)
    )


def served(view: RuntimeView) -> dict[ServedMetric, float | None]:
    return {metric: value.value for metric, value in view.values.items()}


@dataclass(frozen=True)
class Case:
    id: str
    pods: tuple[PodSample, ...]
    source_ok: bool
    known: bool
    complete: bool
    reason: str  # a part the reason must contain ("" : the reason is empty)
    unknown_metrics: frozenset[ServedMetric] = frozenset()


ALL = frozenset(ServedMetric)
CASES = [
    Case("every_ready_pod_fresh_is_complete", busy_pods(0.5, 0.5, 0.5, 0.5), True, True, True, ""),
    Case(
        "one_stale_pod_holds_values",
        busy_pods(0.5, 0.5, 0.5, 0.5, stale=(3,)),
        True,
        True,
        False,
        "1 of 4 ready pods stale; holding values",
    ),
    Case(
        "half_stale_is_still_known",
        busy_pods(0.5, 0.5, 0.5, 0.5, stale=(0, 1)),
        True,
        True,
        False,
        "2 of 4 ready pods stale",
    ),
    Case(
        "too_few_fresh_pods_is_unknown",
        busy_pods(0.5, 0.5, 0.5, 0.5, stale=(0, 1, 2)),
        True,
        False,
        False,
        "only 1 of 4 ready pods fresh (coverage 25% < 50%)",
        ALL,
    ),
    Case("source_down_is_unknown", busy_pods(0.5, 0.5), False, False, False, "metric source down", ALL),
    Case("no_ready_pods_is_unknown", (pod("a", ready=False, gpu=0.5),), True, False, False, "no ready pods", ALL),
    Case(
        "not_ready_pods_do_not_make_it_incomplete",
        (*busy_pods(0.5, 0.5), pod("new", ready=False)),
        True,
        True,
        True,
        "",
    ),
    Case(
        "no_gpus_leaves_only_gpu_busy_unknown",
        pods_with(rps=[10.0, 20.0], cache=[0.5, 0.5], lru=[100.0, 100.0]),
        True,
        True,
        True,
        "no fresh pod reports GPU busy",
        frozenset({GPU}),
    ),
    Case(
        "no_cache_signals_leaves_only_cache_pressure_unknown",
        pods_with(gpu=[0.5, 0.5], rps=[10.0, 20.0]),
        True,
        True,
        True,
        "no fresh pod reports cache state",
        frozenset({CACHE}),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_decide(case: Case) -> None:
    view, memory = decide(snapshot(case.pods, source_ok=case.source_ok), POLICY, None, NOW, WINDOW)
    assert (view.known, view.complete) == (case.known, case.complete)
    if case.reason:
        assert case.reason in view.reason
    else:
        assert view.reason == ""
    assert {m for m, v in served(view).items() if v is None} == case.unknown_metrics
    assert {m for m, v in view.values.items() if v.raw is None} == case.unknown_metrics
    assert view.winner is None if not case.known else view.winner is not None
    assert view.consecutive_misses == (0 if case.complete else 1)
    assert memory.known is case.known
    assert (view.key, view.refreshed_at, view.window_s, view.current_replicas) == (KEY, NOW, WINDOW, len(case.pods))


def test_served_values_follow_the_formulas() -> None:
    pods = busy_pods(0.9, 0.1, 0.1, 0.1)
    view, _ = decide(snapshot(pods), RuntimePolicy(target_rps_per_pod=20.0), None, NOW, WINDOW)
    values = served(view)
    assert values[GPU] == pytest.approx(math.sqrt(0.21))
    assert values[LOAD] == pytest.approx(4 * math.sqrt(2100.0))  # n x M_p(r)
    assert values[CACHE] == 0.0
    assert values[DESIRED] == 10.0  # ceil(4 * 45.83 / 20)
    assert view.proposals["requests"] == 10 and view.winner == "requests"
    assert view.values[GPU].timestamp == NOW - 5.0


def test_timestamp_is_the_oldest_sample_used() -> None:
    pods = (pod("a", gpu=0.5, age=2.0), pod("b", gpu=0.5, age=40.0), pod("c", gpu=0.5, age=4.0))
    view, _ = decide(snapshot(pods), POLICY, None, NOW, WINDOW)
    assert {v.timestamp for v in view.values.values()} == {NOW - 40.0}


def test_values_held_for_a_stale_pod_are_dated_by_its_last_sample() -> None:
    """Was: dated by the fresh pods' samples alone (40 s old) while held because of c, 400 s old."""
    pods = (pod("a", gpu=0.5, age=2.0), pod("b", gpu=0.5, age=40.0), pod("c", gpu=0.5, age=400.0))
    view, _ = decide(snapshot(pods), POLICY, None, NOW, WINDOW)
    assert "1 of 3 ready pods stale; holding values" in view.reason
    assert {v.timestamp for v in view.values.values()} == {NOW - 400.0}


def test_desired_replicas_is_served_rounded_up() -> None:
    memory = RuntimeMemory(smoothed={DESIRED: SmoothState(5.0, NOW - 15.0)})
    view, after = decide(snapshot(busy_pods(0.5, 0.5, 0.5, 0.5)), POLICY, memory, NOW, WINDOW)
    assert view.values[DESIRED].raw == 3.0
    assert 3.0 < after.smoothed[DESIRED].value < 5.0
    assert view.values[DESIRED].value == 5.0  # 3 + 2·e^(-15/300) = 4.9 pods still round up to 5


def test_values_rise_at_once_and_fall_slowly() -> None:
    quiet = busy_pods(0.2, 0.2, 0.2, 0.2)
    busy = busy_pods(1.0, 1.0, 1.0, 1.0)
    view1, memory = decide(snapshot(quiet), POLICY, None, NOW, WINDOW)
    view2, memory = decide(snapshot(busy), POLICY, memory, NOW + 15, WINDOW)
    view3, _ = decide(snapshot(quiet), POLICY, memory, NOW + 30, WINDOW)
    assert served(view1)[GPU] == pytest.approx(0.2)
    assert served(view2)[GPU] == pytest.approx(1.0)
    assert served(view3)[GPU] == pytest.approx(0.2 + 0.8 * math.exp(-15 / 300))
    assert served(view2)[DESIRED] == 5.0 and served(view3)[DESIRED] == 5.0


def test_stale_pod_holds_values_that_would_fall() -> None:
    _, memory = decide(snapshot(busy_pods(0.9, 0.9, 0.9, 0.9)), POLICY, None, NOW, WINDOW)
    # The busy pod goes quiet: n x M_p shrinks, but nothing may fall while it is missing.
    view, memory = decide(snapshot(busy_pods(0.9, 0.9, 0.9, 0.0, stale=(0,))), POLICY, memory, NOW + 15, WINDOW)
    assert served(view)[GPU] == pytest.approx(0.9)
    assert served(view)[DESIRED] == 5.0
    assert served(view)[LOAD] == pytest.approx(4 * 90.0)


def test_a_pod_whose_load_is_stale_holds_the_gpu_busy_though_every_gpu_reading_is_fresh() -> None:
    """pod-1's load sample is 100 s old (stale at max_staleness_s 45), its GPU reading just taken: the GPU busy
    (0.4 on both) has no pod missing, but the step is not whole, so the 0.8 served 300 s ago is held, not decayed
    to 0.4 + 0.4 x e^(-300/300) = 0.547."""
    pods = tuple(replace(p, gpu_sampled_at=NOW) for p in busy_pods(0.4, 0.4))
    pods = (pods[0], replace(pods[1], sampled_at=NOW - 100.0))
    memory = RuntimeMemory(smoothed={GPU: SmoothState(0.8, NOW - 300.0)}, known=True)
    view, _ = decide(snapshot(pods), POLICY, memory, NOW, WINDOW)
    assert served(view)[GPU] == 0.8


def test_a_pod_whose_load_is_stale_holds_the_replicas_of_a_gpu_only_runtime() -> None:
    """Pods that report only GPU busy (0.8 each: 2 x 0.8 / 0.8 = 2 pods); pod-1's load sample 100 s old, its GPU
    reading fresh. The 4 replicas served 300 s ago are held, not decayed to 2 + 2 x e^(-1) = 2.74 -> 3."""
    pods = (pod("pod-0", gpu=0.8), replace(pod("pod-1", gpu=0.8, age=100.0), gpu_sampled_at=NOW))
    memory = RuntimeMemory(smoothed={DESIRED: SmoothState(4.0, NOW - 300.0)}, known=True)
    view, _ = decide(snapshot(pods), POLICY, memory, NOW, WINDOW)
    assert view.proposals["gpu"] == 2
    assert served(view)[DESIRED] == 4.0


def test_full_caches_whose_lru_copies_were_just_used_hold_the_cache_term() -> None:
    """Every full cache's least recently used copy used within the second (the exporter leaves the age out; 0 or a
    copy stamped ahead): the worst thrash read as no cache signal at all, 503 for the pressure, and the cache term
    gone without a hold, so the replicas fell to what the GPU asked (5 to 1 at tau 0)."""
    policy = RuntimePolicy(scale_down_tau_s=0.0)

    def thrashing(lru: float | None, now: float) -> tuple[PodSample, ...]:
        return tuple(pod(f"pod-{i}", gpu=0.2, rps=5.0, queue=0.0, cache=0.97, lru=lru, models=20.0, now=now)
                     for i in range(4))

    one_second, memory = decide(snapshot(thrashing(1.0, NOW)), policy, None, NOW, WINDOW)
    just_used, _ = decide(snapshot(thrashing(None, NOW + 15), now=NOW + 15), policy, memory, NOW + 15, WINDOW)
    assert served(one_second)[CACHE] == pytest.approx(600.0) and served(one_second)[DESIRED] == 5.0
    assert served(just_used)[CACHE] == pytest.approx(600.0)
    assert served(just_used)[DESIRED] == 5.0  # 1.2 x the 4 pods, rounded up: the cache term still decides
    assert just_used.winner == "cache"


def test_unknown_spell_keeps_memory_so_values_resume_where_they_were() -> None:
    _, memory = decide(snapshot(busy_pods(0.9, 0.9)), POLICY, None, NOW, WINDOW)
    held = memory.smoothed[GPU].value
    down, memory = decide(snapshot(busy_pods(0.1, 0.1), source_ok=False), POLICY, memory, NOW + 15, WINDOW)
    assert set(served(down).values()) == {None}
    assert memory.smoothed[GPU].value == held and not memory.known
    back, memory = decide(snapshot(busy_pods(0.1, 0.1, now=NOW + 600)), POLICY, memory, NOW + 600, WINDOW)
    # The 585 s spent unknown earn no decay: one 15 s step of fall from where the value was held.
    assert served(back)[GPU] == pytest.approx(0.1 + 0.8 * math.exp(-(600 - 15) / 300))
    assert "values resume from where they were held" in back.reason


def test_consecutive_misses_count_incomplete_refreshes_and_reset_on_a_complete_one() -> None:
    memory = None
    misses = []
    for i, stale in enumerate([(0,), (0,), (0, 1, 2), (), (1,)]):
        now = NOW + 15 * i
        pods = busy_pods(0.5, 0.5, 0.5, 0.5, stale=stale, now=now)
        view, memory = decide(snapshot(pods, now=now), POLICY, memory, now, WINDOW)
        misses.append(view.consecutive_misses)
    assert misses == [1, 2, 3, 0, 1]


def test_pod_views_explain_each_pod() -> None:
    pods = (
        pod("hot", gpu=0.9, rps=90.0),
        pod("idle", gpu=0.0, rps=0.0),
        pod("old", gpu=0.5, age=100.0),
        PodSample(name="starting", ready=False),
    )
    view, _ = decide(snapshot(pods), POLICY, None, NOW, WINDOW)
    by_name = {p.name: p for p in view.pods}
    assert [p.name for p in view.pods] == ["hot", "idle", "old", "starting"]
    assert by_name["hot"] == PodView(
        name="hot",
        ready=True,
        fresh=True,
        age_s=5.0,
        gpu_busy=0.9,
        requests_per_second=90.0,
        queue_delay_s=None,
        lru_age_s=None,
        cache_used_ratio=None,
        weight=1.0,
        need=by_name["hot"].need,
        deletion_cost=900,
        signals=(("gpu", "fresh"), ("requests", "fresh"), ("queue", "none"), ("cache", "none")),
    )
    assert by_name["hot"].need == pytest.approx(0.95)
    assert (by_name["idle"].need, by_name["idle"].deletion_cost) == (0.0, 0)
    assert (by_name["old"].fresh, by_name["old"].age_s, by_name["old"].weight) == (False, 100.0, 0.0)
    assert dict(by_name["old"].signals) == {"gpu": "stale", "requests": "stale", "queue": "none", "cache": "none"}
    assert by_name["starting"] == PodView(
        name="starting",
        ready=False,
        fresh=False,
        age_s=None,
        gpu_busy=None,
        requests_per_second=None,
        queue_delay_s=None,
        lru_age_s=None,
        cache_used_ratio=None,
        weight=0.0,
        signals=(("gpu", "none"), ("requests", "none"), ("queue", "none"), ("cache", "none")),
    )


def test_a_views_pods_read_as_ordinary_frozen_pod_views_and_cannot_change() -> None:
    pods = (pod("hot", gpu=0.9, rps=90.0), pod("idle", gpu=0.0, rps=0.0), PodSample(name="starting", ready=False))
    view, _ = decide(snapshot(pods), POLICY, None, NOW, WINDOW)
    built = view.pods[0]
    assert type(built) is PodView
    assert hash(built) == hash(PodView(**{f.name: getattr(built, f.name) for f in fields(PodView)}))
    with pytest.raises(AttributeError):
        built.need = 1.0  # type: ignore[misc]
    with pytest.raises(AttributeError):
        view.pods.rows = ()  # type: ignore[misc]
    assert len(view.pods) == 3
    assert [p.name for p in view.pods[1:]] == ["idle", "starting"]
    assert PodViews.of(view.pods) == view.pods
    assert pickle.loads(pickle.dumps(view)) == view
    # What the deletion-cost writer reads of every pod: name, ready, fresh and cost, with no PodView made.
    assert list(view.pods.deletion_costs()) == [("hot", True, True, 900), ("idle", True, True, 0),
                                                 ("starting", False, False, None)]


# --- property: missing data never lowers a value -----------------------------------------------------

PODS = 4
step_strategy = st.tuples(
    st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=PODS, max_size=PODS),  # GPU busy per pod
    st.frozensets(st.integers(min_value=0, max_value=PODS - 1), max_size=PODS),  # stale pods
    st.booleans(),  # source up
    st.sampled_from([0.9, 0.95, 0.5]),  # cache use: full or with room
)


@PROPERTIES
@given(steps=st.lists(step_strategy, min_size=2, max_size=25))
def test_served_value_never_falls_in_a_step_where_data_was_missing(
    steps: list[tuple[list[float], frozenset[int], bool, float]],
) -> None:
    policy = RuntimePolicy(target_rps_per_pod=50.0, scale_down_tau_s=60.0)
    memory: RuntimeMemory | None = None
    last: dict[ServedMetric, float] = {}
    for i, (gpus, stale, source_ok, cache) in enumerate(steps):
        now = NOW + 15.0 * i
        pods = tuple(
            pod(
                f"pod-{j}",
                gpu=g,
                rps=100.0 * g,
                queue=0.2 * g,
                cache=cache,
                lru=100.0 + 1000.0 * g,
                age=300.0 if j in stale else 3.0,
                now=now,
            )
            for j, g in enumerate(gpus)
        )
        view, memory = decide(snapshot(pods, source_ok=source_ok, now=now), policy, memory, now, WINDOW)
        missing = bool(stale) or not source_ok
        assert view.complete is not missing
        for metric, value in served(view).items():
            if not view.known:
                assert value is None
                continue
            assert value is not None and math.isfinite(value) and value >= 0.0
            if missing and metric in last:
                assert value >= last[metric], (i, metric)
            last[metric] = value
