"""Why one ModelMesh reading's counts cannot be true: the rates they imply since the last reading pass the
signals' ceilings (`exporter.signal_ceilings`, the numbers the adapter refuses samples by).

A count that jumps to an absurd finite value (1e308 from a garbled exposition or a bug) parses, and taken as
good it was published as a rate of about that much for a whole load window, and added to
`modelmesh_pod_requests_total` for good: Prometheus, Grafana and the alert rules, which read the exporter's series
directly, showed the spike, though the adapter refused it. Judged per reading (the increase since the last one
over the time between them), a good window never passes a ceiling either: its rate is the mean of its steps'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from exporter import names
from exporter.modelmesh_text import (
    CACHE_MISSES,
    QUEUE_COUNT,
    QUEUE_SUM_MS,
    REQUESTS,
    SAMPLE_OF_FIELD,
    Labels,
    labels_text,
)
from exporter.signal_ceilings import refusal

_PER_SECOND: Final = ((REQUESTS, "requests_per_second", names.REQUESTS_PER_SECOND),
                      (CACHE_MISSES, "cache_misses_per_second", names.CACHE_MISSES_PER_SECOND),
                      (QUEUE_COUNT, "requests_per_second", "queued requests a second"))
"""Counter field, the signal whose ceiling its rate is held to (a `CEILINGS` key), and the exporter's series of its
rate. A queued request is a request: a queue count that rose faster than any pod serves is garbled too, and taken
as good it lowered the queue delay, and its true count's return read as a restart that counted the pod's whole
history again."""

Series = tuple[str, Labels]
"""A counter series: its field and ModelMesh's labels."""


def implausible_step(earlier: Sequence[Mapping[str, float]], after: Mapping[str, float], elapsed_s: float,
                     increases: Mapping[Series, float], read: Mapping[Series, float]) -> str | None:
    """Why the running totals cannot have reached `after` (None: they can), `elapsed_s` seconds after the last
    of the `earlier` totals still in the load window, naming the ModelMesh series that rose most (`increases`:
    each series' increase in this reading), its value as `read`, and the exporter's series that would have
    shown it.

    Rates are judged on the step: a window's rate is the mean of its steps', so none passes a ceiling either.
    The mean queue delay is judged from every earlier point, as a window's mean is not its steps' (a queue time
    that rose in one step, its count in the next): queue time over queued requests, at least one, since
    ModelMesh's histogram adds a request to its count before its time to the sum (a read between the two sees a
    count without its time, and the next the time alone)."""
    before = earlier[-1]
    if elapsed_s > 0:  # two readings at one instant have no rate to judge
        for field, signal, series in _PER_SECOND:
            why = refusal(signal, (after[field] - before[field]) / elapsed_s, series)
            if why is not None:
                return _said(field, increases, read, elapsed_s, why)
    for start in earlier:
        queued = max(after[QUEUE_COUNT] - start[QUEUE_COUNT], 1.0)
        why = refusal("queue_delay_s", (after[QUEUE_SUM_MS] - start[QUEUE_SUM_MS]) / queued / 1000.0,
                      names.QUEUE_DELAY_SECONDS)
        if why is not None:
            return _said(QUEUE_SUM_MS, increases, read, elapsed_s, why)
    return None


def _said(field: str, increases: Mapping[Series, float], read: Mapping[Series, float], elapsed_s: float,
          why: str) -> str:
    """The refusal with the ModelMesh series to look at: of `field`'s, the one that rose most in this reading."""
    risen = [key for key in increases if key[0] == field]
    if not risen:  # the queue time of earlier readings, over too few requests since
        return f"ModelMesh's {SAMPLE_OF_FIELD[field]} over the load window: {why} (a garbled count? reading refused)"
    key = max(risen, key=increases.__getitem__)
    return (f"ModelMesh's {series_text(key)} read {read[key]:g}, up {increases[key]:g} in "
            f"{_seconds(elapsed_s)} s: {why} (a garbled count? reading refused)")


def _seconds(elapsed_s: float) -> str:
    """The time a refused step took, never "0.0" for one that took some (a read that came late, then one on time,
    at `--modelmesh-interval 0.1`): tenths from a second up, two significant digits below."""
    return f"{elapsed_s:.1f}" if elapsed_s >= 1.0 else f"{elapsed_s:.2g}"


def series_text(key: Series) -> str:
    """A counter series as ModelMesh's exposition names it: its sample and labels."""
    return f"{SAMPLE_OF_FIELD[key[0]]}{labels_text(key[1])}"
