"""Whatever counts ModelMesh's exposition carries (garbled jumps to 1e308, restarts, a queue time without its
count), the exporter never publishes a rate above its signal's ceiling, nor a request total that grew faster than
the request-rate ceiling allows: a reading that would is refused, the last good values kept.
`test_exporter_implausible_counts` shows the real exporter process and its log.
"""

from __future__ import annotations

import contextlib

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.counters import CounterWindow
from exporter.modelmesh_text import (
    CACHE_MISSES,
    COUNTER_FIELDS,
    REQUESTS,
    ModelMeshReading,
    ScrapeFailure,
)
from exporter.signal_ceilings import CEILINGS

COUNT = st.one_of(st.integers(min_value=0, max_value=10**7).map(float),
                  st.floats(min_value=0.0, max_value=1e308, allow_nan=False, allow_infinity=False))
"""A count as ModelMesh's body may carry it: a plausible one, or anything finite a garbled body parses to."""
READING = st.tuples(st.floats(min_value=0.1, max_value=60.0), st.fixed_dictionaries(dict.fromkeys(COUNTER_FIELDS,
                                                                                                   COUNT)))
"""Seconds since the reading before, and ModelMesh's (unlabelled) counts."""


def reading(counts: dict[str, float]) -> ModelMeshReading:
    return ModelMeshReading(counters={field: {(): value} for field, value in counts.items()}, lru_age_s=0.0,
                            capacity_bytes=1.0, used_bytes=0.0, models_loaded=1.0)


@settings(max_examples=300, deadline=None)
@given(readings=st.lists(READING, min_size=2, max_size=12), window_s=st.sampled_from([1.0, 30.0, 300.0]))
def test_no_rate_above_its_ceiling_is_ever_published(readings: list[tuple[float, dict[str, float]]],
                                                     window_s: float) -> None:
    window = CounterWindow(window_s, late_s=2.0)
    at = 0.0
    for elapsed, counts in readings:
        at += elapsed
        with contextlib.suppress(ScrapeFailure):  # refused: nothing changes
            window.add(reading(counts), at)
        rates = window.rates()
        if rates is not None:
            assert rates.requests_per_second <= CEILINGS["requests_per_second"].limit
            assert rates.cache_misses_per_second <= CEILINGS["cache_misses_per_second"].limit
            assert rates.queue_delay_s <= CEILINGS["queue_delay_s"].limit
        totals = window.latest
        assert totals is not None
        assert totals[REQUESTS] <= CEILINGS["requests_per_second"].limit * at
        assert totals[CACHE_MISSES] <= CEILINGS["cache_misses_per_second"].limit * at
