"""The skew-aware mean of a runtime's per-pod values, and each pod's share of it (docs/design.md, Aggregation).

ModelMesh spreads load unevenly on purpose, so the runtime value of a per-pod signal is the power mean
`M_p(x) = (Σ x_i^p / n)^(1/p)`: the common value when load is even, inside `[mean, max]`, rising with skew,
and *falling* when idle pods are added (`n * M_p` grows like `n^(1-1/p)`), which is what gives the
recommendation a fixed point (docs/design.md, Recommendation).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from typing import Final

_INF: Final = math.inf

_BUILTINS_FROM: Final = 16 if sys.version_info < (3, 12) else sys.maxsize
"""From this many values `power_mean` checks and sums them with builtins rather than a loop (cheaper from
about 10 values on; a refresh takes two power means a runtime, so both ends matter). Only where `sum` of floats
adds left to right as the loop does: from Python 3.12 it compensates, which moves the last bit, and the served
value would then depend on the interpreter and differ from the reference the tests hold it to."""

_COMPREHENSIONS_FROM: Final = 8
"""From this many rates `rate_summary` divides them with a comprehension rather than a loop: a comprehension is
a function of its own in Python 3.11, whose call costs about as much as appending six values in a loop."""


def power_mean(values: Sequence[float], p: float) -> float:
    """M_p = (Σ x^p / n)^(1/p) of non-negative finite values; 0 for no values; `p = inf` gives the max.

    Computed as `max * (Σ (x/max)^p / n)^(1/p)` so that large values or orders cannot overflow, and clamped
    to `[mean, max]` so float rounding never breaks the bounds the recommendation relies on. Even values
    give back exactly that value.

    Raises ValueError for `p < 1` (or NaN) and for a NaN, infinite or negative value: the values come from
    clean samples (every `PodSample` producer leaves a garbled value absent), so a bad value here is a bug,
    not data.
    """
    if not p >= 1.0:
        raise ValueError(f"power mean order must be >= 1, got {p!r}")
    if not values:
        return 0.0
    # `max(0.0, ...)`: all zeros give +0.0 even when the first is -0.0, as a loop's `top = 0.0` does. A NaN
    # (which `max` and `min` may pass over) or an infinity is found by `power_mean_bounded`'s check.
    return power_mean_bounded(values, p, max(0.0, max(values)), min(values))


def _checked_sum(values: Sequence[float], low: float) -> float:
    """Σ values, left to right, and the ValueError `power_mean` gives for an invalid value: a NaN or an
    infinity makes the sum not finite and a negative value shows in `low` (the smallest value, which the
    caller found); `_check` then finds the value (or finds none: finite values whose sum overflows, which the
    mean accepts). `sum` runs in C and adds left to right as the loop does, but costs more below
    `_BUILTINS_FROM` values."""
    if len(values) >= _BUILTINS_FROM:
        total = sum(values)
    else:
        total = 0.0
        for x in values:
            total += x
    if not (low >= 0.0 and total < _INF):
        _check(values)
    return total


def power_mean_bounded(values: Sequence[float], p: float, top: float, low: float) -> float:
    """`power_mean(values, p)` of non-empty values whose bounds the caller found on its way: `top` the
    largest and at least 0.0 (`if x > top: top = x` from 0.0), `low` the smallest (`if x < low: low = x`
    from inf). The same float, and the same ValueError for an invalid value: the aggregation's pass over the
    pods compares each value anyway, which costs less than `max` and `min` over the values again.

    Runs twice a runtime per refresh, so its fixed cost counts as much as its cost per value: no builtin
    `min`/`max` calls for two floats (each costs more than the compare it makes)."""
    if not p >= 1.0:
        raise ValueError(f"power mean order must be >= 1, got {p!r}")
    n = len(values)
    if n < _BUILTINS_FROM:  # `_checked_sum`, inline: its call costs more than a small runtime's sum
        total = 0.0
        for x in values:
            total += x
        if not (low >= 0.0 and total < _INF):
            _check(values)
    else:
        total = _checked_sum(values, low)
    if low == top or p == _INF:
        return top
    mean = total / n
    if p == 1.0:
        return top if top < mean else mean  # min(mean, top)
    acc = 0.0
    if p == 2.0:
        for x in values:  # (a loop costs less here than `sum` over a comprehension, at any size)
            s = x / top
            acc += s * s
        scaled = math.sqrt(acc / n)
    else:
        for x in values:
            acc += (x / top) ** p
        scaled = (acc / n) ** (1.0 / p)
    # min(top, max(mean, x)), the same float without two builtin calls (each keeps its first argument unless
    # the second is strictly beyond it), which cost more than a small runtime's mean
    x = top * scaled
    if x > mean:
        mean = x
    return mean if mean < top else top


def _check(values: Sequence[float]) -> None:
    """Raise ValueError for the first NaN, infinite or negative value."""
    for x in values:
        if not 0.0 <= x < _INF:
            raise ValueError(f"power mean of an invalid value {x!r}: values must be finite and >= 0")


def shares(rates: Sequence[float], p: float) -> list[float]:
    """Each rate's share of Σ r_i^p (how much it moves M_p(r)), in the rates' order.

    When every rate is 0 the load is even, so they share equally; no rates, no shares.
    """
    if not rates:
        return []
    top = max(rates)
    if top == 0.0:
        return [1.0 / len(rates)] * len(rates)
    powers = [(r / top) ** p for r in rates]
    total = math.fsum(powers)
    return [x / total for x in powers]


def request_weights(count: int, rates: Sequence[float], at: Sequence[int], p: float) -> tuple[float, ...]:
    """Each of `count` pods' share of Σ r_i^p, for display: `rates[j]` is pod `at[j]`'s; 0 for pods not
    counted."""
    if not rates:
        return (0.0,) * count
    return _placed(count, shares(rates, p), at)


def rate_summary(
    rates: Sequence[float], n: int, p: float, top: float, low: float, at: Callable[[], Sequence[int]],
) -> tuple[float, tuple[float, ...]]:
    """The power mean of `n` counted rates and every pod's share of Σ r_i^p, from one entry per pod (`rates`:
    a counted pod's rate, 0.0 for a pod not counted): `(power_mean_bounded(counted, p, top, low),
    request_weights(len(rates), counted, at(), p))`, the same floats, where `counted` are the rates of the pods
    `at()` names (`n >= 1` of them; `top` and `low` are their bounds, as `power_mean_bounded` takes them).

    Why one entry per pod: a pod not counted then needs no placing afterwards (a pass over the pods' indices
    and another over the shares, most of a 100-pod runtime's share of this at 10,000 pods a refresh, since one
    stale or not-Ready pod is enough), and its 0.0 changes no float: every sum starts at 0.0, and adding +0.0
    to a float that is not -0.0 gives it back; its quotient, power and square are 0.0, so its share is
    0.0 / Σ = 0.0, as placed. `at` is called only when every counted rate is 0 (they share equally, and only
    the counted ones). Both results divide every rate by the busiest (`top`), and here each quotient is
    computed once for both (for an order other than 1, 2 and inf, each quotient's power too). Once a runtime
    per refresh: a runtime of a few pods gets loops (a list comprehension's own cost is that of several
    values), a large one comprehensions and builtins.

    Hand-optimised: its plain version is `plain_power_mean` (tests/policies/plain_policies.py) with
    `request_weights`, and tests/policies/test_fast_path.py checks on random rates that both give the same
    floats, to the bit."""
    if not p >= 1.0:
        raise ValueError(f"power mean order must be >= 1, got {p!r}")
    count = len(rates)
    if count < _BUILTINS_FROM:  # `_checked_sum`, inline, as in `power_mean_bounded`
        total = 0.0
        for r in rates:
            total += r
        if not (low >= 0.0 and total < _INF):
            _check(rates)
    else:
        total = _checked_sum(rates, low)
    if top == 0.0:  # every rate 0: the power mean is 0 (`low == top`), and they share equally (`shares`)
        return top, _placed(count, [1.0 / n] * n, at())
    # One loop (cheaper than comprehensions here, at any size): each quotient's power, and Σ (r / top)²
    # added left to right, which the power mean of order 2 is made of.
    powers: list[float] = []
    squares = 0.0
    for r in rates:
        x = r / top
        powers.append(x ** p)
        squares += x * x
    mean = top  # (also for `p = inf`)
    if low != top and p != _INF:
        mean = total / n
        if p == 1.0:
            if top < mean:  # min(mean, top)
                mean = top
        else:
            if p == 2.0:  # `x * x`, as `power_mean` squares (`x ** 2.0`, in `powers`, need not be the same float)
                x = top * math.sqrt(squares / n)
            else:
                acc = 0.0
                if count >= _BUILTINS_FROM:
                    acc = sum(powers)
                else:
                    for x in powers:
                        acc += x
                x = top * (acc / n) ** (1.0 / p)
            if x > mean:  # min(top, max(mean, x)), as in `power_mean_bounded`
                mean = x
            if not mean < top:
                mean = top
    # `fsum` of one or two values is their float sum (a sum of two floats is correctly rounded), and here one
    # of them is 1.0 (the busiest), so no zero's sign is at stake
    weight = math.fsum(powers) if count > 2 else powers[0] if count == 1 else powers[0] + powers[1]
    if count >= _COMPREHENSIONS_FROM:
        return mean, tuple([x / weight for x in powers])
    split = []
    for x in powers:
        split.append(x / weight)
    return mean, tuple(split)


def _placed(count: int, split: list[float], at: Sequence[int]) -> tuple[float, ...]:
    """`count` pods' shares from the counted pods' (`split`, pod `at[j]`'s at j); 0 for pods not counted."""
    if len(split) == count:  # every pod counted (the usual case): `at` is 0, 1, 2, ...
        return tuple(split)
    weights = [0.0] * count
    for i, share in zip(at, split, strict=True):
        weights[i] = share
    return tuple(weights)
