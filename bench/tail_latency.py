"""The p99 a benchmark prints beside its longest value.

`statistics.quantiles`' default method, "exclusive", extrapolates past the largest value on a small sample: a
run of a few hundred ticks printed `longest 5.90 ms  p99 6.22 ms`, a 99th percentile longer than anything
measured. "inclusive" interpolates between measured values only, so p99 is never past the longest."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def p99(values: Sequence[float]) -> float:
    """The 99th percentile of `values` (two or more), between the 98th and the largest of a hundred; held within
    the values measured, which the interpolation's rounding can leave by a last digit."""
    interpolated = statistics.quantiles(values, n=100, method="inclusive")[98]
    return min(max(values), max(min(values), interpolated))
