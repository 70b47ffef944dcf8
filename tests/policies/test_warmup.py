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

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import PodSample, RuntimeSnapshot, RuntimeView
from autoscaler.names import ServedMetric
from autoscaler.policies.decision import RuntimeMemory, decide
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.warmup import WarmUp, decide_remembering, grace_s
from tests.policies.builders import KEY, NOW, PROPERTIES, pod, snapshot

DESIRED = ServedMetric.DESIRED_REPLICAS
GPU = ServedMetric.GPU_BUSY
LOAD = ServedMetric.REQUEST_LOAD
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


def test_after_the_grace_period_the_fresh_pods_are_served_and_the_recommendation_never_below_what_runs() -> None:
    down = [(NOW + t, snapshot(hot_runtime(NOW + t, hot_age=None), now=NOW + t)) for t in (0.0, 15.0, 30.0, 45.0)]
    out = restart(down)
    views = [view for view, _, _ in out]
    assert [served(v)[DESIRED] for v in views] == [None, None, 4.0, 4.0]  # the cold pods alone would say 1
    assert [served(v)[LOAD] for v in views] == [None, None, 60.0, 60.0]  # 3 x 20: the fresh pods, then held
    assert [round(served(v)[GPU] or 0, 3) for v in views] == [0, 0, 0.2, 0.2]
    assert "warm-up grace period over with 3 of 4 ready pods fresh (pod-0" in views[2].reason
    assert views[2].warming_up == "" and out[2][1] is not None and out[2][2] is None
    assert views[3].consecutive_misses == 4


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


def test_a_runtime_with_memory_is_decided_as_before() -> None:
    snap = snapshot(hot_runtime(NOW, hot_age=None))
    memory = RuntimeMemory()
    expected, expected_memory = decide(snap, POLICY, memory, NOW, WINDOW)
    assert decide_remembering(snap, POLICY, memory, None, NOW, WINDOW) == (expected, expected_memory, None)


def test_the_grace_period_defaults_to_max_staleness() -> None:
    assert grace_s(RuntimePolicy(max_staleness_s=45.0)) == 45.0
    assert grace_s(RuntimePolicy(max_staleness_s=45.0, warmup_grace_s=0.0)) == 0.0


def test_no_ready_pod_after_a_restart_stays_unknown_past_the_grace_period() -> None:
    idle = tuple(replace(p, ready=False) for p in hot_runtime(NOW))
    out = restart([(NOW + t, RuntimeSnapshot(KEY, idle, NOW + t, replicas=4)) for t in (0.0, 60.0)])
    assert [served(v)[DESIRED] for v, _, _ in out] == [None, None]
    assert "no pod is ready" in out[0][0].warming_up and "no ready pods" in out[1][0].reason


# --- the promise, for any pods: after a restart nothing served is below what runs --------------------------

AGES = st.sampled_from([None, 1.0, 20.0, 600.0])  # never read, fresh, fresh, stale (max_staleness 45 s)
SIGNAL = st.one_of(st.none(), st.floats(min_value=0.0, max_value=2.0))
PODS = st.lists(
    st.builds(lambda ready, age, gpu_age, gpu, rps, queue: (ready, age, gpu_age, gpu, rps, queue),
              st.booleans(), AGES, AGES, SIGNAL, st.one_of(st.none(), st.floats(0.0, 500.0)), SIGNAL),
    min_size=0, max_size=6,
)


def build(pods: list[tuple[bool, float | None, float | None, float | None, float | None, float | None]],
          now: float, replicas: int | None) -> RuntimeSnapshot:
    samples = tuple(
        PodSample(name=f"pod-{i}", ready=ready, sampled_at=None if age is None else now - age,
                  gpu_sampled_at=None if gpu_age is None else now - gpu_age, gpu_busy=gpu,
                  requests_per_second=rps, queue_delay_s=queue, cache_used_ratio=0.5, models_loaded=2.0,
                  lru_age_s=600.0)
        for i, (ready, age, gpu_age, gpu, rps, queue) in enumerate(pods)
    )
    return RuntimeSnapshot(KEY, samples, now, replicas=replicas)


@PROPERTIES
@given(
    steps=st.lists(st.tuples(PODS, st.one_of(st.none(), st.integers(0, 12))), min_size=1, max_size=5),
    grace=st.sampled_from([0.0, 20.0, 45.0, 1000.0]),
    tau=st.sampled_from([0.0, 1.0, 300.0]),
    cap=st.one_of(st.none(), st.integers(1, 12)),
    rps_target=st.one_of(st.none(), st.just(100.0)),
)
def test_after_a_restart_the_served_recommendation_is_never_below_what_runs(
    steps: list[tuple[list[tuple[bool, float | None, float | None, float | None, float | None, float | None]],
                      int | None]],
    grace: float, tau: float, cap: int | None, rps_target: float | None,
) -> None:
    policy = RuntimePolicy(warmup_grace_s=grace, scale_down_tau_s=tau, max_replicas=cap,
                           target_rps_per_pod=rps_target)
    memory: RuntimeMemory | None = None
    warm: WarmUp | None = None
    for k, (pods, replicas) in enumerate(steps):
        now = NOW + 15.0 * k
        snap = build(pods, now, replicas)
        had_memory = memory is not None
        view, memory, warm = decide_remembering(snap, policy, memory, warm, now, WINDOW)
        if had_memory:
            continue  # warm: the usual rules (tests/policies/test_missing_signals.py)
        runs = replicas if replicas is not None else sum(p.ready for p in snap.pods)
        desired = view.values[DESIRED].value
        if desired is not None:
            assert desired >= min(runs, cap if cap is not None else math.inf), (view.reason, runs)
        if not view.complete and now - NOW < grace:
            # Warming up: nothing is served until every Ready pod is fresh or the grace period is over.
            assert all(value.value is None for value in view.values.values()), view.reason
            assert memory is None and warm is not None and view.warming_up
        else:
            assert memory is not None and warm is None and not view.warming_up


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
