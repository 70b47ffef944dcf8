"""The settings the lookback hint tells an operator to write are ones the hint no longer fires for, whatever the
values it measured; and it fires for nothing that fits (`prometheus_lookback`)."""

from __future__ import annotations

import itertools
import re

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.sources.prometheus_lookback import advice, go_duration, prometheus_duration_s, spacing_s

seconds = st.floats(min_value=0.5, max_value=7200, allow_nan=False)


@given(seconds)
def test_a_written_duration_reads_back_as_at_least_what_was_asked(value: float) -> None:
    read = prometheus_duration_s(go_duration(value))
    assert read is not None and value <= read < value + 1
    read = prometheus_duration_s(go_duration(value, at_most=True))
    assert read is not None and value - 1 < read <= value


def longest_age_s(scrapes: list[int]) -> int:
    """How old the newest sample gets before the next scrape: an instant query finds the pod only while that age
    is under the lookback-delta."""
    return max(later - earlier for earlier, later in itertools.pairwise(scrapes))


@given(lookback=st.none() | seconds, interval=st.integers(1, 3600), failed=st.integers(1, 8), max_staleness=seconds)
def test_the_lookback_is_said_exactly_when_an_instant_query_would_lose_a_pod(
    lookback: float | None, interval: int, failed: int, max_staleness: float
) -> None:
    """Ten scrapes `interval` apart, one of them failed, as the check measures them: the lookback-delta is named
    exactly when some query between them finds no sample (the failed scrape's double gap), and "between two
    scrapes" exactly when that happens without a failure too; the staleness exactly when a scrape is later than
    max_staleness_s."""
    scrapes = [k * interval for k in range(10) if k != failed]
    spacing = spacing_s(scrapes)
    assert spacing == interval
    said = advice(lookback, spacing, max_staleness, "ns/pod")

    named = next((line for line in said if "lookback-delta" in line), None)
    assert (named is not None) == (lookback is not None and lookback < longest_age_s(scrapes))
    assert (named is not None and "between two scrapes" in named) == (lookback is not None and lookback < interval)
    assert any("max_staleness_s" in line for line in said) == (interval > max_staleness)


@given(lookback=seconds, spacing=seconds, max_staleness=seconds)
def test_what_it_says_to_write_silences_it(lookback: float, spacing: float, max_staleness: float) -> None:
    for line in advice(lookback, spacing, max_staleness, "ns/pod"):
        if (written := re.search(r"--query\.lookback-delta=(\w+)", line)) is not None:
            fixed = prometheus_duration_s(written[1])
            assert fixed is not None and not advice(fixed, spacing, spacing, "ns/pod")
        if (staleness := re.search(r"--max-staleness (\d+)", line)) is not None:
            assert not advice(None, spacing, float(staleness[1]), "ns/pod")
        if (every := re.search(r"at most every (\w+)", line)) is not None:
            interval = prometheus_duration_s(every[1])
            assert interval is not None and not advice(None, interval, max_staleness, "ns/pod")
