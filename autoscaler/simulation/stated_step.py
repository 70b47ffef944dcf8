"""The row of 0 requests that states a sparse trace's step, and where a refusal may offer one.

A trace's interval is the smallest gap between its timestamps, so a trace with rows only where requests came
reads at a coarser step than its export's, or is refused; a row of 0 requests one step after the first
timestamp states the step (docs/simulation.md). Offered for a step that is none of the trace's, that row made it
absurd: 4 h of epoch milliseconds at each target's own offset were told to state a 1 s step, and read as 14.4
million 1 s intervals (166 days) to replay. A refusal offers a row of 0 only where the trace at that step reads
as at most `INTERVALS_PER_TIMESTAMP` intervals for each of its timestamps.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np

INTERVALS_PER_TIMESTAMP: Final = 1000
"""The most intervals a trace may read as, for each of its distinct timestamps, at a step a row of 0 states: a
day of a job every 30 min in a 60 s trace is 30; milliseconds read as seconds at 1 s, thousands."""


def sane_at(distinct: np.ndarray, step: float) -> bool:
    """Whether the trace whose distinct timestamps are `distinct` reads at `step` as at most
    `INTERVALS_PER_TIMESTAMP` intervals for each of them: a row of 0 that states `step` is then worth offering."""
    intervals = math.floor(float(distinct[-1] - distinct[0]) / step) + 1
    return intervals <= INTERVALS_PER_TIMESTAMP * len(distinct)

