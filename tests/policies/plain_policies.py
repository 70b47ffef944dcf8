"""The policies' previous, plain implementation of the per-pod work, kept as the oracle of the fast one.

`autoscaler.policies.aggregation.aggregate`, `autoscaler.policies.podviews.pod_views` (and the views that
`examine_pods` builds while it ranks) and `ranking.rank_pods` were rewritten for speed (one pass over the
pods, shared state tuples, PodViews filled through a twin); these are the versions they replaced, line for
line, so that `test_fast_path.py` can check on random pods that both give the same results. Shared helpers
that did not change are imported, not copied. `plain_power_mean` is the power mean before its max, min and
sums moved to builtins."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Sequence

from autoscaler.model import PodSample, PodView, PodViews
from autoscaler.policies.aggregation import HELD_SAMPLE_S
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.power_mean import power_mean, request_weights
from autoscaler.policies.ranking import COST_BUCKETS, COST_SPACING, NeedTerm, Ranking, UniqueCopyTerm, WeightedTerm
from autoscaler.policies.runtime_aggregate import Aggregate
from autoscaler.policies.samples import (
    CACHE_FULL,
    CACHE_ROOM,
    cache_state,
    clean_sample,
    fresh_time,
    gpu_time,
    lru_age,
)
from autoscaler.policies.signals import ABSENT, FRESH, MISSING, NONE, SIGNAL_MODELS, SIGNALS, STALE, SignalStats
from autoscaler.policies.smoothing import SmoothState


def _reports(pod: PodSample) -> tuple[bool, bool, bool, bool]:
    """Whether the pod reports each of SIGNALS at all (whatever its age)."""
    cache = pod.cache_used_ratio is not None or pod.models_loaded is not None or pod.lru_age_s is not None
    return (
        pod.gpu_busy is not None,
        pod.requests_per_second is not None,
        pod.queue_delay_s is not None,
        cache,
    )


def plain_aggregate(
    pods: Sequence[PodSample],
    policy: RuntimePolicy,
    now: float,
    seen: Collection[str] = frozenset(),
) -> Aggregate:
    """Aggregate the pods of one runtime at time `now` (DESIGN §5), judging freshness per signal (§6).

    `seen`: the signals the runtime reported at an earlier refresh (the decision's memory). A signal in it
    that no pod reports now is missing everywhere, not gone: its values are held, never lowered.
    """
    p = policy.skew_order
    max_stale = policy.max_staleness_s
    full_ratio = policy.cache_full_ratio
    target_q = policy.target_queue_delay_s
    cleaned = [clean_sample(raw) for raw in pods]
    # First pass: which signal is fresh on which Ready pod, so "expected" is known before states are given.
    usable: list[tuple[bool, bool, bool, bool]] = []
    load_fresh: list[bool] = []
    expected = [s in seen for s in SIGNALS]
    for pod in cleaned:
        if not pod.ready:
            usable.append((False, False, False, False))
            load_fresh.append(False)
            continue
        load_ok = fresh_time(pod.sampled_at, now, max_stale)
        gpu_ok = fresh_time(gpu_time(pod), now, max_stale) and not pod.gpu_held  # a kept last value: missing now
        has = _reports(pod)
        use = (gpu_ok and has[0], load_ok and has[1], load_ok and has[2], load_ok and has[3])
        usable.append(use)
        load_fresh.append(load_ok)
        for k in range(4):
            expected[k] = expected[k] or use[k]
        expected[0] = expected[0] or has[0]  # a GPU reading whose own time is stale: missing, not absent

    ready = n = gpu_absent = 0
    fresh_count = [0, 0, 0, 0]
    missing_count = [0, 0, 0, 0]
    pod_states: list[tuple[tuple[str, str], ...]] = []
    gpu: list[float] = []
    rps: list[float] = []
    # Held (stale) pods' last good GPU busy and request rate, taken within HELD_SAMPLE_S: counted in the power
    # means at that value, in the pods' order with the fresh ones (docs/design.md, Missing data: a gap neither
    # lowers nor raises a value).
    counted_gpu: list[float] = []
    counted_rps: list[float] = []
    counted_at: list[int] = []
    held_from = now - HELD_SAMPLE_S
    excess = 0.0
    saturated = 0
    oldest: float | None = None  # the `timestamp`: every sample the values stand on
    fresh_oldest: float | None = None  # the fresh signals used alone: the source's lag
    room = full = False
    global_lru = 0.0
    for i, pod in enumerate(cleaned):
        use = usable[i]
        if not pod.ready:
            pod_states.append(tuple((s, NONE) for s in SIGNALS))
            continue
        ready += 1
        if load_fresh[i]:
            n += 1
        # Fresh, no GPU reading at all, and its exporter says it has no GPU collector: its GPU is absent.
        absent = (load_fresh[i] and pod.gpu_busy is None and pod.gpu_sampled_at is None and pod.no_gpu_collector)
        gpu_absent += absent
        states = []
        for k, signal in enumerate(SIGNALS):
            if use[k]:
                fresh_count[k] += 1
                states.append((signal, FRESH))
            elif k == 0 and absent:
                states.append((signal, ABSENT))
            elif expected[k]:
                missing_count[k] += 1
                t = gpu_time(pod) if k == 0 else pod.sampled_at
                held = k == 0 and pod.gpu_held and pod.gpu_busy is not None  # its last value, as a stale one's
                states.append((signal, MISSING if fresh_time(t, now, max_stale) and not held else STALE))
            else:
                states.append((signal, NONE))
        pod_states.append(tuple(states))
        if use[0]:
            b = pod.gpu_busy
            assert b is not None
            gpu.append(b)
            counted_gpu.append(b)
            oldest = _older(oldest, gpu_time(pod))
            fresh_oldest = _older(fresh_oldest, gpu_time(pod))
        if use[1] or use[2] or use[3]:
            oldest = _older(oldest, pod.sampled_at)
            fresh_oldest = _older(fresh_oldest, pod.sampled_at)
        # Values held for a stale pod (or a stale GPU reading) stand on its last sample too.
        if not load_fresh[i]:
            oldest = _older(oldest, _a_time(pod.sampled_at))
        if pod.gpu_busy is not None and (pod.gpu_held or not fresh_time(gpu_time(pod), now, max_stale)):
            oldest = _older(oldest, _a_time(gpu_time(pod)))
            if _recent(gpu_time(pod), held_from):  # a pod never read has no last good value
                counted_gpu.append(pod.gpu_busy)
        recent = not load_fresh[i] and _recent(pod.sampled_at, held_from)
        if recent and pod.requests_per_second is not None:
            counted_rps.append(pod.requests_per_second)
            counted_at.append(i)
        if use[1]:
            r = pod.requests_per_second
            assert r is not None
            rps.append(r)
            counted_rps.append(r)
            counted_at.append(i)
        if use[2]:
            q = pod.queue_delay_s
            assert q is not None
            if q > target_q:
                excess += q - target_q
                saturated += 1
        if not use[3] or room:
            continue  # one pod with room settles the cache question for the runtime (the fresh ones answer it)
        state = cache_state(pod, full_ratio)
        if state == CACHE_ROOM:
            room = True
        else:
            full = full or state == CACHE_FULL
            a = lru_age(pod, state)
            if a is not None and a > global_lru:
                global_lru = a
    pressure: float | None
    if room:
        pressure = 0.0
    elif full and global_lru > 0.0:
        pressure = policy.target_lru_age_s / global_lru
    else:
        pressure = None
    judged = [ready - gpu_absent, ready, ready, ready]  # the Ready pods that should have each signal
    signals = {
        s: SignalStats(
            fresh=fresh_count[k], missing=missing_count[k],
            coverage=fresh_count[k] / judged[k] if judged[k] else 0.0, absent=gpu_absent if k == 0 else 0,
        )
        for k, s in enumerate(SIGNALS)
    }
    # The cache need's inputs: the copies the Ready pods with fresh load data served within target_lru_age_s
    # (two of a model at most),
    # and the mean of their capacities in models (models loaded / share of the cache used).
    reporting = [pod for i, pod in enumerate(cleaned)
                 if pod.ready and load_fresh[i] and pod.recent_models is not None]
    models_in_use: int | None = None
    if reporting:
        since = now - policy.target_lru_age_s
        servers = Counter(model for reporter in reporting
                          for model, at in (reporter.recent_models or {}).items() if at >= since)
        models_in_use = sum(min(2, count) for count in servers.values())  # two copies of a model at most
    capacities = [pod.models_loaded / pod.cache_used_ratio for pod in reporting
                  if pod.models_loaded and pod.cache_used_ratio]
    expected_models = bool(reporting) or SIGNAL_MODELS in seen
    # The exporters' shortest horizon: a setting of every Ready pod reporting per-model use, fresh or not.
    horizons = [pod.recency_horizon_s for pod in cleaned
                if pod.ready and pod.recent_models is not None and pod.recency_horizon_s is not None]
    return Aggregate(
        pods=tuple(cleaned),
        fresh=tuple(load_fresh),
        weights=request_weights(len(cleaned), counted_rps if rps else [], counted_at, p),
        ready=ready,
        n=n,
        coverage=n / ready if ready else 0.0,
        gpu_busy=power_mean(counted_gpu, p) if gpu else None,
        request_rate=power_mean(counted_rps, p) if rps else None,
        cache_pressure=pressure,
        cache_full=pressure is not None and pressure > 0.0,
        oldest_sample_at=oldest,
        queue_excess_s=excess,
        saturated=saturated,
        signals=signals,
        pod_signals=tuple(pod_states),
        models_in_use=models_in_use,
        pod_capacity=sum(capacities) / len(capacities) if capacities else None,
        models_missing=n - len(reporting) if expected_models else 0,
        fresh_sample_at=fresh_oldest,
        recency_horizon_s=min(horizons) if horizons else None,
        gpu_pods=len(counted_gpu) if gpu else 0,
        rate_pods=len(counted_rps) if rps else 0,
        cache_pods=fresh_count[3],  # the fresh pods alone: a stale pod's last cache state counts in nothing
    )


def _recent(t: float | None, held_from: float) -> bool:
    """Whether a stale pod's last sample, taken at `t`, still stands in for it (`HELD_SAMPLE_S`)."""
    return t is not None and t >= held_from


def _a_time(t: float | None) -> float | None:
    """`t` where it is a time, else None (NaN and the infinities tell no time)."""
    return t if t is not None and math.isfinite(t) else None


def _older(oldest: float | None, t: float | None) -> float | None:
    if t is None:
        return oldest
    return t if oldest is None or t < oldest else oldest


def plain_pod_views(agg: Aggregate, ranking: Ranking, now: float) -> PodViews:
    """One PodView per pod, in the snapshot's order (as the pods of a view)."""
    views = []
    states = agg.pod_signals or ((),) * len(agg.pods)
    unique = ranking.unique_models or (None,) * len(agg.pods)
    for pod, fresh, weight, need, cost, signals, unique_models in zip(
        agg.pods, agg.fresh, agg.weights, ranking.needs, ranking.costs, states, unique, strict=True
    ):
        sampled_at = pod.sampled_at
        views.append(PodView(
            name=pod.name,
            ready=pod.ready,
            fresh=fresh,
            age_s=None if sampled_at is None else max(0.0, now - sampled_at),
            gpu_busy=pod.gpu_busy,
            requests_per_second=pod.requests_per_second,
            queue_delay_s=pod.queue_delay_s,
            lru_age_s=pod.lru_age_s,
            cache_used_ratio=pod.cache_used_ratio,
            weight=weight,
            need=need,
            deletion_cost=cost,
            signals=signals,
            unique_models=unique_models,
        ))
    return PodViews.of(views)


def plain_unique_counts(pods: Sequence[PodSample], now: float, window_s: float) -> list[int | None]:
    """`ranking.UniqueCopyTerm.counts`, the plain way: each pod's set of models served in the window, less the
    union of the other pods' sets."""
    recent = [None if pod.recent_models is None else {m for m, t in pod.recent_models.items() if now - window_s <= t}
              for pod in pods]
    unique: list[int | None] = []
    for i, mine in enumerate(recent):
        if mine is None:
            unique.append(None)
            continue
        others: set[str] = set()
        for j, theirs in enumerate(recent):
            if j != i and theirs is not None:
                others |= theirs
        unique.append(len(mine - others))
    return unique


def plain_unique_copies(pods: Sequence[PodSample], now: float, window_s: float) -> list[float | None]:
    """`ranking.UniqueCopyTerm`'s scores, the plain way: the counts over the largest count."""
    unique = plain_unique_counts(pods, now, window_s)
    top = max((u for u in unique if u is not None), default=0)
    return [None if u is None else (u / top if top else 0.0) for u in unique]


def plain_scores(term: NeedTerm, pods: Sequence[PodSample], now: float) -> Sequence[float | None]:
    """A term's scores, the unique-copy term's by `plain_unique_copies`."""
    if isinstance(term, UniqueCopyTerm):
        return plain_unique_copies(pods, now, term.window_s)
    return term.scores(pods, now)


def plain_pod_needs(pods: Sequence[PodSample], terms: Sequence[WeightedTerm], now: float) -> list[float | None]:
    """`ranking.pod_needs` before its terms were summed in one pass: a list pass per term."""
    ready = [pod for pod in pods if pod.ready]
    sums = [0.0] * len(ready)
    total_weight = 0.0
    for wt in terms:
        w = wt.weight
        if not w > 0.0:
            continue
        scores = plain_scores(wt.term, ready, now)
        if all(x is None for x in scores):
            continue
        total_weight += w
        sums = [s if x is None else s + w * x for s, x in zip(sums, scores, strict=True)]
    scale = 1.0 / total_weight if total_weight > 0.0 else 0.0
    ready_needs = [v if (v := s * scale) <= 1.0 else 1.0 for s in sums]
    if len(ready) == len(pods):
        return list(ready_needs)
    it = iter(ready_needs)
    return [next(it) if pod.ready else None for pod in pods]


def plain_rank_pods(pods: Sequence[PodSample], terms: Sequence[WeightedTerm], now: float) -> Ranking:
    """`ranking.rank_pods` as it was before the one-pass needs."""
    needs = plain_pod_needs(pods, terms, now)
    top = COST_BUCKETS - 1
    costs = tuple(
        None if need is None else (b if (b := int(need * COST_BUCKETS)) < top else top) * COST_SPACING for need in needs
    )
    unique: tuple[int | None, ...] | None = None
    window = next((wt.term.window_s for wt in terms if isinstance(wt.term, UniqueCopyTerm)), None)
    ready = [pod for pod in pods if pod.ready]
    if window is not None and any(pod.recent_models is not None for pod in ready):
        counts = iter(plain_unique_counts(ready, now, window))
        unique = tuple(next(counts) if pod.ready else None for pod in pods)
    return Ranking(needs=tuple(needs), costs=costs, unique_models=unique)


def plain_power_mean(values: Sequence[float], p: float) -> float:
    """`power_mean` as it was: one Python loop checks the values and finds their max, min and sum."""
    if not p >= 1.0:
        raise ValueError(f"power mean order must be >= 1, got {p!r}")
    n = len(values)
    if n == 0:
        return 0.0
    top = 0.0
    low = math.inf
    total = 0.0
    for x in values:
        if not 0.0 <= x < math.inf:
            raise ValueError(f"power mean of an invalid value {x!r}: values must be finite and >= 0")
        total += x
        if x > top:
            top = x
        if x < low:
            low = x
    if low == top:
        return top
    mean = total / n
    if p == 1.0:
        return min(mean, top)
    if p == math.inf:
        return top
    acc = 0.0
    if p == 2.0:
        for x in values:
            s = x / top
            acc += s * s
        scaled = math.sqrt(acc / n)
    else:
        for x in values:
            acc += (x / top) ** p
        scaled = (acc / n) ** (1.0 / p)
    return min(top, max(mean, top * scaled))


def plain_smooth(
    state: SmoothState | None,
    target: float | None,
    now: float,
    tau: float,
    may_fall: bool,
    settle: float = 0.0,
) -> SmoothState | None:
    """`smoothing.smooth` as it was before its builtin `min`/`max` calls and builder call were inlined; the
    rules are in its docstring."""
    if target is not None and math.isinf(target):
        target = None
    if state is None:
        return None if target is None else SmoothState(target, now)
    if target is None or (target < state.value and not may_fall):
        return SmoothState(state.value, max(now, state.updated_at))
    if target >= state.value:
        return SmoothState(target, now)
    dt = now - state.updated_at
    if dt <= 0.0:
        return state
    gap = (state.value - target) * math.exp(-dt / tau) if tau > 0.0 else 0.0
    if gap <= settle:
        return SmoothState(target, now)
    return SmoothState(min(state.value, target + gap), now)
