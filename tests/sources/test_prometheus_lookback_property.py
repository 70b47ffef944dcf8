"""The settings the lookback hint tells an operator to write are ones the hint no longer fires for, whatever the
values it measured; and it fires for nothing that fits (`prometheus_lookback`)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.sources.prometheus_lookback import advice, go_duration, prometheus_duration_s

seconds = st.floats(min_value=0.5, max_value=7200, allow_nan=False)


@given(seconds)
def test_a_written_duration_reads_back_as_at_least_what_was_asked(value: float) -> None:
    read = prometheus_duration_s(go_duration(value))
    assert read is not None and value <= read < value + 1
    read = prometheus_duration_s(go_duration(value, at_most=True))
    assert read is not None and value - 1 < read <= value


@given(lookback=st.none() | seconds, spacing=seconds, max_staleness=seconds)
def test_said_exactly_when_a_setting_does_not_fit(lookback: float | None, spacing: float,
                                                  max_staleness: float) -> None:
    said = advice(lookback, spacing, max_staleness, "ns/pod")
    short_lookback = lookback is not None and lookback < spacing
    assert len(said) == short_lookback + (spacing > max_staleness)


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
