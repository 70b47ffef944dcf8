"""The most each per-pod signal can really read: above it a reading is garbage, refused as a NaN is.

Both ends refuse by these numbers: the exporter a ModelMesh reading whose rates would pass them (so Prometheus,
Grafana and the alert rules, which read its series directly, never see the spike), the adapter a sample above
them (`autoscaler.policies.samples`), from an exporter of an older release or a Prometheus query. Kept here, in a
module of the standard library alone, because the exporter may not import the adapter's packages and the pure
policies may import nothing that does I/O (tests/test_architecture.py): both may import this one.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import Final, NamedTuple


class Ceiling(NamedTuple):
    """The most a pod's signal can really read: above it, the reading is garbage, refused as a NaN is."""

    limit: float
    why: str
    """Why no real pod reads more, in the words of the refusal (after "above LIMIT:")."""


CEILINGS: Final[Mapping[str, Ceiling]] = {
    "requests_per_second": Ceiling(1e6, "no inference server answers a million requests a second from one pod"),
    "queue_delay_s": Ceiling(3600.0, "no request waits an hour in a queue; clients time out in minutes"),
    "cache_misses_per_second": Ceiling(1e6, "a miss is a request that loads a model; no pod loads a million "
                                            "models a second"),
    "lru_age_s": Ceiling(10 * 365 * 86400.0, "no pod has run for ten years; a last-use time of 0 (1970) reads "
                                             "as 56 years"),
    "cache_used_ratio": Ceiling(2.0, "a ratio of the model cache's capacity, which ModelMesh never fills twice "
                                     "over; a percent sent as a ratio?"),
    "models_loaded": Ceiling(1e6, "no pod holds a million model copies"),
    "gpu_busy": Ceiling(1.1, "a ratio of the GPU's time, 1.0 when always busy (up to 1.1 is read as 1.0, for "
                             "rounding and sampling jitter); a percent sent as a ratio?"),
}
"""Per signal (`PodSample`'s field names), the value no real pod reaches (docs/design.md, Aggregation: never scale up
on garbage). A value that is merely high (a hot pod, a long queue, a full cache) is below it and used; one above
it is made absent and the pod's last good sample held, as for a NaN, with a warning naming the pod, the series,
the value and this ceiling. Without them, one pod whose exporter sent 1e308 requests a second read as a
million-fold load: the runtime went to its maximum, silently, and the smoothing kept it there for an hour after
the value was sane."""


def refusal(field: str, value: float, series: str) -> str | None:
    """Why a clean `value` of the signal `field` (`PodSample`'s name; `series` is what the user sees, the
    exporter's series) cannot be a real reading, in words for the log and /debug; None when it is plausible."""
    ceiling = CEILINGS.get(field)
    if ceiling is None or value <= ceiling.limit:
        return None
    return f"{series} {amount(value)} is above {ceiling.limit:g}: {ceiling.why}"


def amount(value: float) -> str:
    """A number as the log says it. A rate worked out from a garbled count can pass a float's range (1e308 in
    0.1 s), which `:g` wrote as "inf": a reader asked how much, and whether the exporter divided by zero."""
    if value == math.inf:
        return f"over {sys.float_info.max:g} (past the largest number a float holds)"
    return f"{value:g}"
