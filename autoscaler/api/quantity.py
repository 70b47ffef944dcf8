"""Served values as Kubernetes quantities.

Values are rendered in milli-units (`"1500m"`), the form the HPA compares exactly. The HPA reads a quantity as
`Quantity.MilliValue()`, an int64: a milli count of 2^63 or more still parses, but reads back wrapped (often
negative, and the HPA would then scale to its minimum). So a value is servable only when it is finite, not
negative, and its milli count fits an int64 (`0 <= value <= MAX_SERVABLE`); any other value is unknown to the
HPA and KEDA alike (503, `null`), which is also what keeps one absurd reading (an LRU age of 1e-320 s, a rate
of 1e308/s) from failing the rendering of every runtime's answers.
"""

from __future__ import annotations

from typing import Final

MAX_SERVABLE: Final = 9_223_372_036_854_774.0
"""The largest float whose milli count, `round(value * 1000)`, is at most 2^63 - 1 (the next float up,
9223372036854776.0, makes a count of 2^63)."""


def milli_quantity(value: float) -> str:
    """The quantity of a value from 0 to `MAX_SERVABLE`; any other is a caller's bug, refused rather than sent."""
    if not 0.0 <= value <= MAX_SERVABLE:
        raise ValueError(f"cannot serve {value!r} as a quantity")
    return f"{round(value * 1000)}m"
