"""Skew-aware aggregation: per-pod signals of one runtime → the runtime values of docs/design.md (Aggregation).

ModelMesh spreads load unevenly on purpose, so the runtime value of a per-pod signal is the power mean
`M_p(x) = (Σ x_i^p / n)^(1/p)`: the common value when load is even, inside `[mean, max]`, rising with skew,
and *falling* when idle pods are added (`n * M_p` grows like `n^(1-1/p)`), which is what gives the
recommendation a fixed point (docs/design.md, Recommendation).

Freshness is per pod and per signal (§6): the GPU signal has its own timestamp, the load and cache signals
share the ModelMesh collector's. A signal counts on a pod when the pod is Ready, the signal's timestamp is
fresh and the pod reports it. Where it does not, on a pod that should have it (other fresh pods report it,
or the runtime reported it before: `expected`), the signal is *missing* there, and the decision holds every
value that uses it. A signal that is NaN, infinite or negative is treated as *absent*, never as zero: a
garbled reading must not look like an idle pod. Everything here is a pure function of the
pods, the policy and the `now` the caller passes in.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from autoscaler.model import PodSample
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.slots import slot_builder

_INF = math.inf


def clean(x: float | None) -> float | None:
    """A signal as the policies may use it: finite and non-negative, else absent (None)."""
    if x is None or not 0.0 <= x < _INF:  # NaN fails every comparison
        return None
    return x


def clean_sample(pod: PodSample) -> PodSample:
    """The pod with every invalid signal made absent; the same object when all are valid (the usual case).

    Sources promise validated values; this is the policies' own guard, kept cheap because it runs per pod
    per refresh. A non-finite `sampled_at` (or `gpu_sampled_at`) becomes None: no usable data of that kind.
    """
    t = pod.sampled_at
    g = pod.gpu_sampled_at
    b = pod.gpu_busy
    r = pod.requests_per_second
    q = pod.queue_delay_s
    m = pod.cache_misses_per_second
    a = pod.lru_age_s
    c = pod.cache_used_ratio
    k = pod.models_loaded
    if (
        (t is None or -_INF < t < _INF)
        and (g is None or -_INF < g < _INF)
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
        gpu_sampled_at=g if g is not None and -_INF < g < _INF else None,
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


SIGNAL_GPU: Final = "gpu"
SIGNAL_REQUESTS: Final = "requests"
SIGNAL_QUEUE: Final = "queue"
SIGNAL_CACHE: Final = "cache"
SIGNALS: Final = (SIGNAL_GPU, SIGNAL_REQUESTS, SIGNAL_QUEUE, SIGNAL_CACHE)
"""The per-pod signals whose freshness is judged one by one (§6)."""

FRESH: Final = "fresh"
STALE: Final = "stale"
MISSING: Final = "missing"
NONE: Final = "none"
"""A signal's state on one pod: fresh; stale (its timestamp too old or never read); missing (absent while
expected); none (the runtime has no such signal). Not-Ready pods are always "none": they are left out."""


@dataclass(frozen=True, slots=True)
class SignalStats:
    """How well one signal is covered this refresh: the counts behind its coverage and hold rules."""

    fresh: int  # Ready pods on which it is fresh: the `n` of the values and terms that use it
    missing: int  # Ready pods on which it is stale or absent although expected
    coverage: float  # fresh / Ready pods (0 when no pod is Ready)

    @property
    def present(self) -> bool:
        """Some Ready pod has it fresh, or should have: the signal belongs to this runtime."""
        return self.fresh + self.missing > 0

    @property
    def complete(self) -> bool:
        """No Ready pod misses it: values that use it may fall."""
        return self.missing == 0


@dataclass(frozen=True, slots=True)
class Aggregate:
    """The runtime values of one refresh, with enough per-pod detail to explain them.

    Per-pod tuples follow the order of the pods given to `aggregate`. `n` counts the Ready pods with fresh
    load data (the ModelMesh collector); each signal's own count is in `signals`: pods we cannot see never
    add invented load.
    """

    pods: tuple[PodSample, ...]  # the input pods with invalid signals made absent
    fresh: tuple[bool, ...]  # Ready with fresh load data (the ModelMesh collector)
    weights: tuple[float, ...]  # share of Σ r_i^p (0..1); 0 for pods not used or without a request rate
    ready: int
    n: int
    coverage: float  # n / ready; 0 when no pod is Ready (nothing to judge by: unknown, never "idle")
    gpu_busy: float | None  # M_p(b) over pods with the GPU fresh; None when none has
    request_rate: float | None  # M_p(r) per pod; None when no pod has a fresh request rate
    queue_delay_sum_s: float  # Σ q_i over pods with the queue fresh
    queue_delay_max_s: float | None  # max q_i; None when no pod has a fresh queue delay
    cache_pressure: float | None  # §5; 0 when some pod has room; None when no fresh pod reports its cache
    cache_full: bool  # no fresh pod has room and at least one is known full
    oldest_sample_at: float | None  # oldest timestamp among the signals used: honest freshness
    queue_excess_s: float = 0.0  # Σ max(0, q_i - target_queue_delay_s): the backlog beyond the target
    saturated: int = 0  # pods with q_i > target_queue_delay_s
    signals: Mapping[str, SignalStats] = field(default_factory=dict)
    pod_signals: tuple[tuple[tuple[str, str], ...], ...] = ()  # per pod: (signal, state) for each signal

    @property
    def request_load(self) -> float | None:
        """`n_r * M_p(r)`: the effective request rate of the runtime (docs/design.md)."""
        if self.request_rate is None:
            return None
        return self.stats(SIGNAL_REQUESTS).fresh * self.request_rate

    def stats(self, signal: str) -> SignalStats:
        """The coverage of one signal; an aggregate built without per-signal detail counts `n` for all."""
        found = self.signals.get(signal)
        if found is not None:
            return found
        return SignalStats(fresh=self.n, missing=self.ready - self.n, coverage=self.coverage)


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
    """A pod's load data is fresh when no older than `max_staleness_s` (future stamps count as fresh)."""
    return _fresh_time(pod.sampled_at, now, max_staleness_s)


def _fresh_time(t: float | None, now: float, max_staleness_s: float) -> bool:
    return t is not None and -_INF < t < _INF and now - t <= max_staleness_s


def gpu_time(pod: PodSample) -> float | None:
    """When the pod's GPU reading was taken: its own stamp, else the pod's one stamp (sources that know one)."""
    return pod.gpu_sampled_at if pod.gpu_sampled_at is not None else pod.sampled_at


def aggregate(
    pods: Sequence[PodSample],
    policy: RuntimePolicy,
    now: float,
    seen: Collection[str] = frozenset(),
) -> Aggregate:
    """Aggregate the pods of one runtime at time `now` (DESIGN §5), judging freshness per signal (§6).

    `seen`: the signals the runtime reported at an earlier refresh (the decision's memory). A signal in it
    that no pod reports now is missing everywhere, not gone: its values are held, never lowered.

    One pass over the pods, reading each field once and allocating nothing per pod but what the result
    holds (this runs for every pod on every refresh: 10,000 pods must cost milliseconds). Whether a signal
    is *expected* depends on all pods, so each Ready pod's signal states are first kept as a small code
    (`_state_code`) and turned into shared state tuples (`_states`) once the pass is over.
    """
    p = policy.skew_order
    max_stale = policy.max_staleness_s
    full_ratio = policy.cache_full_ratio
    target_q = policy.target_queue_delay_s
    cleaned: list[PodSample] | None = None  # made at the first pod that needs cleaning (rarely)
    inf, minus_inf = _INF, -_INF
    codes: list[int] = []
    load_fresh: list[bool] = []
    ready = n = 0
    fresh_g = fresh_r = fresh_q = fresh_c = 0
    gpu: list[float] = []
    rps: list[float] = []
    rps_at: list[int] = []
    queue_sum = excess = 0.0
    saturated = 0
    queue_max: float | None = None
    oldest: float | None = None
    room = full = False
    global_lru = 0.0
    # Bound once: up to five appends per pod.
    add_code, add_load, add_gpu = codes.append, load_fresh.append, gpu.append
    add_rps, add_rps_at = rps.append, rps_at.append
    for i, pod in enumerate(pods):
        t = pod.sampled_at
        g = pod.gpu_sampled_at
        b = pod.gpu_busy
        r = pod.requests_per_second
        q = pod.queue_delay_s
        a = pod.lru_age_s
        c = pod.cache_used_ratio
        k = pod.models_loaded
        m = pod.cache_misses_per_second
        if not (  # the check of `clean_sample`, inlined: a valid pod (the usual case) is kept as it is
            (t is None or minus_inf < t < inf)
            and (g is None or minus_inf < g < inf)
            and (b is None or 0.0 <= b < inf)
            and (r is None or 0.0 <= r < inf)
            and (q is None or 0.0 <= q < inf)
            and (m is None or 0.0 <= m < inf)
            and (a is None or 0.0 <= a < inf)
            and (c is None or 0.0 <= c < inf)
            and (k is None or 0.0 <= k < inf)
        ):
            if cleaned is None:
                cleaned = list(pods[:i])
            pod = clean_sample(pod)
            t, g, b, r, q = pod.sampled_at, pod.gpu_sampled_at, pod.gpu_busy, pod.requests_per_second, pod.queue_delay_s
            a, c, k = pod.lru_age_s, pod.cache_used_ratio, pod.models_loaded
        if cleaned is not None:
            cleaned.append(pod)
        if not pod.ready:
            add_code(_NOT_READY)
            add_load(False)
            continue
        ready += 1
        load_ok = t is not None and now - t <= max_stale
        gt = g if g is not None else t  # `gpu_time`
        gpu_ok = gt is not None and now - gt <= max_stale
        add_load(load_ok)
        use_g = gpu_ok and b is not None
        if load_ok:
            n += 1
            use_r = r is not None
            use_q = q is not None
            use_c = c is not None or k is not None or a is not None
        else:
            use_r = use_q = use_c = False
        add_code(use_g | use_r << 1 | use_q << 2 | use_c << 3 | gpu_ok << 4 | load_ok << 5)
        if use_g:
            fresh_g += 1
            add_gpu(b)  # type: ignore[arg-type]  # use_g: b is not None
            if oldest is None or gt < oldest:  # type: ignore[operator]  # use_g: gt is not None
                oldest = gt
        if (use_r or use_q or use_c) and (oldest is None or t < oldest):  # type: ignore[operator]  # load_ok
            oldest = t
        if use_r:
            fresh_r += 1
            add_rps(r)  # type: ignore[arg-type]
            add_rps_at(i)
        if use_q:
            fresh_q += 1
            queue_sum += q  # type: ignore[operator]
            if q > target_q:  # type: ignore[operator]
                excess += q - target_q  # type: ignore[operator]
                saturated += 1
            if queue_max is None or q > queue_max:  # type: ignore[operator]
                queue_max = q
        if not use_c:
            continue
        fresh_c += 1
        if room:
            continue  # one pod with room settles the cache question for the runtime
        state = _cache_state(pod, full_ratio)
        if state == _ROOM:
            room = True
        else:
            full = full or state == _FULL
            if a is not None and a > global_lru:
                global_lru = a
    pressure: float | None
    if room:
        pressure = 0.0
    elif full and global_lru > 0.0:
        pressure = policy.target_lru_age_s / global_lru
    else:
        pressure = None
    fresh_count = (fresh_g, fresh_r, fresh_q, fresh_c)
    expected = (fresh_g > 0 or SIGNAL_GPU in seen, fresh_r > 0 or SIGNAL_REQUESTS in seen,
                fresh_q > 0 or SIGNAL_QUEUE in seen, fresh_c > 0 or SIGNAL_CACHE in seen)
    # A Ready pod on which an expected signal is not fresh misses it.
    signals = {
        s: _signal_stats(fresh_count[j], ready - fresh_count[j] if expected[j] else 0, ready)
        for j, s in enumerate(SIGNALS)
    }
    states = _states(expected)
    return _aggregate(  # Aggregate(...), through its slots (`slots`): positional, in field order
        tuple(cleaned) if cleaned is not None else pods if type(pods) is tuple else tuple(pods),  # pods
        tuple(load_fresh),  # fresh
        _request_weights(len(pods), rps, rps_at, p),  # weights
        ready,
        n,
        n / ready if ready else 0.0,  # coverage
        power_mean(gpu, p) if gpu else None,  # gpu_busy
        power_mean(rps, p) if rps else None,  # request_rate
        queue_sum,  # queue_delay_sum_s
        queue_max,  # queue_delay_max_s
        pressure,  # cache_pressure
        pressure is not None and pressure > 0.0,  # cache_full
        oldest,  # oldest_sample_at
        excess,  # queue_excess_s
        saturated,
        signals,
        tuple([states[code] for code in codes]),  # pod_signals
    )


_aggregate: Final = slot_builder(Aggregate, (
    "pods", "fresh", "weights", "ready", "n", "coverage", "gpu_busy", "request_rate", "queue_delay_sum_s",
    "queue_delay_max_s", "cache_pressure", "cache_full", "oldest_sample_at", "queue_excess_s", "saturated",
    "signals", "pod_signals",
))


@functools.lru_cache(maxsize=4096)
def _signal_stats(fresh: int, missing: int, ready: int) -> SignalStats:
    """Shared, immutable stats: a runtime's counts repeat from refresh to refresh, and building four of them
    per runtime cost more than the rest of its aggregation."""
    return SignalStats(fresh=fresh, missing=missing, coverage=fresh / ready if ready else 0.0)


_NOT_READY: Final = 64
"""The state code of a pod that is not Ready: every signal "none". Other codes (`aggregate`) hold, per
signal of SIGNALS, whether it is used (bits 0-3), and whether the GPU (bit 4) and the load (bit 5)
timestamps are fresh."""

_STATE_TABLES: dict[tuple[bool, ...], tuple[tuple[tuple[str, str], ...], ...]] = {}
"""State code → (signal, state) pairs, per `expected` mask (16 masks x 65 codes at most, built on first use)."""


def _states(expected: tuple[bool, ...]) -> tuple[tuple[tuple[str, str], ...], ...]:
    """Every pod's possible signal states for one `expected` mask, indexed by state code."""
    table = _STATE_TABLES.get(expected)
    if table is None:
        rows = []
        for code in range(_NOT_READY + 1):
            if code == _NOT_READY:
                rows.append(tuple((s, NONE) for s in SIGNALS))
                continue
            time_ok = (bool(code & 16), bool(code & 32), bool(code & 32), bool(code & 32))
            rows.append(tuple(
                (s, FRESH if code >> j & 1 else (MISSING if time_ok[j] else STALE) if expected[j] else NONE)
                for j, s in enumerate(SIGNALS)
            ))
        table = _STATE_TABLES[expected] = tuple(rows)
    return table


def _request_weights(count: int, rates: Sequence[float], at: Sequence[int], p: float) -> tuple[float, ...]:
    """Each pod's share of Σ r_i^p (how much it moves M_p(r)), for display; 0 for pods not counted.

    When every counted rate is 0 the load is even, so the counted pods share equally.
    """
    if not rates:
        return (0.0,) * count
    top = max(rates)
    if top == 0.0:
        shares = [1.0 / len(rates)] * len(rates)
    else:
        powers = [(r / top) ** p for r in rates]
        total = math.fsum(powers)
        shares = [x / total for x in powers]
    if len(shares) == count:  # every pod counted (the usual case): `at` is 0, 1, 2, ...
        return tuple(shares)
    weights = [0.0] * count
    for i, share in zip(at, shares, strict=True):
        weights[i] = share
    return tuple(weights)
