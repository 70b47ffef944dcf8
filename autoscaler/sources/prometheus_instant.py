"""One instant for a whole refresh: every query of a round is evaluated at the same Prometheus time.

Asked "now", each of a refresh's ten queries is evaluated when it arrives, so one round could read the pod's
freshness from one scrape and a signal from the next (or, behind a Service in front of an HA pair, from the other
replica's newer data): values that were never true together. The round therefore first asks Prometheus for its
own time (`time()`, a scalar that reads no series) and passes that time as `time=` to every query of the round.

The same answer tells how far Prometheus's clock is from ours (its evaluation time against when we asked and
read it, as the scrape source reads an exporter's clock): queries evaluated at a `time=` we give echo it, so
they no longer can.
"""

from __future__ import annotations

import math
from typing import Any, Final

CLOCK_QUERY: Final = "time()"
"""Prometheus's now, as a scalar; it reads no series, so it costs nothing at any number of pods."""


def evaluation_time(result: Any) -> float | None:
    """The time in the answer to `CLOCK_QUERY` (a scalar result, `[time, "value"]`); None for any other shape
    (a stand-in that answers every query with a vector): the round is then pinned to the adapter's clock."""
    if not isinstance(result, list) or len(result) != 2 or isinstance(result[0], (dict, list, bool)):
        return None
    try:
        seconds = float(result[0])
    except (TypeError, ValueError):
        return None
    return seconds if math.isfinite(seconds) else None


def pinned(params: dict[str, str], at: float) -> dict[str, str]:
    """The query parameters of one round: `params` and its instant (milliseconds, as Prometheus keeps them)."""
    return {**params, "time": f"{at:.3f}"}
