"""`ServerThrottle`: how long the bridge, the deletion-cost writer and the Lease elector keep their calls back
after the server's `Retry-After`."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.kube.backoff import ServerThrottle
from autoscaler.kube.errors import KubeApiError

seconds = st.integers(0, 100).map(float)  # whole seconds: the sums below are exact
waits = st.one_of(st.none(), st.integers(-5, 500).map(float))


def throttled(retry_after_s: float | None) -> KubeApiError:
    return KubeApiError("too many requests", 429, "TooManyRequests", retry_after_s)


@given(st.lists(st.tuples(seconds, waits), max_size=8), st.integers(1, 120).map(float))
def test_note_waits_for_the_longest_retry_after_noted_and_never_beyond_the_cap(
        answers: list[tuple[float, float | None]], cap_s: float) -> None:
    now = [0.0]
    throttle = ServerThrottle(cap_s, lambda: now[0])
    ends = [0.0]
    for step, wait in answers:
        now[0] += step
        throttle.note(throttled(wait))
        if wait is not None and wait > 0:
            ends.append(now[0] + min(wait, cap_s))
    assert throttle.remaining() == max(0.0, max(ends) - now[0])
    assert throttle.remaining() <= cap_s


@given(st.floats(min_value=0.1, max_value=500.0), st.floats(min_value=0.1, max_value=500.0),
       st.one_of(st.none(), st.floats(min_value=-5.0, max_value=500.0)))
def test_replace_takes_the_newest_retry_after_and_an_answer_without_one_keeps_it(
        first: float, second: float, third: float | None) -> None:
    throttle = ServerThrottle(clock=lambda: 0.0)
    throttle.replace(throttled(first))
    throttle.replace(throttled(second))
    throttle.replace(throttled(third))
    expected = third if third is not None and third > 0 else second
    assert throttle.remaining() == expected


def test_a_call_that_goes_through_clears_the_throttle() -> None:
    throttle = ServerThrottle(clock=lambda: 0.0)
    throttle.note(throttled(30.0))
    throttle.clear()
    assert throttle.remaining() == 0.0
    throttle.note(KubeApiError("refused", 503))
    assert throttle.remaining() == 0.0
