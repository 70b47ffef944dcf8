"""The values a view serves, each smoothed from its memory and held where its data is incomplete: the replica
count (capped, served rounded up) and the values of one signal each, usable only where the runtime is known and
the signal covers enough of the Ready pods. `decision.decide` picks what may fall and why a held value is held.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from autoscaler.model import ServedValue
from autoscaler.names import ServedMetric
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.recommendation import ceil_pods
from autoscaler.policies.runtime_aggregate import Aggregate
from autoscaler.policies.signals import SIGNAL_CACHE, SIGNAL_GPU, SIGNAL_REQUESTS
from autoscaler.policies.slots import slot_twin
from autoscaler.policies.smoothing import DESIRED_REPLICAS_SETTLE, SmoothState, smooth, smooth_state

__all__ = ["VALUE_SIGNAL", "desired_value", "signal_values"]

VALUE_SIGNAL: Final = {
    ServedMetric.GPU_BUSY: SIGNAL_GPU,
    ServedMetric.REQUEST_LOAD: SIGNAL_REQUESTS,
    ServedMetric.CACHE_PRESSURE: SIGNAL_CACHE,
}
"""The one signal each served value other than the replica count uses."""

_DESIRED: Final = ServedMetric.DESIRED_REPLICAS
_DESIRED_KEY: Final = _DESIRED.value
_SIGNAL_PLAN: Final = tuple((metric, signal, metric.value) for metric, signal in VALUE_SIGNAL.items())
"""The served values of one signal each, in the order views list them after the replica count
(`ServedMetric`'s): the metric, its signal, and its name as `held` keys it."""
assert (_DESIRED, *(metric for metric, _, _ in _SIGNAL_PLAN)) == tuple(ServedMetric)

_ValueTwin: Final = slot_twin(ServedValue, ("value", "raw", "timestamp"))


def desired_value(
    target: float | None,
    may_fall: bool,
    may_rise: str,
    policy: RuntimePolicy,
    before: Mapping[ServedMetric, SmoothState],
    at: float,
    oldest: float | None,
    held: dict[str, str],
    smoothed: dict[ServedMetric, SmoothState],
    values: dict[ServedMetric, ServedValue],
) -> None:
    """The replica count, added to `values`: usable when `target` is known (the recommendation), may fall when
    `may_fall` (every signal of its terms complete), capped, served rounded up. Adds its state to `smoothed`
    and, when it is held up, its reason (`may_rise`) to `held`."""
    state = smooth(before.get(_DESIRED), target, at, policy.scale_down_tau_s, may_fall, DESIRED_REPLICAS_SETTLE)
    served: float | None = None
    if state is not None:
        # Never above the upper bound (docs/design.md, Bounds: a fall from far above the cap would otherwise take
        # `tau * ln(value / cap)` before the HPA sees any change).
        cap = policy.max_replicas
        if cap is not None and state.value > cap:
            state = smooth_state(float(cap), state.updated_at)
        smoothed[_DESIRED] = state
        if target is not None:
            if not may_fall and target < state.value:
                held.setdefault(_DESIRED_KEY, may_rise)
            served = float(ceil_pods(state.value))
    value = _ValueTwin()  # ServedValue(served, target, oldest), through its twin (`slots`)
    value.value, value.raw, value.timestamp = served, target, oldest
    value.__class__ = ServedValue
    values[_DESIRED] = value


def signal_values(
    agg: Aggregate,
    known: bool,
    pods_complete: bool,
    may_rise: str,
    min_coverage: float,
    before: Mapping[ServedMetric, SmoothState],
    at: float,
    tau: float,
    held: dict[str, str],
    smoothed: dict[ServedMetric, SmoothState],
    values: dict[ServedMetric, ServedValue],
) -> None:
    """The values of one signal each, added to `values` in view order (`_SIGNAL_PLAN`): usable when the runtime
    is `known` and the signal fresh on at least `min_coverage` of the Ready pods, may fall when it misses on
    none and `pods_complete` (every Ready pod fresh, none held: `unready_pods`). Adds their states to `smoothed`
    and why one is held (`may_rise`) to `held`."""
    by_signal = agg.signals
    oldest = agg.oldest_sample_at
    ready = agg.ready
    value_twin = _ValueTwin
    request_rate = agg.request_rate
    # (`zip` without `strict`: the lengths are equal here, and any keyword sends `zip` down its slow path)
    for (metric, signal, key), raw in zip(_SIGNAL_PLAN, (  # noqa: B905
        agg.gpu_busy,
        None if request_rate is None else agg.rate_pods * request_rate,
        agg.cache_pressure,
    )):
        stats = by_signal[signal]
        fresh = stats.fresh
        target: float | None
        if known and fresh > 0 and stats.coverage >= min_coverage:  # usable
            may_fall = stats.missing == 0 and pods_complete
            target = raw
        else:
            may_fall = False
            target = None
            if known and fresh + stats.missing > 0:  # present, under coverage
                held[key] = (f"{signal} fresh on {fresh} of {ready} ready pods "
                             f"(< {min_coverage:.0%}); unknown (503), memory kept")
        state = smooth(before.get(metric), target, at, tau, may_fall)
        served = None
        if state is not None:
            smoothed[metric] = state
            if target is not None:  # (then usable)
                served = state.value
                if not may_fall and target < served:
                    held.setdefault(key, may_rise)
        value = value_twin()
        value.value, value.raw, value.timestamp = served, target, oldest
        value.__class__ = ServedValue
        values[metric] = value
