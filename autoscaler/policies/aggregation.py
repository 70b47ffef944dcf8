"""Skew-aware aggregation: per-pod signals of one runtime → the runtime values of docs/design.md (Aggregation).

ModelMesh spreads load unevenly on purpose, so the runtime value of a per-pod signal is the power mean
`M_p(x) = (Σ x_i^p / n)^(1/p)`: the common value when load is even, inside `[mean, max]`, rising with skew,
and *falling* when idle pods are added (`n * M_p` grows like `n^(1-1/p)`), which is what gives the
recommendation a fixed point (docs/design.md, Recommendation).

Only Ready pods with fresh data count. A signal that is NaN, infinite or negative is treated as *absent*,
never as zero: a garbled reading must not look like an idle pod. Everything here is a pure function of the
pods, the policy and the `now` the caller passes in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from autoscaler.model import PodSample
from autoscaler.policies.policy import RuntimePolicy

_INF = math.inf


def clean(x: float | None) -> float | None:
    """A signal as the policies may use it: finite and non-negative, else absent (None)."""
    if x is None or not 0.0 <= x < _INF:  # NaN fails every comparison
        return None
    return x


def clean_sample(pod: PodSample) -> PodSample:
    """The pod with every invalid signal made absent; the same object when all are valid (the usual case).

    Sources promise validated values; this is the policies' own guard, kept cheap because it runs per pod
    per refresh. A non-finite `sampled_at` becomes None: such a pod has no usable data.
    """
    t = pod.sampled_at
    b = pod.gpu_busy
    r = pod.requests_per_second
    q = pod.queue_delay_s
    m = pod.cache_misses_per_second
    a = pod.lru_age_s
    c = pod.cache_used_ratio
    k = pod.models_loaded
    if (
        (t is None or -_INF < t < _INF)
        and (b is None or 0.0 <= b < _INF)
        and (r is None or 0.0 <= r < _INF)
        and (q is None or 0.0 <= q < _INF)
        and (m is None or 0.0 <= m < _INF)
        and (a is None or 0.0 <= a < _INF)
        and (c is None or 0.0 <= c < _INF)
        and (k is None or 0.0 <= k < _INF)
    ):
        return pod
    return replace(
        pod,
        sampled_at=t if t is not None and -_INF < t < _INF else None,
        gpu_busy=clean(b),
        requests_per_second=clean(r),
        queue_delay_s=clean(q),
        cache_misses_per_second=clean(m),
        lru_age_s=clean(a),
        cache_used_ratio=clean(c),
        models_loaded=clean(k),
    )


def power_mean(values: Sequence[float], p: float) -> float:
    """M_p = (Σ x^p / n)^(1/p) of non-negative finite values; 0 for no values; `p = inf` gives the max.

    Computed as `max * (Σ (x/max)^p / n)^(1/p)` so that large values or orders cannot overflow, and clamped
    to `[mean, max]` so float rounding never breaks the bounds the recommendation relies on. Even values
    give back exactly that value.

    Raises ValueError for `p < 1` (or NaN) and for a NaN, infinite or negative value: callers filter
    absent signals first (see `clean`), so a bad value here is a bug, not data.
    """
    if not p >= 1.0:
        raise ValueError(f"power mean order must be >= 1, got {p!r}")
    n = len(values)
    if n == 0:
        return 0.0
    top = 0.0
    low = _INF
    total = 0.0
    for x in values:
        if not 0.0 <= x < _INF:
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
    if p == _INF:
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


@dataclass(frozen=True, slots=True)
class Aggregate:
    """The runtime values of one refresh, with enough per-pod detail to explain them.

    Per-pod tuples follow the order of the pods given to `aggregate`. `n` counts the Ready pods with fresh
    data: it is the `n` of docs/design.md, so pods we cannot see never add invented load.
    """

    pods: tuple[PodSample, ...]  # the input pods with invalid signals made absent
    fresh: tuple[bool, ...]  # Ready and fresh: this pod's signals were used
    weights: tuple[float, ...]  # share of Σ r_i^p (0..1); 0 for pods not used or without a request rate
    ready: int
    n: int
    coverage: float  # n / ready; 0 when no pod is Ready (nothing to judge by: unknown, never "idle")
    gpu_busy: float | None  # M_p(b) over fresh pods reporting GPU busy; None when none does
    request_rate: float | None  # M_p(r) per pod; None when no fresh pod reports a request rate
    queue_delay_sum_s: float  # Σ q_i over fresh pods
    queue_delay_max_s: float | None  # max q_i; None when no fresh pod reports a queue delay
    cache_pressure: float | None  # 0 when some pod has room; None when no fresh pod reports its cache
    cache_full: bool  # no fresh pod has room and at least one is known full
    oldest_sample_at: float | None  # oldest `sampled_at` among the fresh pods: honest freshness

    @property
    def request_load(self) -> float | None:
        """`n * M_p(r)`: the effective request rate of the runtime (docs/design.md)."""
        return None if self.request_rate is None else self.n * self.request_rate


_ROOM, _FULL, _UNKNOWN = 0, 1, 2


def _cache_state(pod: PodSample, full_ratio: float) -> int:
    """Room, full, or unknown, for one pod with clean signals.

    Room: cache use below the ratio, or no model held (`models_loaded == 0`, or no LRU age — the exporter
    leaves it out when nothing is loaded — and no model count saying otherwise; an LRU age of 0 is ModelMesh's
    own "no LRU"). Unknown: the pod does not say enough (no cache use, or a model count without an age);
    an unknown pod neither gives the runtime room nor proves it full.
    """
    c = pod.cache_used_ratio
    k = pod.models_loaded
    a = pod.lru_age_s
    if (c is not None and c < full_ratio) or k == 0.0:
        return _ROOM
    if c is None and a is None and k is None:
        return _UNKNOWN
    if not a:  # None or 0: nothing in the LRU
        return _UNKNOWN if k is not None else _ROOM
    return _UNKNOWN if c is None else _FULL


def is_fresh(pod: PodSample, now: float, max_staleness_s: float) -> bool:
    """A pod is fresh when it has a sample no older than `max_staleness_s` (future stamps count as fresh)."""
    t = pod.sampled_at
    return t is not None and -_INF < t < _INF and now - t <= max_staleness_s


def aggregate(pods: Sequence[PodSample], policy: RuntimePolicy, now: float) -> Aggregate:
    """Aggregate the pods of one runtime at time `now` (docs/design.md, Aggregation).

    One pass over the pods with the signals in locals: this runs for every pod of every runtime each refresh.
    """
    p = policy.skew_order
    max_stale = policy.max_staleness_s
    full_ratio = policy.cache_full_ratio
    cleaned: list[PodSample] = []
    fresh: list[bool] = []
    gpu: list[float] = []
    rps: list[float] = []
    rps_at: list[int] = []  # index of each rate in `rps` among the pods, for the weights
    ready = n = 0
    queue_sum = 0.0
    queue_max: float | None = None
    oldest: float | None = None
    room = full = False
    global_lru = 0.0
    for i, raw in enumerate(pods):
        pod = clean_sample(raw)
        cleaned.append(pod)
        t = pod.sampled_at
        if not pod.ready or t is None or now - t > max_stale:
            fresh.append(False)
            if pod.ready:
                ready += 1
            continue
        ready += 1
        n += 1
        fresh.append(True)
        if oldest is None or t < oldest:
            oldest = t
        b = pod.gpu_busy
        if b is not None:
            gpu.append(b)
        r = pod.requests_per_second
        if r is not None:
            rps.append(r)
            rps_at.append(i)
        q = pod.queue_delay_s
        if q is not None:
            queue_sum += q
            if queue_max is None or q > queue_max:
                queue_max = q
        if room:
            continue  # one pod with room settles the cache question for the runtime
        state = _cache_state(pod, full_ratio)
        if state == _ROOM:
            room = True
        else:
            full = full or state == _FULL
            a = pod.lru_age_s
            if a is not None and a > global_lru:
                global_lru = a
    pressure: float | None
    if room:
        pressure = 0.0
    elif full and global_lru > 0.0:
        pressure = policy.target_lru_age_s / global_lru
    else:
        pressure = None
    return Aggregate(
        pods=tuple(cleaned),
        fresh=tuple(fresh),
        weights=_request_weights(len(cleaned), rps, rps_at, p),
        ready=ready,
        n=n,
        coverage=n / ready if ready else 0.0,
        gpu_busy=power_mean(gpu, p) if gpu else None,
        request_rate=power_mean(rps, p) if rps else None,
        queue_delay_sum_s=queue_sum,
        queue_delay_max_s=queue_max,
        cache_pressure=pressure,
        cache_full=pressure is not None and pressure > 0.0,
        oldest_sample_at=oldest,
    )


def _request_weights(count: int, rates: Sequence[float], at: Sequence[int], p: float) -> tuple[float, ...]:
    """Each pod's share of Σ r_i^p (how much it moves M_p(r)), for display; 0 for pods not counted.

    When every counted rate is 0 the load is even, so the counted pods share equally.
    """
    weights = [0.0] * count
    if not rates:
        return tuple(weights)
    top = max(rates)
    if top == 0.0:
        shares = [1.0 / len(rates)] * len(rates)
    else:
        powers = [(r / top) ** p for r in rates]
        total = math.fsum(powers)
        shares = [x / total for x in powers]
    for i, share in zip(at, shares, strict=True):
        weights[i] = share
    return tuple(weights)
