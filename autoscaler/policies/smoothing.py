"""Up fast, down slow, hold on gaps: the adapter's own scale-down rail (docs/design.md, Slow scale-down).

A served series rises at once (under-provisioning costs latency now) and falls exponentially towards a lower
target with time constant `tau`: `value = target + (prev - target) · exp(-dt / tau)`, so an HPA without a
`behavior` section still scales down gently. While a step is incomplete (a Ready pod stale or missing, the
source down, or the signal absent) the value may rise but never fall.

A hold also restarts the decay clock: time spent without full data earns no decay, so when data returns the
value falls from where it was held, as if the gap had not happened, rather than dropping by the decay the gap
would have allowed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from autoscaler.policies.slots import slot_builder, slot_twin

_INF: Final = math.inf


@dataclass(frozen=True, slots=True)
class SmoothState:
    """The served value of one series and when it was last stepped."""

    value: float
    updated_at: float


smooth_state: Final = slot_builder(SmoothState, ("value", "updated_at"))
"""SmoothState(value, updated_at) through its slots (see `slots`): for the decision's hot path."""
_twin: Final = slot_twin(SmoothState, ("value", "updated_at"))

DESIRED_REPLICAS_SETTLE: Final = 0.1
"""For the replica series, a fall ends once within this many pods of its target.

An exponential never reaches its target, and the served replica count is the smoothed value rounded *up*
(`ceil`, so that a fraction of demand still gets its pod), so without a settle band the last pod of every
scale-down would stay forever. With 0.1, a fall of one pod completes after `tau · ln 10 ≈ 2.3 tau`
(about 11.5 minutes at the default 300 s), in line with the shipped HPA's own 600 s stabilization window
plus one pod per 300 s.
"""


def smooth(
    state: SmoothState | None,
    target: float | None,
    now: float,
    tau: float,
    may_fall: bool,
    settle: float = 0.0,
) -> SmoothState | None:
    """Step one series to `now` towards `target`.

    - no state yet: start at the target (None stays None);
    - `target` None (unknown this step), or infinite: hold the value, restart the decay clock. An infinite
      target (a cache pressure over an LRU age of 1e-320 s) cannot be served, and once in the state it would
      never decay (`inf - target` stays infinite): the series would be unservable for good;
    - `target` at or above the value: rise at once;
    - below, and `may_fall` False: hold (clock restarted);
    - below, and `may_fall`: decay with time constant `tau` (`tau <= 0`: fall at once); once the remaining
      gap is at most `settle`, land on the target.

    A clock that steps backwards gives `dt = 0`: no decay, never a jump.

    Hand-optimised (four calls per runtime per refresh): its plain version is `plain_smooth` in
    tests/policies/plain_policies.py, and tests/policies/test_fast_path.py checks on random steps that both give
    the same state, to the bit.
    """
    if target is not None and not target < _INF:  # (targets are never NaN: they come from clean samples)
        target = None
    if state is None:
        if target is None:
            return None
        value, at = target, now
    else:
        last = state.value
        if target is None or (target < last and not may_fall):
            value = last
            at = now if not (updated := state.updated_at) > now else updated  # max(now, updated_at)
        elif target >= last:
            value, at = target, now
        else:
            dt = now - state.updated_at
            if dt <= 0.0:
                return state
            gap = (last - target) * math.exp(-dt / tau) if tau > 0.0 else 0.0
            if gap <= settle:
                value = target
            else:
                value = target + gap
                if not value < last:  # min(last, target + gap)
                    value = last
            at = now
    # SmoothState(value, at), filled through its twin (`slots`): four per runtime per refresh.
    built = _twin()
    built.value = value
    built.updated_at = at
    built.__class__ = SmoothState
    return built  # type: ignore[no-any-return]  # a SmoothState now
