"""Whatever counts ModelMesh's exposition carries (garbled jumps to 1e308, restarts, a queue time without its
count), the exporter never publishes a rate above its signal's ceiling, nor a request total that grew faster than
the request-rate ceiling allows: a reading that would is refused, the last good values kept. A count that jumped
once and counts on from there costs that one read; one garbled read costs nothing, and counts nothing twice.
`test_exporter_implausible_counts` shows the real exporter process and its log.
"""

from __future__ import annotations

import contextlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.counters import CounterWindow
from exporter.modelmesh_text import (
    CACHE_MISSES,
    COUNTER_FIELDS,
    QUEUE_COUNT,
    QUEUE_SUM_MS,
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


STEADY = st.tuples(st.floats(min_value=0.0, max_value=5000.0),  # requests a second, the same throughout
                   st.lists(st.floats(min_value=0.1, max_value=60.0), min_size=3, max_size=12),  # read intervals
                   st.sampled_from([1.0, 30.0, 300.0]))  # the load window
"""A pod under a steady load, read at uneven intervals."""
RISE = st.floats(min_value=1e13, max_value=1e308, allow_nan=False, allow_infinity=False)
"""A rise no pod's counts make between two reads: 60 s at the ceiling of 1e6 requests a second is 6e7, and the
queue time of 300,000 requests (60 s at `STEADY`'s most) at the hour's ceiling about 1.1e12 ms."""


def steady_counts(rate: float, at: float) -> dict[str, float]:
    """ModelMesh's counts after `at` seconds at `rate` requests a second (each queued 10 ms, a tenth a miss)."""
    requests = float(round(rate * at))
    return {REQUESTS: requests, QUEUE_COUNT: requests, QUEUE_SUM_MS: 10.0 * requests,
            CACHE_MISSES: float(round(requests / 10))}


def refused_at(window: CounterWindow, counts: dict[str, float], at: float) -> bool:
    try:
        window.add(reading(counts), at)
    except ScrapeFailure:
        return True
    return False


@settings(max_examples=200, deadline=None)
@given(steady=STEADY, jumped=st.integers(min_value=1), jump=st.integers(min_value=10**9, max_value=10**15))
def test_a_count_that_jumped_and_stays_costs_the_reads_until_it_moves_and_the_rates_are_right_from_then(
        steady: tuple[float, list[float], float], jumped: int, jump: int) -> None:
    rate, intervals, window_s = steady
    jumped = 1 + jumped % (len(intervals) - 1)  # the first read is the baseline
    window = CounterWindow(window_s, late_s=2.0)
    times = [sum(intervals[:index + 1]) for index in range(len(intervals))]
    lost = 0.0
    for index, at in enumerate(times):
        counts = steady_counts(rate, at)
        if index >= jumped:
            counts[REQUESTS] += jump  # ModelMesh's bug: once, then it counts on from there
        # Refused at the jump, and after it while the count has not moved from the jumped value (no request since:
        # nothing tells a jump from a garble that stays); the rates are right once it moves.
        moved = index > jumped and steady_counts(rate, at)[REQUESTS] > steady_counts(rate, times[jumped])[REQUESTS]
        assert refused_at(window, counts, at) == (index >= jumped and not moved)
        if index == jumped:
            lost = steady_counts(rate, at)[REQUESTS] - steady_counts(rate, times[index - 1])[REQUESTS]
        rates = window.rates()
        if index == jumped + 1 and moved and at - times[index - 2] <= window_s + 2.0:
            assert rates is not None  # rates again at once, but after a gap
        if rates is not None:
            elapsed = rates.elapsed_s
            assert rates.requests_per_second == pytest.approx(rate, abs=1.0 / elapsed + 1e-9 * rate)
    totals = window.latest
    assert totals is not None
    assert totals[REQUESTS] == steady_counts(rate, times[-1])[REQUESTS] - steady_counts(rate, times[0])[REQUESTS] - lost


@settings(max_examples=200, deadline=None)
@given(steady=STEADY, garbled=st.integers(min_value=1), field=st.sampled_from(COUNTER_FIELDS), garble=RISE)
def test_one_garbled_read_costs_nothing_and_counts_nothing_twice(
        steady: tuple[float, list[float], float], garbled: int, field: str, garble: float) -> None:
    rate, intervals, window_s = steady
    garbled = 1 + garbled % (len(intervals) - 2)  # the first read is the baseline; a read after the garbled one
    window = CounterWindow(window_s, late_s=2.0)
    times = [sum(intervals[:index + 1]) for index in range(len(intervals))]
    for index, at in enumerate(times):
        counts = steady_counts(rate, at)
        if index == garbled:
            counts[field] += garble
        assert refused_at(window, counts, at) == (index == garbled)
        rates = window.rates()
        if rates is not None:
            assert rates.requests_per_second <= CEILINGS["requests_per_second"].limit
            assert rates.queue_delay_s <= CEILINGS["queue_delay_s"].limit
    totals = window.latest
    assert totals is not None
    first, last = steady_counts(rate, times[0]), steady_counts(rate, times[-1])
    for counted in COUNTER_FIELDS:
        assert totals[counted] == last[counted] - first[counted], counted


STUCK = {
    REQUESTS: st.one_of(st.floats(min_value=1e16, max_value=1e308, allow_nan=False, allow_infinity=False),
                        st.sampled_from([2.0**31 - 1, 2.0**32 - 1]),
                        st.integers(min_value=10**9, max_value=2**53).map(float)),
    QUEUE_SUM_MS: st.floats(min_value=1e16, max_value=1e308, allow_nan=False, allow_infinity=False),
}
"""Values a count may stick at, read after read, while the pod serves on: too large for its increments to show
(1e308), or where they would show, a writer that clamps the count to a constant (2^31 - 1, 2^32 - 1) or a series
that stopped counting. The queue time's are refused over any number of queued requests `STEADY` makes."""


@settings(max_examples=200, deadline=None)
@given(steady=STEADY, stuck=st.integers(min_value=1), unchanged=st.integers(min_value=0, max_value=6),
       field_value=st.sampled_from(list(STUCK)).flatmap(lambda field: st.tuples(st.just(field), STUCK[field])))
def test_a_count_stuck_at_a_garbled_value_never_lowers_a_published_rate(
        steady: tuple[float, list[float], float], stuck: int, unchanged: int, field_value: tuple[str, float]) -> None:
    """ModelMesh's count reads an absurd value from one read on and stays there, exactly, while the pod serves on:
    nothing tells how much it served, so no read is taken, and the last good rates stay (the adapter holds the
    pod's last good sample). Read as "stayed" from the refused read, the busy pod was published idle: 0 requests a
    second, 0 s queued. Nor does it become a baseline after some reads or load windows unchanged, nor where its
    increments would show in a float: a jump whose series then serves nothing reads the same, but so does a
    clamped or stopped count of a busy pod, for ever."""
    rate, intervals, window_s = steady
    field, value = field_value
    stuck = 1 + stuck % (len(intervals) - 1)  # the first read is the baseline
    window = CounterWindow(window_s, late_s=2.0)
    times = [sum(intervals[:index + 1]) for index in range(len(intervals))]
    times += [times[-1] + window_s * (1 + index) for index in range(unchanged)]  # reads a load window apart
    good = None
    for index, at in enumerate(times):
        counts = steady_counts(rate, at)
        if index >= stuck:
            counts[field] = value
        assert refused_at(window, counts, at) == (index >= stuck), index
        rates = window.rates()
        if index < stuck:
            good = rates
        else:
            assert rates == good  # the last good rates, neither lowered nor raised


def test_the_line_after_a_garbled_read_counts_the_series_it_garbled() -> None:
    """Two models' request counts; one read garbles model a's to 1e308 while b's rises as ever. When a's true count
    comes back, the line says one series came back below, not every series that rose in the garbled read."""
    def labelled(a: float, b: float) -> ModelMeshReading:
        return ModelMeshReading(counters={REQUESTS: {(("modelId", "a"),): a, (("modelId", "b"),): b},
                                          QUEUE_COUNT: {(): 2 * b}, QUEUE_SUM_MS: {(): 20.0 * b},  # as counted
                                          CACHE_MISSES: {(): 0.0}},
                                lru_age_s=0.0, capacity_bytes=1.0, used_bytes=0.0, models_loaded=2.0)

    window = CounterWindow(30.0, late_s=2.0)
    window.add(labelled(100.0, 100.0), 0.0)
    window.add(labelled(110.0, 110.0), 5.0)
    with pytest.raises(ScrapeFailure):
        window.add(labelled(1e308, 120.0), 10.0)
    window.add(labelled(130.0, 130.0), 15.0)
    assert window.news is not None and "(a garbled read, not a jump; 1 series)" in window.news, window.news


@settings(max_examples=300, deadline=None)
@given(before=st.fixed_dictionaries(dict.fromkeys(COUNTER_FIELDS, COUNT)),
       after=st.fixed_dictionaries(dict.fromkeys(COUNTER_FIELDS, COUNT)),
       elapsed_s=st.floats(min_value=0.01, max_value=3600.0))
def test_a_refusal_says_numbers_a_reader_understands(before: dict[str, float], after: dict[str, float],
                                                     elapsed_s: float) -> None:
    """Whatever rise a refused read had, over as short a time as `--modelmesh-interval` allows (0.1 s, and a read
    that came late then one on time: less), its log line says the rate as a number and the time as more than 0 s:
    1e308 in 0.1 s was written "inf", and a step of 0.04 s "0.0 s"."""
    window = CounterWindow(300.0, late_s=2.0)
    window.add(reading(before), 0.0)
    try:
        window.add(reading(after), elapsed_s)
    except ScrapeFailure as refusal:
        line = str(refusal)
        assert not re.search(r"\b(inf|nan)\b", line), line
        assert not re.search(r"\bin 0(\.0+)? s\b", line), line


FORGET_AFTER_S = 1800.0
CHURN = st.lists(st.tuples(st.floats(min_value=1.0, max_value=600.0),  # seconds since the read before
                           st.integers(min_value=0, max_value=3),  # series of models served for the first time
                           st.booleans()),  # their counts garbled (1e308): the read is refused
                 min_size=2, max_size=40)
"""Per-model series that come and go: each read brings a few new models' series, garbled or not, and keeps none of
the earlier reads' but a steady one's."""


@settings(max_examples=200, deadline=None)
@given(churn=CHURN)
def test_what_is_kept_of_series_stays_bounded_as_they_come_and_go(churn: list[tuple[float, int, bool]]) -> None:
    """The exporter remembers a series for `forget_after_s` after it last saw it, and no longer: with per-model
    metrics, models come and go for as long as the pod runs. A series seen once, in a read refused for its
    garbled count, was remembered for good (its count before the jump), so memory grew with every such model."""
    window = CounterWindow(30.0, forget_after_s=FORGET_AFTER_S, late_s=2.0)
    seen_at: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    kept: frozenset[tuple[str, tuple[tuple[str, str], ...]]] = frozenset()
    at = 0.0
    for step, (elapsed, new, garbled) in enumerate(churn):
        at += elapsed
        counts: dict[tuple[tuple[str, str], ...], float] = {(("modelId", "steady"),): at}
        counts.update({(("modelId", f"m-{step}-{index}"),): 1e308 if garbled else 1.0 for index in range(new)})
        body = ModelMeshReading(counters={REQUESTS: counts, QUEUE_COUNT: {(): 0.0}, QUEUE_SUM_MS: {(): 0.0},
                                          CACHE_MISSES: {(): 0.0}},
                                lru_age_s=0.0, capacity_bytes=1.0, used_bytes=0.0, models_loaded=1.0)
        seen_at.update({(field, labels): at for field, series in body.counters.items() for labels in series})
        recent = {key for key, last in seen_at.items() if last >= at - FORGET_AFTER_S}
        try:
            window.add(body, at)
        except ScrapeFailure:  # what the last accepted read kept is judged at the next accepted one
            assert window.remembered <= recent | kept, sorted(window.remembered - recent - kept)
        else:
            assert window.remembered <= recent, sorted(window.remembered - recent)
            kept = window.remembered
