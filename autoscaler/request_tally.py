"""Per-request self-metrics counted as plain integers and added to their prometheus_client series in batches.

Counting one request through prometheus_client takes about 5,000 CPU instructions a value (a lock, argument
checks, a bucket search in Python), and a request of the external-metrics API counts seven values (requests,
latency, freshness, authentication, authorization): 40,000 of the 547,000 instructions the serving worker
spent on a request, while the whole bare aiohttp TLS handler needs 369,000 (`bench/bench_request_cost.py`).
The tally adds one to a dictionary slot instead, and `flush` hands the sums over: before every `/metrics` page
of this process, and every second (`flush_every_second`), so that in multiprocess mode a page served by another
worker counts this worker's requests within a second.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_left
from collections.abc import Sequence

from prometheus_client import Counter, Histogram

FLUSH_INTERVAL_S = 1.0


class Observations:
    """What `Histogram.observe` would have added for some values: a count per bucket, and their sum."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * len(self.bounds)
        self.total = 0.0


def histogram_bounds(histogram: Histogram) -> tuple[float, ...]:
    """The upper bounds of a labelled child's buckets, +Inf last."""
    return tuple(histogram._upper_bounds)


def add_observations(histogram: Histogram, observations: Observations) -> None:
    """`histogram.observe(v)` for every value in `observations` at once. prometheus_client has no batch call,
    so this adds to the very values `observe` adds to (`_sum`, `_buckets`);
    tests/test_request_tally.py checks on random values that the page is the same as with one
    `observe` per value, so an upgrade that moves them fails there rather than in production."""
    histogram._sum.inc(observations.total)
    for bucket, count in zip(histogram._buckets, observations.counts, strict=True):
        if count:
            bucket.inc(count)


class RequestTally:
    """Counter increments and histogram observations of the serving path, pending until `flush`.

    Keys are labelled children (`counter.labels(...)`), looked up once by the caller and kept."""

    __slots__ = ("_counts", "_observations")

    def __init__(self) -> None:
        self._counts: dict[Counter, int] = {}
        self._observations: dict[Histogram, Observations] = {}

    def count(self, counter: Counter) -> None:
        counts = self._counts
        counts[counter] = counts.get(counter, 0) + 1

    def count_both(self, first: Counter, second: Counter) -> None:
        """`count(first)` and `count(second)` in one call: a request's authentication and authorization."""
        counts = self._counts
        counts[first] = counts.get(first, 0) + 1
        counts[second] = counts.get(second, 0) + 1

    def observe(self, histogram: Histogram, value: float) -> None:
        observations = self._observations.get(histogram)
        if observations is None:
            observations = self._observations[histogram] = Observations(histogram_bounds(histogram))
        observations.total += value
        if value == value:  # NaN falls in no bucket, as with observe
            observations.counts[bisect_left(observations.bounds, value)] += 1  # the first bound >= value, as observe

    def count_and_observe(self, counter: Counter, histogram: Histogram, value: float) -> None:
        """`count(counter)` and `observe(histogram, value)` in one call: a request's count and latency (the
        observation inline: one Python call a request fewer)."""
        counts = self._counts
        counts[counter] = counts.get(counter, 0) + 1
        observations = self._observations.get(histogram)
        if observations is None:
            observations = self._observations[histogram] = Observations(histogram_bounds(histogram))
        observations.total += value
        if value == value:
            observations.counts[bisect_left(observations.bounds, value)] += 1

    def flush(self) -> None:
        """Add what is pending to the prometheus_client series."""
        counts, self._counts = self._counts, {}
        observed, self._observations = self._observations, {}
        for counter, count in counts.items():
            counter.inc(count)
        for histogram, observations in observed.items():
            add_observations(histogram, observations)

    async def flush_every_second(self) -> None:
        """Flush every `FLUSH_INTERVAL_S` until cancelled (then once more)."""
        try:
            while True:
                await asyncio.sleep(FLUSH_INTERVAL_S)
                self.flush()
        finally:
            self.flush()
