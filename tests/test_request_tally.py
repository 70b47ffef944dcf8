"""The request tally (`autoscaler.request_tally`) publishes exactly what prometheus_client's own calls would:
the same page, for any values, however the flushes fall between them."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from autoscaler.request_tally import RequestTally

BOUNDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


def series() -> tuple[CollectorRegistry, Counter, Histogram]:
    registry = CollectorRegistry()
    counter = Counter("requests_total", "r", ["code"], registry=registry)
    histogram = Histogram("request_seconds", "s", ["path"], registry=registry, buckets=BOUNDS)
    return registry, counter, histogram


def page(registry: CollectorRegistry) -> list[str]:
    """The exposition without its `_created` lines (when each series was made differs between registries)."""
    return [line for line in generate_latest(registry).decode().splitlines() if "_created" not in line]


values = st.one_of(st.sampled_from(BOUNDS), st.floats(min_value=0, max_value=5, allow_nan=False),
                   st.just(float("inf")), st.just(float("nan")))
events = st.lists(st.tuples(st.sampled_from(["count", "observe", "both", "flush"]), st.sampled_from(["a", "b"]),
                            values), max_size=60)


@given(events)
def test_the_page_is_the_one_direct_calls_make(steps: list[tuple[str, str, float]]) -> None:
    direct, direct_counter, direct_histogram = series()
    tallied, tallied_counter, tallied_histogram = series()
    tally = RequestTally()
    for kind, label, value in steps:
        if kind == "count":
            direct_counter.labels(label).inc()
            tally.count(tallied_counter.labels(label))
        elif kind == "observe":
            direct_histogram.labels(label).observe(value)
            tally.observe(tallied_histogram.labels(label), value)
        elif kind == "both":  # a request's count and latency
            direct_counter.labels(label).inc()
            direct_histogram.labels(label).observe(value)
            tally.count_and_observe(tallied_counter.labels(label), tallied_histogram.labels(label), value)
        else:
            tally.flush()
    tally.flush()
    assert_same_page(page(tallied), page(direct))


def assert_same_page(tallied: list[str], direct: list[str]) -> None:
    """Line for line the same, but for a histogram's `_sum`: added in batches, its float may round differently
    in the last place (0.01 + (0.0005 + 0.0005) against 0.01 + 0.0005 + 0.0005)."""
    assert len(tallied) == len(direct), (tallied, direct)
    for mine, theirs in zip(tallied, direct, strict=True):
        name, _, value = mine.rpartition(" ")
        other_name, _, other_value = theirs.rpartition(" ")
        if "_sum" in name and name == other_name and mine != theirs:
            assert math.isclose(float(value), float(other_value), rel_tol=1e-12), (mine, theirs)
        else:
            assert mine == theirs


def test_nothing_reaches_the_page_before_a_flush_and_everything_after() -> None:
    registry, counter, histogram = series()
    tally = RequestTally()
    for seconds in (0.0003, 0.0007, 0.03, 2.0):
        tally.count(counter.labels("200"))
        tally.observe(histogram.labels("/x"), seconds)
    assert 'requests_total{code="200"} 0.0' in generate_latest(registry).decode()
    tally.flush()
    text = generate_latest(registry).decode()
    assert 'requests_total{code="200"} 4.0' in text
    # By hand: 0.0003 in le=0.0005; 0.0007 in le=0.001; 0.03 in le=0.05; 2.0 only in +Inf (cumulative counts).
    for bound, count in (("0.0005", 1), ("0.001", 2), ("0.025", 2), ("0.05", 3), ("1.0", 3), ("+Inf", 4)):
        assert f'request_seconds_bucket{{le="{bound}",path="/x"}} {count}.0' in text
    assert 'request_seconds_sum{path="/x"} 2.031' in text
