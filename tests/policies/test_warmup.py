"""A runtime the adapter has no memory of (it restarted, or the runtime is new) is never served lower than what
runs (`autoscaler.policies.warmup`), reproduced as the issue saw it: the hot pod's exporter down at restart.

Numbers by hand. The hot runtime: pod-0 at GPU busy 0.9 and 150 req/s, pod-1..3 at 0.2 and 20 req/s,
`target_rps_per_pod` 150, four replicas. With every pod fresh: GPU 4 x sqrt((0.81 + 3 x 0.04) / 4) / 0.8 =
4 x 0.482 / 0.8 = 2.41 and requests 4 x sqrt((22500 + 3 x 400) / 4) / 150 = 307.9 / 150 = 2.05: desired 3.
The cold pods alone: GPU 3 x 0.2 / 0.8 = 0.75, requests 60 / 150 = 0.4: desired 1 (the floor of 1).
"""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import example, given
from hypothesis import strategies as st

from autoscaler.model import PodSample, RuntimeSnapshot, RuntimeView
from autoscaler.names import ServedMetric
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.runtime_memory import RuntimeMemory
from autoscaler.policies.warmup import WAITING_FOR_ASK, WarmUp, decide_remembering, grace_s
from tests.policies.builders import KEY, NOW, PROPERTIES, pod, pods_with, snapshot

DESIRED = ServedMetric.DESIRED_REPLICAS
GPU = ServedMetric.GPU_BUSY
LOAD = ServedMetric.REQUEST_LOAD
CACHE = ServedMetric.CACHE_PRESSURE
WINDOW = 30.0
POLICY = RuntimePolicy(target_rps_per_pod=150.0, warmup_grace_s=30.0)


def hot_runtime(now: float, *, hot_age: float | None = 5.0) -> tuple[PodSample, ...]:
    """The hot runtime; `hot_age` None: the hot pod's exporter is down (never read since the restart)."""
    common = {"queue": 0.0, "cache": 0.5, "models": 3.0, "lru": 900.0, "now": now}
    return (pod("pod-0", gpu=0.9, rps=150.0, age=hot_age, **common),  # type: ignore[arg-type]
            *(pod(f"pod-{i}", gpu=0.2, rps=20.0, **common) for i in range(1, 4)))  # type: ignore[arg-type]


def served(view: RuntimeView) -> dict[ServedMetric, float | None]:
    return {metric: value.value for metric, value in view.values.items()}


Step = tuple[RuntimeView, RuntimeMemory | None, WarmUp | None]


def restart(steps: list[tuple[float, RuntimeSnapshot]], policy: RuntimePolicy = POLICY) -> list[Step]:
    """Refreshes of an adapter that just started (no memory), at the given times."""
    memory: RuntimeMemory | None = None
    warm: WarmUp | None = None
    out = []
    for now, snap in steps:
        view, memory, warm = decide_remembering(snap, policy, memory, warm, now, WINDOW)
        out.append((view, memory, warm))
    return out


def test_before_the_restart_the_hot_runtime_asks_for_three() -> None:
    view, _ = decide(snapshot(hot_runtime(NOW)), POLICY, None, NOW, WINDOW)
    assert served(view)[DESIRED] == 3.0
    assert round(served(view)[LOAD] or 0, 3) == 307.896


def test_restart_with_the_hot_pods_exporter_down_answers_503_and_says_why() -> None:
    [(view, memory, warm)] = restart([(NOW, snapshot(hot_runtime(NOW, hot_age=None)))])
    assert served(view) == {m: None for m in ServedMetric}  # was: desired 1, load 60, GPU 0.2
    assert not view.known and memory is None and warm == WarmUp(since=NOW, misses=1)
    assert "warming up" in view.warming_up and "3 of 4 ready pods fresh (pod-0: gpu stale" in view.warming_up
    assert "in 30 s (warmup_grace_s)" in view.warming_up and "not below the current 4 replicas" in view.reason
    assert "(503), HPA holds" in view.reason


def test_a_restart_while_the_metric_source_is_down_says_so_first() -> None:
    """Prometheus unreachable as the adapter starts: every pod lacks data because the source is down, not
    because of its exporter. The answer (kubectl's error, the HPA's event) and the log must say that first;
    it said only "warming up ... pod-0: no data" for the whole grace period, which sends the operator after
    the exporters."""
    never_read = tuple(pod(f"pod-{i}", gpu=0.5, rps=20.0, age=None, now=NOW) for i in range(4))
    [(view, memory, _)] = restart([(NOW, snapshot(never_read, source_ok=False))])
    assert served(view) == {m: None for m in ServedMetric} and memory is None
    assert view.reason.startswith("metric source down"), view.reason
    assert "warming up" in view.reason and "(503), HPA holds" in view.reason


def test_while_the_source_stays_down_no_value_is_promised_for_the_end_of_the_grace_period() -> None:
    """The 503 said "served ... or in 15 s (warmup_grace_s)" while Prometheus was down, and past the grace the
    log said "warm-up grace period over: not below the current 4 replicas" before "metric source down": an
    operator waited for a value that no grace period brings while the source is down."""
    never_read = tuple(pod(f"pod-{i}", gpu=0.5, rps=20.0, age=None, now=NOW) for i in range(4))
    steps = [(NOW + t, snapshot(never_read, source_ok=False, now=NOW + t)) for t in (0.0, 15.0, 45.0)]
    views = [view for view, _, _ in restart(steps)]
    assert all(served(view) == {m: None for m in ServedMetric} for view in views)
    assert all(view.reason.startswith("metric source down; values unknown (503)") for view in views), views
    during, after = views[1].reason, views[2].reason
    assert "until it answers" in during and "once it answers, served when every ready pod is fresh" in during
    assert "once warmup_grace_s has passed (in 15 s)" in during
    assert "warm-up grace period over: once the source answers" in after, after


def test_after_the_grace_period_only_the_recommendation_is_served_never_below_what_runs() -> None:
    """The cold pods alone would say desired 1, request load 60 (3 x 20) and GPU busy 0.2: all below what was
    served before the restart (3, 307.9, 0.482). Past the grace period the recommendation is served at the
    four that run; the values pod-0 lacks stay unknown (503), naming it."""
    down = [(NOW + t, snapshot(hot_runtime(NOW + t, hot_age=None), now=NOW + t)) for t in (0.0, 15.0, 30.0, 45.0)]
    out = restart(down)
    views = [view for view, _, _ in out]
    assert [served(v)[DESIRED] for v in views] == [None, None, 4.0, 4.0]
    assert [served(v)[LOAD] for v in views] == [None, None, None, None]
    assert [served(v)[GPU] for v in views] == [None, None, None, None]
    assert [served(v)[CACHE] for v in views] == [None, None, None, None]
    assert views[2].known and "warm-up grace period over with 3 of 4 ready pods fresh (pod-0" in views[2].reason
    assert ("modelmesh_request_load held: no memory of this value yet and requests not fresh on pod-0; "
            "unknown (503)") in views[2].reason
    assert "modelmesh_gpu_busy held: no memory of this value yet and gpu not fresh on pod-0" in views[2].reason
    assert "requests not fresh on pod-0" in views[3].warming_up  # /debug and the self-metric: still warming up
    kept = out[3][1]
    assert kept is not None and set(kept.smoothed) == {DESIRED} and out[3][2] is None
    assert views[3].consecutive_misses == 4


def test_the_hot_pod_back_after_the_grace_period_serves_the_values_and_then_holds_them() -> None:
    """Once pod-0 is fresh again the values are served in full (307.9 and 0.482) and remembered; when its
    exporter goes down again the usual hold keeps them (the cold pods' 60 may not lower 307.9)."""
    steps = [(NOW + t, snapshot(hot_runtime(NOW + t, hot_age=None), now=NOW + t)) for t in (0.0, 30.0)]
    steps.append((NOW + 45.0, snapshot(hot_runtime(NOW + 45.0), now=NOW + 45.0)))
    steps.append((NOW + 105.0, snapshot(hot_runtime(NOW + 105.0, hot_age=100.0), now=NOW + 105.0)))
    views = [view for view, _, _ in restart(steps)]
    assert [round(served(v)[LOAD] or 0, 3) for v in views] == [0, 0, 307.896, 307.896]
    assert [round(served(v)[GPU] or 0, 3) for v in views] == [0, 0, 0.482, 0.482]
    assert [served(v)[DESIRED] for v in views] == [None, 4.0, 4.0, 4.0]
    assert views[2].warming_up == "" and views[3].warming_up == ""
    assert "1 of 4 ready pods stale; holding values (may rise, not fall)" in views[3].reason


def test_after_the_grace_period_a_rise_is_served_and_then_held() -> None:
    """The cold pods' load surges (desired 6), then falls back: the served recommendation stays at 6."""
    surge = tuple(replace(p, requests_per_second=300.0) if p.name != "pod-0" else p
                  for p in hot_runtime(NOW + 45.0, hot_age=None))
    steps = [
        (NOW, snapshot(hot_runtime(NOW, hot_age=None))),
        (NOW + 30.0, snapshot(hot_runtime(NOW + 30.0, hot_age=None), now=NOW + 30.0)),
        (NOW + 45.0, snapshot(surge, now=NOW + 45.0)),  # 3 x 300 / 150 = 6
        (NOW + 60.0, snapshot(hot_runtime(NOW + 60.0, hot_age=None), now=NOW + 60.0)),
    ]
    assert [served(v)[DESIRED] for v, _, _ in restart(steps)] == [None, 4.0, 6.0, 6.0]


def test_the_hot_pod_back_ends_the_warm_up_and_the_fall_is_slow_from_what_runs() -> None:
    """Once every pod is fresh the runtime is warm: full values, and the recommendation falls from the four
    that run with tau 300 s: after 300 s, 3 + (4 - 3) x e^-1 = 3.37 -> 4; after 900 s, 3.05 -> settled on 3."""
    steps = [
        (NOW, snapshot(hot_runtime(NOW, hot_age=None))),
        (NOW + 15.0, snapshot(hot_runtime(NOW + 15.0), now=NOW + 15.0)),
        (NOW + 315.0, snapshot(hot_runtime(NOW + 315.0), now=NOW + 315.0)),
        (NOW + 915.0, snapshot(hot_runtime(NOW + 915.0), now=NOW + 915.0)),
    ]
    out = restart(steps)
    assert [served(v)[DESIRED] for v, _, _ in out] == [None, 4.0, 4.0, 3.0]
    full = served(out[1][0])
    assert round(full[LOAD] or 0, 3) == 307.896 and round(full[GPU] or 0, 3) == 0.482
    assert out[1][1] is not None and out[1][2] is None and out[1][0].warming_up == ""


def test_a_restart_with_every_pod_fresh_serves_at_once_but_never_below_what_runs() -> None:
    """A rolling update of the adapter while load is low: the cold runtime alone asks for 1, but four run."""
    cold = tuple(p for p in hot_runtime(NOW) if p.name != "pod-0")
    [(view, memory, warm)] = restart([(NOW, RuntimeSnapshot(KEY, cold, NOW, replicas=4))])
    assert served(view)[DESIRED] == 4.0 and served(view)[LOAD] == 60.0 and warm is None and memory is not None


def test_a_pod_missing_only_a_signal_the_replicas_do_not_use_is_a_whole_restart_for_them() -> None:
    """A GPU runtime (no `target_rps_per_pod`: the request rate decides nothing) with pod-0 publishing no request
    rate. The warm-up waited on it for the grace period, served the four that run and said the missing pod held
    them, then the next refresh let the recommendation fall (it was complete for the replicas): "never below the
    current replicas" lasted one refresh. The replicas' signals are whole, so the restart is whole for them: the
    four that run at once, then the slow fall, 1 + 3 x e^-1 = 2.10 -> 3 after 300 s; the request load stays
    unknown (503), naming pod-0."""
    policy = RuntimePolicy(warmup_grace_s=30.0)

    def gpu_runtime(now: float) -> tuple[PodSample, ...]:
        return pods_with(gpu=[0.1] * 4, rps=[None, 5.0, 5.0, 5.0], queue=[0.0] * 4, cache=[0.5] * 4,
                         lru=[900.0] * 4, models=[3.0] * 4) if now == NOW else tuple(
            replace(p, sampled_at=now - 5.0) for p in gpu_runtime(NOW))

    steps = [(NOW + t, RuntimeSnapshot(KEY, gpu_runtime(NOW + t), NOW + t, replicas=4)) for t in (0.0, 15.0, 315.0)]
    views = [view for view, _, _ in restart(steps, policy)]
    assert [served(v)[DESIRED] for v in views] == [4.0, 4.0, 3.0]
    assert [served(v)[LOAD] for v in views] == [None, None, None]
    assert "requests not fresh on pod-0" in views[0].warming_up


def test_a_pod_with_a_fresh_gpu_reading_but_stale_load_is_waited_for_after_a_restart() -> None:
    """A GPU-only runtime (no request rate, queue or cache) restarted with pod-1's load sample 100 s old and its GPU
    reading just taken: not every Ready pod is fresh, so nothing is served (503) inside the grace period; the
    reason says which pod the warm-up waits for."""
    pods = (pod("pod-0", gpu=0.4), replace(pod("pod-1", gpu=0.4, age=100.0), gpu_sampled_at=NOW))
    [(view, memory, warm)] = restart([(NOW, snapshot(pods))], RuntimePolicy(warmup_grace_s=30.0))
    assert served(view)[DESIRED] is None and memory is None and warm is not None
    assert "1 of 2 ready pods fresh (pod-1" in view.reason


def test_a_runtime_with_memory_of_every_value_is_decided_as_before() -> None:
    _, memory = decide(snapshot(hot_runtime(NOW)), POLICY, None, NOW, WINDOW)
    snap = snapshot(hot_runtime(NOW + 15.0, hot_age=None), now=NOW + 15.0)
    expected, expected_memory = decide(snap, POLICY, memory, NOW + 15.0, WINDOW)
    assert decide_remembering(snap, POLICY, memory, None, NOW + 15.0, WINDOW) == (expected, expected_memory, None)
    assert round(served(expected)[LOAD] or 0, 3) == 307.896  # held


def test_a_warm_runtime_serves_a_new_value_only_once_every_ready_pod_reports_it() -> None:
    """The GPU collector rolled out to two of four pods (0.6 and 0.2 busy): their GPU busy alone,
    sqrt((0.36 + 0.04) / 2) = 0.447, says nothing of the other two: unknown until all four report it; then
    sqrt((0.36 + 3 x 0.04) / 4) = 0.346."""
    _, memory = decide(snapshot(pods_with(rps=[20.0] * 4)), POLICY, None, NOW, WINDOW)
    half = snapshot(pods_with(rps=[20.0] * 4, gpu=[0.6, 0.2, None, None]))
    view, kept, _ = decide_remembering(half, POLICY, memory, None, NOW, WINDOW)
    assert served(view)[GPU] is None and served(view)[LOAD] == 80.0 and served(view)[DESIRED] is not None
    assert "gpu not fresh on pod-2, pod-3; unknown (503)" in view.held[GPU.value]
    assert kept is not None and GPU not in kept.smoothed
    whole = snapshot(pods_with(rps=[20.0] * 4, gpu=[0.6, 0.2, 0.2, 0.2]))
    view, kept, _ = decide_remembering(whole, POLICY, kept, None, NOW + 15.0, WINDOW)
    assert round(served(view)[GPU] or 0, 3) == 0.346 and view.warming_up == ""


def test_the_grace_period_defaults_to_max_staleness() -> None:
    assert grace_s(RuntimePolicy(max_staleness_s=45.0)) == 45.0
    assert grace_s(RuntimePolicy(max_staleness_s=45.0, warmup_grace_s=0.0)) == 0.0


def test_no_ready_pod_after_a_restart_stays_unknown_past_the_grace_period() -> None:
    idle = tuple(replace(p, ready=False) for p in hot_runtime(NOW))
    out = restart([(NOW + t, RuntimeSnapshot(KEY, idle, NOW + t, replicas=4)) for t in (0.0, 60.0)])
    assert [served(v)[DESIRED] for v, _, _ in out] == [None, None]
    assert "no pod is ready" in out[0][0].warming_up and "no ready pods" in out[1][0].reason


# --- the promises, for any pods: after a restart nothing served is below what runs or what was served ------

AGES = st.sampled_from([None, 1.0, 20.0, 600.0])  # never read, fresh, fresh, stale (max_staleness 45 s)
FRESH_AGES = st.sampled_from([1.0, 20.0])
SIGNAL = st.one_of(st.none(), st.floats(min_value=0.0, max_value=2.0))
RATE = st.one_of(st.none(), st.floats(0.0, 500.0))
Pod = tuple[bool, float | None, float | None, float | None, float | None, float | None]
PODS = st.lists(st.tuples(st.booleans(), AGES, AGES, SIGNAL, RATE, SIGNAL), min_size=0, max_size=6)
FRESH_PODS = st.lists(st.tuples(st.booleans(), FRESH_AGES, st.one_of(st.none(), FRESH_AGES), SIGNAL, RATE, SIGNAL),
                      min_size=1, max_size=6)
VALUES = (GPU, LOAD, CACHE)


def build(pods: list[Pod], now: float, replicas: int | None) -> RuntimeSnapshot:
    samples = tuple(
        PodSample(name=f"pod-{i}", ready=ready, sampled_at=None if age is None else now - age,
                  gpu_sampled_at=None if gpu_age is None else now - gpu_age, gpu_busy=gpu,
                  requests_per_second=rps, queue_delay_s=queue, cache_used_ratio=0.5, models_loaded=2.0,
                  lru_age_s=600.0)
        for i, (ready, age, gpu_age, gpu, rps, queue) in enumerate(pods)
    )
    return RuntimeSnapshot(KEY, samples, now, replicas=replicas)


def whole(pods: list[Pod], metric: ServedMetric) -> bool:
    """Every Ready pod has the value's signal fresh (max_staleness_s 45): GPU busy by its own stamp (else the
    pod's), request load and cache pressure by the pod's stamp (every pod here reports its cache)."""
    def fresh(age: float | None) -> bool:
        return age is not None and age <= 45.0
    return all(
        fresh(gpu_age if gpu_age is not None else age) and gpu is not None if metric is GPU
        else fresh(age) and (rps is not None if metric is LOAD else True)
        for ready, age, gpu_age, gpu, rps, _ in pods if ready
    )


def replicas_whole(pods: list[Pod], rps_target: float | None) -> bool:
    """Whether the replica count may be served while warming up: every Ready pod fresh on all it reads (its GPU
    where it reports one, its queue and cache: every pod here reports its cache), the request rate alone missing
    on some, and no `target_rps_per_pod`, without which the rate decides nothing. The other values still wait
    for every Ready pod (the check of `whole`)."""
    def fresh(age: float | None) -> bool:
        return age is not None and age <= 45.0
    return rps_target is None and any(pod[0] for pod in pods) and all(
        fresh(age) and (gpu is None or fresh(gpu_age if gpu_age is not None else age))
        for ready, age, gpu_age, gpu, _, _ in pods if ready)


@PROPERTIES
@given(
    steps=st.lists(st.tuples(PODS, st.one_of(st.none(), st.integers(0, 12))), min_size=1, max_size=5),
    grace=st.sampled_from([0.0, 20.0, 45.0, 1000.0]),
    tau=st.sampled_from([0.0, 1.0, 300.0]),
    cap=st.one_of(st.none(), st.integers(1, 12)),
    rps_target=st.one_of(st.none(), st.just(100.0)),
)
# Scaled to zero between two refreshes with no pod: the grace period counts from the refresh after it.
@example(steps=[([], None), ([], 0), ([], None)], grace=20.0, tau=0.0, cap=None, rps_target=None)
# Two Ready pods at replicas 1, one fresh and one never read: the one never read is a rollout's surge, left out,
# and the cache pressure is served whole from the pod counted.
@example(steps=[([(False, None, None, None, None, None)] * 4 + [(True, 1.0, None, None, None, None),
                                                              (True, None, None, None, None, None)], 1)],
         grace=0.0, tau=0.0, cap=None, rps_target=None)
# Two Ready pods fresh, one without its request rate, no GPU and no target_rps_per_pod: the replica count is
# served at once (from what runs), the request load waits for the rate.
@example(steps=[([(False, None, None, None, None, None), (False, None, None, None, None, None),
                  (True, 1.0, None, None, None, 0.0), (True, 1.0, None, None, 0.0, 0.0)], None)],
         grace=20.0, tau=0.0, cap=None, rps_target=None)
def test_after_a_restart_the_recommendation_is_never_below_what_runs_and_a_value_is_served_only_whole(
    steps: list[tuple[list[Pod], int | None]], grace: float, tau: float, cap: int | None, rps_target: float | None,
) -> None:
    policy = RuntimePolicy(warmup_grace_s=grace, scale_down_tau_s=tau, max_replicas=cap,
                           target_rps_per_pod=rps_target)
    memory: RuntimeMemory | None = None
    warm: WarmUp | None = None
    remembered: set[ServedMetric] = set()  # values served once: from then on the usual holds apply
    warming_since: float | None = None  # the first refresh with no memory: the grace period counts from there
    for k, (pods, replicas) in enumerate(steps):
        now = NOW + 15.0 * k
        if warming_since is None:
            warming_since = now
        snap = build(pods, now, replicas)
        had_memory = memory is not None
        view, memory, warm = decide_remembering(snap, policy, memory, warm, now, WINDOW)
        if replicas == 0 and not any(pod.ready for pod in snap.pods):
            # Scaled to zero: nothing served, nothing missed, everything forgotten (it warms up again).
            assert all(value.value is None for value in view.values.values()), view.reason
            assert memory is None and warm is None and view.consecutive_misses == 0, view.reason
            remembered.clear()
            warming_since = None  # pods that come back warm up anew, from their first refresh
            continue
        # A Ready pod beyond the Deployment's replicas that carries no load is a rollout's surge, left out of the
        # values (surge_pods.py; hypothesis found 2 Ready pods at replicas 1, one fresh and one never read, the
        # cache pressure served from the fresh one): the values must be whole over the pods the adapter counts,
        # as /debug's `counted` names them, and it may leave out only what is beyond the replicas.
        left_out = {name for name, (counted, _) in view.pods_counted.items() if not counted}
        ready_pods = sum(pod[0] for pod in pods)
        assert not left_out or (replicas is not None and len(left_out) <= ready_pods - replicas), view.pods_counted
        counted_pods = [pod for i, pod in enumerate(pods) if f"pod-{i}" not in left_out]
        for metric in VALUES:
            if view.values[metric].value is not None and metric not in remembered:
                assert whole(counted_pods, metric), (metric, view.reason)
                remembered.add(metric)
        if had_memory:
            continue  # warm: the usual rules (tests/policies/test_missing_signals.py)
        runs = replicas if replicas is not None else sum(p.ready for p in snap.pods)
        desired = view.values[DESIRED].value
        if desired is not None:
            assert desired >= min(runs, cap if cap is not None else math.inf), (view.reason, runs)
        if not view.complete and now - warming_since < grace:
            if view.values[DESIRED].value is not None:
                # The replica count alone, where nothing it reads is missing (`replicas_whole`): warm from here.
                assert replicas_whole(pods, rps_target), view.reason
                assert memory is not None and warm is None
                continue
            # Warming up: nothing is served until every Ready pod is fresh or the grace period is over.
            assert all(value.value is None for value in view.values.values()), view.reason
            assert memory is None and warm is not None and view.warming_up
        else:
            assert memory is not None and warm is None


@PROPERTIES
@given(
    pods=FRESH_PODS,
    down=st.lists(st.sets(st.integers(0, 5)), min_size=1, max_size=5),
    grace=st.sampled_from([0.0, 20.0, 1000.0]),
    tau=st.sampled_from([0.0, 300.0]),
    cap=st.one_of(st.none(), st.integers(1, 12)),
    rps_target=st.one_of(st.none(), st.just(100.0)),
)
def test_an_adapter_restarted_while_exporters_are_down_serves_nothing_lower_than_before(
    pods: list[Pod], down: list[set[int]], grace: float, tau: float, cap: int | None, rps_target: float | None,
) -> None:
    """The issue's acceptance, for any pods: before the restart every pod was fresh and the HPA had adopted
    the recommendation; the restarted adapter sees the same pods with any exporters down, refresh after
    refresh. Whatever it serves is at least what was served before."""
    policy = RuntimePolicy(warmup_grace_s=grace, scale_down_tau_s=tau, max_replicas=cap,
                           target_rps_per_pod=rps_target)
    before, _ = decide(build(pods, NOW, None), policy, None, NOW, WINDOW)
    runs = before.values[DESIRED].value
    memory: RuntimeMemory | None = None
    warm: WarmUp | None = None
    for k, dead in enumerate(down):
        now = NOW + 100.0 + 15.0 * k
        seen = [(ready, None, None, *rest) if i in dead else (ready, age, gpu_age, *rest)
                for i, (ready, age, gpu_age, *rest) in enumerate(pods)]
        snap = build(seen, now, None if runs is None else int(runs))  # type: ignore[arg-type]
        view, memory, warm = decide_remembering(snap, policy, memory, warm, now, WINDOW)
        for metric, value in view.values.items():
            was = before.values[metric].value
            if value.value is not None and was is not None:
                assert value.value >= was, (metric, was, value.value, view.reason)


def test_what_runs_is_the_deployments_replicas_else_the_ready_pods() -> None:
    """Cluster mode knows the Deployment's `spec.replicas` (6 here, two pods still starting); without it
    the Ready pods count (3 of the 4: one is not Ready)."""
    cold = tuple(p for p in hot_runtime(NOW) if p.name != "pod-0")
    [(six, _, _)] = restart([(NOW, RuntimeSnapshot(KEY, cold, NOW, replicas=6))])
    starting = (*cold, replace(cold[0], name="pod-9", ready=False))
    [(three, _, _)] = restart([(NOW, RuntimeSnapshot(KEY, starting, NOW, replicas=None))])
    assert served(six)[DESIRED] == 6.0 and served(three)[DESIRED] == 3.0  # the cold pods alone: 1


def test_what_runs_above_max_replicas_is_served_at_the_cap() -> None:
    cold = tuple(p for p in hot_runtime(NOW) if p.name != "pod-0")
    [(view, _, _)] = restart([(NOW, RuntimeSnapshot(KEY, cold, NOW, replicas=8))], replace(POLICY, max_replicas=5))
    assert served(view)[DESIRED] == 5.0


def test_what_runs_includes_what_the_hpa_asked_of_the_runtimescale() -> None:
    """The HPA wrote 6 to the RuntimeScale just before the restart and the Deployment still has 4: the seed is
    6. A RuntimeScale at 2 (a scale-down not yet carried) does not lower the 4 that run."""
    cold = snapshot(tuple(p for p in hot_runtime(NOW) if p.name != "pod-0"))
    six, _, _ = decide_remembering(replace(cold, replicas=4), POLICY, None, None, NOW, WINDOW, scaled=6)
    four, _, _ = decide_remembering(replace(cold, replicas=4), POLICY, None, None, NOW, WINDOW, scaled=2)
    assert served(six)[DESIRED] == 6.0 and served(four)[DESIRED] == 4.0  # the cold pods alone: 1


@PROPERTIES
@given(
    steps=st.lists(st.tuples(PODS, st.one_of(st.none(), st.integers(1, 12))), min_size=1, max_size=5),
    listed_at=st.integers(0, 5),
    asked=st.integers(1, 12),
    grace=st.sampled_from([0.0, 20.0, 45.0, 1000.0]),
    cap=st.one_of(st.none(), st.integers(1, 12)),
)
def test_before_the_runtimescales_are_listed_nothing_is_served_within_the_grace_period_and_then_never_below_the_ask(
    steps: list[tuple[list[Pod], int | None]], listed_at: int, asked: int, grace: float, cap: int | None,
) -> None:
    """The RuntimeScale watch lists at refresh `listed_at` (`ask_unread` before): until then, within the grace
    period, nothing is served, whatever the pods show; a runtime seeded once the list is in starts at least at
    what the HPA asked (capped at max_replicas), never from the Deployment alone."""
    policy = RuntimePolicy(warmup_grace_s=grace, max_replicas=cap)
    memory: RuntimeMemory | None = None
    warm: WarmUp | None = None
    for k, (pods, replicas) in enumerate(steps):
        now = NOW + 15.0 * k
        unread = k < listed_at
        had_memory = memory is not None
        view, memory, warm = decide_remembering(build(pods, now, replicas), policy, memory, warm, now, WINDOW,
                                                None if unread else asked, ask_unread=unread)
        if had_memory:
            continue
        desired = view.values[DESIRED].value
        if unread and now - NOW < grace:
            assert all(value.value is None for value in view.values.values()), view.reason
            assert memory is None and warm is not None and view.warming_up.startswith(WAITING_FOR_ASK)
            # /debug's `held` says what the values wait for, as `reason` does: the list, not the pods
            assert all("RuntimeScales" in why for why in view.held.values()), view.held
        elif not unread and desired is not None:
            assert desired >= min(asked, cap if cap is not None else math.inf), (view.reason, asked)
