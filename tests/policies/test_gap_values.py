"""A gap neither lowers nor raises a served value (docs/design.md, Missing data): a Ready pod whose data is stale
counts at its last good value in the power means while that value is recent (`HELD_SAMPLE_S`), so what is served
moves only with the fresh pods' real changes. The cache pressure is the fresh pods' evidence alone, and may rise
on it (a stale pod's last room is no room now).

Was: the power mean was taken over the fresh pods alone, so idle pods' exporters going down raised
`modelmesh_gpu_busy` at once (an operator's review: 9 idle pods of 20, 361m -> 405m), which then fell at the
slow-fall rate for minutes once they were back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hypothesis import assume, example, given
from hypothesis import strategies as st

from autoscaler.model import PodSample, RuntimeView
from autoscaler.names import ServedMetric
from autoscaler.policies.aggregation import HELD_SAMPLE_S
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.runtime_memory import RuntimeMemory
from autoscaler.sources.held_gpu import with_last_gpu
from tests.policies.builders import NOW, PROPERTIES, pod, snapshot

DESIRED = ServedMetric.DESIRED_REPLICAS
GPU = ServedMetric.GPU_BUSY
LOAD = ServedMetric.REQUEST_LOAD
CACHE = ServedMetric.CACHE_PRESSURE
WINDOW = 30.0
POLICY = RuntimePolicy(target_rps_per_pod=100.0)  # tau 300 s, max_staleness 45 s, min_coverage 0.5
STEP = 60.0  # a sample taken one step before is stale


Load = tuple[float, float] | tuple[float, float, float | None]
"""GPU busy, request rate, and the LRU age of a full cache (None or left out: the pod has room)."""


def fleet(loads: Sequence[Load], now: float, ages: Sequence[float] | None = None) -> list[PodSample]:
    """Pod i with `loads[i]`, sampled `ages[i]` (else 5 s) before `now`."""
    pods = []
    for i, (gpu, rps, *cache) in enumerate(loads):
        lru = cache[0] if cache else None
        pods.append(pod(f"pod-{i}", gpu=gpu, rps=rps, queue=0.0, cache=0.5 if lru is None else 0.95, models=2.0,
                        lru=lru, now=now, age=5.0 if ages is None else ages[i]))
    return pods


def without_cache(sample: PodSample) -> PodSample:
    """A stale load carries a stale cache state, which answers no cache question and is not in the cache term's n:
    in a reference refresh, the pod whose load is stale reports no cache."""
    return replace(sample, cache_used_ratio=None, lru_age_s=None, models_loaded=None)


def values(view: RuntimeView) -> dict[ServedMetric, tuple[float | None, float | None]]:
    """Each served value, and its target before smoothing (`raw`)."""
    return {metric: (value.value, value.raw) for metric, value in view.values.items()}


def test_idle_pods_gone_neither_raise_nor_lower_gpu_busy() -> None:
    """The review's runtime: pod 0 at 0.95, 19 at 0.30: M2 = 0.3614. Nine idle pods' exporters stop: still 0.3614
    (was 0.405, then 0.404, 0.401, ... falling at the slow-fall rate once they were back)."""
    loads = [(0.95, 100.0)] + [(0.30, 10.0)] * 19
    _, memory = decide(snapshot(tuple(fleet(loads, NOW)), now=NOW), POLICY, None, NOW, WINDOW)
    gap = fleet(loads, NOW + STEP)
    gap[11:] = fleet(loads, NOW)[11:]  # their last good samples, a step old
    view, memory = decide(snapshot(tuple(gap), now=NOW + STEP), POLICY, memory, NOW + STEP, WINDOW)
    busy = view.values[GPU].value
    assert busy is not None and round(busy, 4) == 0.3614, view.values[GPU]
    back = fleet(loads, NOW + 2 * STEP)
    view, _ = decide(snapshot(tuple(back), now=NOW + 2 * STEP), POLICY, memory, NOW + 2 * STEP, WINDOW)
    assert view.values[GPU].value == busy


def assert_served_as_reference(metric: ServedMetric, gapped: tuple[float | None, float | None],
                               reference: tuple[float | None, float | None], before: float | None) -> None:
    """A value (served, raw) of a refresh with a gap against the same refresh with the gone signals fresh at their
    last values: the same target, served never below the reference's, nor above what the reference or the value
    `before` (the one served a refresh earlier) explain."""
    (served, raw), (ref_served, ref_raw) = gapped, reference
    assert served is not None and ref_served is not None, (metric, gapped, reference)
    if metric is not DESIRED:  # (the replica count's raw is the recommendation, served rounded up)
        assert raw is not None and ref_raw is not None, metric
        assert abs(raw - ref_raw) <= 1e-9 * max(1.0, ref_raw), (metric, raw, ref_raw)
    assert served >= ref_served - 1e-9 * max(1.0, ref_served), (metric, served, ref_served)
    explained = max(ref_served, before or 0.0)
    assert served <= explained + 1e-9 * max(1.0, explained), (metric, served, ref_served, before)


load = st.tuples(st.floats(min_value=0.0, max_value=1.0), st.floats(min_value=0.0, max_value=500.0),
                st.none() | st.floats(min_value=10.0, max_value=2000.0))


@PROPERTIES
@given(
    before=st.lists(load, min_size=2, max_size=12),
    data=st.data(),
)
# An idle pod of two gone: M2(0.9, 0) = 0.636 over both, 0.9 over the hot pod alone.
@example(before=[(0.9, 90.0), (0.0, 0.0)], data=None)
def test_a_gap_serves_what_the_missing_pods_last_values_would(
    before: Sequence[Load], data: st.DataObject | None,
) -> None:
    """Refresh 0: every pod fresh. Refresh 1, `elapsed` later (a step to hours; or an adapter restarted, with no
    memory): some pods stale, each at a last sample of its own age (the sources keep them), the others with new
    loads. The reference is the same refresh with each stale pod whose sample is recent (`HELD_SAMPLE_S`) fresh at
    those last values, its cache unreported (no cache use, LRU age or model count: in neither the cache question
    nor the cache term's n), and the
    older ones gone: the targets (GPU busy, request load, cache pressure) are the same, and what is served is never
    below the reference's nor above what the reference or the value before explain. Below `min_coverage` fresh
    every value stays 503."""
    count = len(before)
    restart = False
    elapsed = STEP
    if data is None:
        gone, after, ages = [False, True], before, [5.0, STEP + 5.0]
    else:
        gone = data.draw(st.lists(st.booleans(), min_size=count, max_size=count), label="gone")
        after = data.draw(st.lists(load, min_size=count, max_size=count), label="after")
        restart = data.draw(st.booleans(), label="restart")
        elapsed = data.draw(st.sampled_from([STEP, HELD_SAMPLE_S, HELD_SAMPLE_S + STEP, 3 * 3600.0]) | st.floats(
            min_value=STEP, max_value=3 * 3600.0), label="elapsed")
        # A stale pod's last sample: since the refresh before, at most `elapsed` + 5 s old, at least a step
        age = st.sampled_from([STEP, HELD_SAMPLE_S, HELD_SAMPLE_S + 1.0, elapsed + 5.0]) | st.floats(
            min_value=STEP, max_value=elapsed + 5.0)
        ages = [data.draw(age, label=f"age {i}") if missing else 5.0 for i, missing in enumerate(gone)]
        ages = [min(a, elapsed + 5.0) for a in ages]
    after = [old if missing else new for old, new, missing in zip(before, after, gone, strict=True)]
    start_view, kept = decide(snapshot(tuple(fleet(before, NOW)), now=NOW), POLICY, None, NOW, WINDOW)
    start = values(start_view)
    memory: RuntimeMemory | None = None if restart else kept
    now = NOW + elapsed
    with_gap = fleet(after, now, ages)
    reference = [without_cache(replace(p, sampled_at=now - 5.0))
                 if missing else p
                 for p, missing in zip(with_gap, gone, strict=True)
                 if not missing or now - p.sampled_at <= HELD_SAMPLE_S]  # type: ignore[operator]
    ref_view, _ = decide(snapshot(tuple(reference), now=now), POLICY, memory, now, WINDOW)
    gap_view, _ = decide(snapshot(tuple(with_gap), now=now), POLICY, memory, now, WINDOW)
    ref, gap = values(ref_view), values(gap_view)
    if count - sum(gone) < POLICY.min_coverage * count:  # too few fresh: unknown (503), the HPA holds
        assert all(gap[metric][0] is None for metric in (GPU, LOAD, CACHE, DESIRED)), gap
        return
    explains = start if memory is not None else ref
    for metric in (GPU, LOAD, CACHE):
        raw, ref_raw = gap[metric][1], ref[metric][1]
        assert (raw is None) == (ref_raw is None), (metric, raw, ref_raw)  # (no fresh pod with cache use: none)
        if raw is None:
            continue
        assert_served_as_reference(metric, gap[metric], ref[metric], explains[metric][0])
    assert_served_as_reference(DESIRED, gap[DESIRED], ref[DESIRED], explains[DESIRED][0])


def test_the_pods_back_serve_what_they_would_have_without_the_gap() -> None:
    """Two of four idle pods stale for two refreshes, then back: the served GPU busy and request load are, at
    every refresh, those of the runtime without the gap (values that do not fall need no hold)."""
    loads = [(0.9, 120.0), (0.3, 20.0), (0.3, 20.0), (0.3, 20.0)]
    rising = [(0.9, 120.0), (0.5, 40.0), (0.3, 20.0), (0.3, 20.0)]
    plain: RuntimeMemory | None = None
    gapped: RuntimeMemory | None = None
    for step, (current, gone) in enumerate([(loads, ()), (rising, (2, 3)), (rising, (2, 3)), (rising, ())]):
        now = NOW + STEP * step
        pods = fleet(current, now)
        with_gap = [replace(p, sampled_at=NOW - 5.0) if i in gone else p for i, p in enumerate(pods)]
        plain_view, plain = decide(snapshot(tuple(pods), now=now), POLICY, plain, now, WINDOW)
        gap_view, gapped = decide(snapshot(tuple(with_gap), now=now), POLICY, gapped, now, WINDOW)
        for metric in (GPU, LOAD, DESIRED):
            assert gap_view.values[metric].value == plain_view.values[metric].value, (step, metric)


def test_the_pod_with_room_gone_may_raise_cache_pressure_and_replicas() -> None:
    """Two full pods (LRU age 300 s: pressure 600 / 300 = 2) and one with room: the runtime has room, pressure 0,
    and GPU 3 x 0.1 / 0.8 asks for 1 pod. The pod with room's exporter down: whether it still has room is not
    known, and the fresh pods' oldest copies were used 300 s before, so the pressure rises to 2 and the cache term,
    over the two fresh pods (DESIGN §5), to 2 x 1.2 = 2.4: 3 replicas (docs/design.md, Missing data: a value may
    rise during a gap, never fall; counted in n as full, the stale pod made it 4, past the contract's). Taken as
    room, its last state pinned the pressure at 0 however hard the others evicted. Back with room: 0 again, and
    what is served falls at the slow-fall rate."""
    def pods(now: float) -> list[PodSample]:
        full = {"gpu": 0.1, "rps": 10.0, "queue": 0.0, "cache": 0.95, "models": 5.0, "lru": 300.0, "now": now}
        return [pod("pod-0", **full), pod("pod-1", **full),  # type: ignore[arg-type]
                pod("pod-2", gpu=0.1, rps=10.0, queue=0.0, cache=0.5, models=2.0, lru=900.0, now=now)]
    view, memory = decide(snapshot(tuple(pods(NOW)), now=NOW), POLICY, None, NOW, WINDOW)
    assert (view.values[CACHE].value, view.values[DESIRED].value) == (0.0, 1.0)
    gap = pods(NOW + STEP)
    gap[2] = pods(NOW)[2]
    view, memory = decide(snapshot(tuple(gap), now=NOW + STEP), POLICY, memory, NOW + STEP, WINDOW)
    assert (view.values[CACHE].value, view.values[DESIRED].value) == (2.0, 3.0), view.proposals
    view, _ = decide(snapshot(tuple(pods(NOW + 2 * STEP)), now=NOW + 2 * STEP), POLICY, memory, NOW + 2 * STEP,
                     WINDOW)
    served = view.values[CACHE].value
    assert view.values[CACHE].raw == 0.0 and served is not None and 0.0 < served < 2.0



@PROPERTIES
@given(
    before=st.lists(load, min_size=2, max_size=12),
    data=st.data(),
)
# An idle pod of three whose GPU collector fails while ModelMesh is read: M2(0.95, 0.3, 0.3, 0.3) = 0.541, over the
# pods with a GPU reading alone 0.601 (tests/e2e/test_gap_no_rise_e2e.py).
@example(before=[(0.95, 50.0), (0.3, 50.0), (0.3, 50.0), (0.3, 50.0)], data=None)
def test_a_partial_gap_serves_what_the_signals_last_values_would(
    before: Sequence[Load], data: st.DataObject | None,
) -> None:
    """As above, with gaps of one signal on a pod still read, as the sources give them: its GPU busy gone while
    its load is read (the GPU collector failing: `held_gpu.with_last_gpu` keeps the last good GPU busy at its old
    time), or its load held while its GPU is read (the ModelMesh collector failing: the last good load, its old
    time, with the fresh GPU reading), beside whole pods gone. The reference is the same refresh with every gone
    signal fresh at its last value: the targets are the same, and what is served lies between the reference's and
    what the reference or the value before explain."""
    count = len(before)
    if data is None:
        gaps, after = ["", "", "", "gpu"], before
    else:
        gaps = data.draw(st.lists(st.sampled_from(["", "", "pod", "gpu", "load"]), min_size=count, max_size=count),
                         label="gaps")
        after = data.draw(st.lists(load, min_size=count, max_size=count), label="after")
    gpu_fresh = sum(gap == "" or gap == "load" for gap in gaps)
    load_fresh = sum(gap == "" or gap == "gpu" for gap in gaps)
    assume(min(gpu_fresh, load_fresh) >= POLICY.min_coverage * count)  # 503 below it: the property above says so
    now = NOW + STEP
    old, new = fleet(before, NOW), fleet(after, now)
    with_gap, reference = [], []
    for i, gap in enumerate(gaps):
        if gap == "pod":  # the whole pod's last good sample
            with_gap.append(old[i])
            reference.append(without_cache(fleet([before[i]], now)[0]))
        elif gap == "gpu":
            with_gap.append(with_last_gpu(replace(new[i], gpu_busy=None), old[i]))
            reference.append(replace(new[i], gpu_busy=old[i].gpu_busy))
        elif gap == "load":
            with_gap.append(replace(old[i], gpu_busy=new[i].gpu_busy, gpu_sampled_at=new[i].sampled_at))
            reference.append(without_cache(replace(old[i], sampled_at=new[i].sampled_at, gpu_busy=new[i].gpu_busy)))
        else:
            with_gap.append(new[i])
            reference.append(new[i])
    start_view, memory = decide(snapshot(tuple(old), now=NOW), POLICY, None, NOW, WINDOW)
    start = values(start_view)
    gap_view, _ = decide(snapshot(tuple(with_gap), now=now), POLICY, memory, now, WINDOW)
    ref_view, _ = decide(snapshot(tuple(reference), now=now), POLICY, memory, now, WINDOW)
    ref, gapped = values(ref_view), values(gap_view)
    for metric in (GPU, LOAD, CACHE):
        if ref[metric][1] is None and gapped[metric][1] is None:
            continue  # no fresh pod reports its cache: no cache question is asked
        assert_served_as_reference(metric, gapped[metric], ref[metric], start[metric][0])
    assert_served_as_reference(DESIRED, gapped[DESIRED], ref[DESIRED], start[DESIRED][0])
