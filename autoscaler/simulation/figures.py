"""How `simulate`'s report writes its numbers: ratios against mean-hpa, pod-hours, a column of them.

Its own module, free of the report's imports (numpy, the engine), so that the goal (goal.py), the notes found in
a report (goal_ceiling.py) and the report itself write a number the same way, each importing it at the top:
goal_ceiling.py, imported by report.py, took these from report.py and so had to be imported late.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

SMALL_RATIO: Final = 0.001
"""Ratios are written to 3 decimals; one below this keeps its significant digits, written "<0.001x" in text."""


def ratio_figure(ratio: float) -> float:
    """`ratio` to 3 decimals, or to 3 significant digits below SMALL_RATIO: rounded to 3 decimals, 1 delayed
    request against mean-hpa's 3,190 read 0.0 in report.json and "0x" in the table, taken for no delays."""
    return float(f"{ratio:.3g}") if 0 < abs(ratio) < SMALL_RATIO else round(ratio, 3)


def ratio_text(ratio: float | None, decimals: int | None = None) -> str:
    """A ratio as the report's table and notes write it ("0.087x", "1.5x"), or to `decimals` as bench/'s
    tuning tables do ("1.500x", 0 as "0.000x"); either way "<0.001x" for one under SMALL_RATIO (not 0, and no
    exponent: "0.000x" was read as none), and "n/a" for None: mean-hpa's figure was 0, so there is no ratio."""
    if ratio is None:
        return "n/a"
    if 0 < ratio < SMALL_RATIO:
        return f"<{SMALL_RATIO:g}x"
    return f"{ratio:g}x" if decimals is None else f"{ratio:.{decimals}f}x"


def figure(value: float) -> float:
    """Six significant digits: a few minutes of trace run a few hundredths of a pod-hour, which three decimals
    rounded by up to 1.5% (0.0333 written 0.033, and 2x the oracle read as 2.03x)."""
    return float(f"{value:.6g}")


def hours_text(value: float) -> str:
    """Pod-hours (or hours) for the table: a tenth of an hour for a day's run, three digits for minutes."""
    return f"{value:.1f}" if abs(value) >= 100 else f"{value:.3g}"


SIGNIFICANT = 3
MOST_DECIMALS = 6
"""report.json keeps six significant digits: a column never shows more than it has."""


def column_decimals(values: Sequence[float]) -> int:
    """One number of decimals for a whole column, enough for three significant digits of its smallest value
    (a tenth at 100 and above): each value with its own three digits printed "6" beside "5.58"."""
    smallest = min((abs(v) for v in values if v), default=0.0)
    if not smallest or smallest >= 100:
        return 1
    return min(MOST_DECIMALS, max(1, SIGNIFICANT - 1 - math.floor(math.log10(smallest))))


def hours_column(values: Sequence[float]) -> list[str]:
    """Pod-hours for the table's column, all to the same decimals (`column_decimals`)."""
    decimals = column_decimals(values)
    return [f"{v:.{decimals}f}" for v in values]
