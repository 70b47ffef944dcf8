"""Served values as Kubernetes quantities.

Values are rendered in milli-units (`"1500m"`), the form the HPA compares exactly; a value that cannot be
served (NaN, infinite, negative) is a bug upstream, so it is refused here rather than sent to the HPA.
"""

from __future__ import annotations

import math


def milli_quantity(value: float) -> str:
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"cannot serve {value!r} as a quantity")
    return f"{round(value * 1000)}m"
