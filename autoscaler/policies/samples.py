"""What one pod's sample says, read on its own: which signals are valid, whether it is fresh, its cache state.

A signal that is NaN, infinite or negative is treated as *absent*, never as zero: a garbled reading must not
look like an idle pod. Nor as a huge load: one above its ceiling (`CEILINGS`), which no real pod reaches, is
absent too. Freshness is per pod and per signal (docs/design.md, Missing data): the GPU signal has its own timestamp,
the load and cache signals share the ModelMesh collector's.
"""

from __future__ import annotations

import math
import struct
import sys
from dataclasses import replace
from typing import Final

from autoscaler.model import PodSample
from exporter.signal_ceilings import CEILINGS as CEILINGS
from exporter.signal_ceilings import refusal as refusal

_INF: Final = math.inf


def clean(x: float | None) -> float | None:
    """A signal as the policies may use it: finite and non-negative, else absent (None)."""
    if x is None or not 0.0 <= x < _INF:  # NaN fails every comparison
        return None
    return x


def valid_value(raw: str) -> float | None:
    """A sample value as text (Prometheus's answers) as the policies may use it: a number, then `clean`'s rule,
    so that a value read from Prometheus is judged as one read from an exporter."""
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    return clean(value)


# The ceilings as plain floats: `clean_sample` runs for every pod at every refresh.
_TOP_GPU: Final = CEILINGS["gpu_busy"].limit
_TOP_RPS: Final = CEILINGS["requests_per_second"].limit
_TOP_QUEUE: Final = CEILINGS["queue_delay_s"].limit
_TOP_MISSES: Final = CEILINGS["cache_misses_per_second"].limit
_TOP_LRU_AGE: Final = CEILINGS["lru_age_s"].limit
_TOP_CACHE: Final = CEILINGS["cache_used_ratio"].limit
_TOP_MODELS: Final = CEILINGS["models_loaded"].limit


def plausible(field: str, x: float | None) -> float | None:
    """`clean`, and absent (None) above the signal's ceiling (`CEILINGS`)."""
    x = clean(x)
    return None if x is None or x > CEILINGS[field].limit else x


def clean_sample(pod: PodSample) -> PodSample:
    """The pod with every invalid signal made absent; the same object when all are valid (the usual case).

    What every `PodSample` producer guarantees (see `PodSample`), as one function: the simulator builds its
    samples through it, and the sources' tests hold their samples to it (`clean_sample(s) is s`). A
    non-finite `sampled_at` (or `gpu_sampled_at`) becomes None: no usable data of that kind.
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
    h = pod.recency_horizon_s
    if (
        (t is None or -_INF < t < _INF)
        and (g is None or -_INF < g < _INF)
        and (b is None or 0.0 <= b <= _TOP_GPU)
        and (r is None or 0.0 <= r <= _TOP_RPS)
        and (q is None or 0.0 <= q <= _TOP_QUEUE)
        and (m is None or 0.0 <= m <= _TOP_MISSES)
        and (a is None or 0.0 <= a <= _TOP_LRU_AGE)
        and (c is None or 0.0 <= c <= _TOP_CACHE)
        and (k is None or 0.0 <= k <= _TOP_MODELS)
        and (h is None or 0.0 <= h < _INF)
    ):
        return pod
    return replace(
        pod,
        sampled_at=t if t is not None and -_INF < t < _INF else None,
        gpu_sampled_at=g if g is not None and -_INF < g < _INF else None,
        gpu_busy=plausible("gpu_busy", b),
        requests_per_second=plausible("requests_per_second", r),
        queue_delay_s=plausible("queue_delay_s", q),
        cache_misses_per_second=plausible("cache_misses_per_second", m),
        lru_age_s=plausible("lru_age_s", a),
        cache_used_ratio=plausible("cache_used_ratio", c),
        models_loaded=plausible("models_loaded", k),
        recency_horizon_s=clean(h),
    )


def fresh_time(t: float | None, now: float, max_staleness_s: float) -> bool:
    """A timestamp no older than `max_staleness_s` at `now`; None and non-finite stamps are never fresh."""
    return t is not None and -_INF < t < _INF and now - t <= max_staleness_s


def oldest_fresh(now: float, max_staleness_s: float) -> float:
    """The oldest time that is fresh at `now`: for every finite `t`, `now - t <= max_staleness_s` (the float
    subtraction, as `fresh_time` does it) exactly when `t >= oldest_fresh(now, max_staleness_s)`; -inf when
    every time is fresh, inf when none is.

    For a pass over many pods: one compare per stamp instead of a subtraction that allocates a float. Exact
    because the rounded `now - t` never increases as `t` increases, so the fresh stamps are all those from
    the smallest fresh one on; that one is found by stepping from `now - max_staleness_s` float by float
    (one or two steps for clock-sized values), else by bisecting the floats' order. The last answer is kept:
    every runtime of a refresh asks the same question."""
    global _last_oldest_fresh
    last_now, last_max, oldest = _last_oldest_fresh
    if last_now == now and last_max == max_staleness_s:
        return oldest
    oldest = _oldest_fresh(now, max_staleness_s)
    _last_oldest_fresh = (now, max_staleness_s, oldest)
    return oldest


_last_oldest_fresh: tuple[float, float, float] = (math.nan, math.nan, math.nan)  # NaN matches no question
_MAX: Final = sys.float_info.max


def _oldest_fresh(now: float, max_staleness_s: float) -> float:
    def fresh(t: float) -> bool:
        return now - t <= max_staleness_s

    if not fresh(_MAX):  # (NaN `now` or bound, or a bound below -2 * max float: nothing is fresh)
        return _INF
    if fresh(-_MAX):
        return -_INF
    start = now - max_staleness_s
    if -_MAX <= start <= _MAX:
        t = start
        for _ in range(8):  # the smallest fresh time is next to the estimate for ordinary clocks and bounds
            if fresh(t):
                below = math.nextafter(t, -_INF)
                if not fresh(below):
                    return t
                t = below
            else:
                t = math.nextafter(t, _INF)
    # Bisect over the floats in order (their bit patterns, as ordered integers): fresh(-max) is False and
    # fresh(max) is True, and `fresh` is monotone in between.
    low, high = _ordinal(-_MAX), _ordinal(_MAX)
    while high - low > 1:
        mid = (low + high) // 2
        if fresh(_float_of(mid)):
            high = mid
        else:
            low = mid
    return _float_of(high)


def _ordinal(x: float) -> int:
    """Floats as integers in the same order (-0.0 and 0.0 next to each other)."""
    bits: int = struct.unpack("<q", struct.pack("<d", x))[0]
    return bits if bits >= 0 else -(bits & 0x7FFF_FFFF_FFFF_FFFF) - 1


def _float_of(n: int) -> float:
    """The float of an `_ordinal`."""
    bits = n if n >= 0 else -(n + 1) | -0x8000_0000_0000_0000
    x: float = struct.unpack("<d", struct.pack("<q", bits))[0]
    return x


def gpu_time(pod: PodSample) -> float | None:
    """When the pod's GPU reading was taken: its own stamp, else the pod's one stamp (sources that know one)."""
    return pod.gpu_sampled_at if pod.gpu_sampled_at is not None else pod.sampled_at


CACHE_ROOM, CACHE_FULL, CACHE_UNKNOWN = 0, 1, 2

JUST_USED_LRU_AGE_S: Final = 1.0
"""The LRU age a full pod with models and no age stands for: the exporter leaves the age out when it is 0 or less
(the copy just used, or added stamped ahead), so it is under the second the ages are read to. Read as no cache
signal, the worst thrash served no pressure (503) and dropped the cache term without a hold."""


def lru_age(pod: PodSample, state: int) -> float | None:
    """The age of the pod's least recently used copy, for the runtime's global LRU age: its reported age, or
    `JUST_USED_LRU_AGE_S` for a full pod that reports none."""
    a = pod.lru_age_s
    return a if a or state != CACHE_FULL else JUST_USED_LRU_AGE_S


def cache_state(pod: PodSample, full_ratio: float) -> int:
    """Room, full, or unknown, for one pod with clean signals.

    Room: cache use below the ratio, or no model held (`models_loaded == 0`, or no LRU age — the exporter
    leaves it out when nothing is loaded — and no model count saying otherwise; an LRU age of 0 is ModelMesh's
    own "no LRU"). Full: cache use at the ratio with an LRU age, or with models and no age, which the exporter
    leaves out when its least recently used copy was just used (the worst thrash: `JUST_USED_LRU_AGE_S`).
    Unknown: the pod does not say enough (no cache use, with an age or a model count); an unknown pod neither
    gives the runtime room nor proves it full.
    """
    c = pod.cache_used_ratio
    k = pod.models_loaded
    a = pod.lru_age_s
    if (c is not None and c < full_ratio) or k == 0.0:
        return CACHE_ROOM
    if c is None and a is None and k is None:
        return CACHE_UNKNOWN
    if not a and k is None:  # None or 0, and no model count: nothing in the LRU
        return CACHE_ROOM
    return CACHE_UNKNOWN if c is None else CACHE_FULL  # with models and no age: the LRU copy just used
