"""The refresh process's memory does not grow with the seconds it has stamped.

Every metric answer, /debug document and RuntimeScale status carries a stamp (`rfc3339`), and a running adapter
stamps a new second at every refresh and bridge write. The stamps are cached, because every runtime's values
share a few; the cache kept 4,096 of them (about 960 kB), so the refresh process's memory crept up for the
first 4,096 distinct seconds: over an hour at a 1 s refresh, most of a day at the default 15 s (a churn soak
saw it as a leak). Only the stamps of the last few minutes are shared; the older ones are never asked again.
"""

from __future__ import annotations

import gc
import tracemalloc
from datetime import UTC, datetime

from autoscaler.kube import timestamps
from autoscaler.kube.timestamps import rfc3339

A_DAY_OF_REFRESHES = 20_000
"""Distinct seconds stamped: more than any bound the cache could have had."""

RETAINED_BOUND_BYTES = 128 * 1024
"""What the stamps may keep alive at most, whatever the number of seconds stamped (at most minutes of them)."""


def test_stamping_ever_more_seconds_keeps_a_bounded_memory() -> None:
    start = 1_780_000_000
    tracemalloc.start()
    try:
        for second in range(start, start + A_DAY_OF_REFRESHES):
            for _ in range(3):  # several runtimes' values share each second
                rfc3339(second + 0.25)
        gc.collect()
        snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, timestamps.__file__)])
    finally:
        tracemalloc.stop()
    retained = sum(stat.size for stat in snapshot.statistics("filename"))
    assert retained < RETAINED_BOUND_BYTES, (
        f"{retained} bytes kept alive by {A_DAY_OF_REFRESHES} seconds of stamps: the refresh process's memory grows "
        "with its uptime")


def test_a_second_stamped_long_ago_is_written_the_same_again() -> None:
    long_ago = 1_780_000_000.9
    first = rfc3339(long_ago)
    for second in range(1_790_000_000, 1_790_000_000 + 5_000):
        rfc3339(second)
    assert rfc3339(long_ago) == first == datetime.fromtimestamp(1_780_000_000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
