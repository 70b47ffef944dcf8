"""The HPA's handler skips the stall test while the stall watch says no stall can begin before its next check
(`StallWatch.suspect`): one call and a clock read fewer on every request. The promise: on any course of time,
snapshots and requests, with the watch checking every `interval_s` (late by up to one interval, as a loaded
event loop runs it), a request is refused for a stall exactly when the exact test (`stalled_for`) says the
values are stalled at that moment; never served past the limit, never refused within it."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import make_mocked_request
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.api.handlers import external_metric_handler
from autoscaler.api.snapshot import EMPTY, ServingSnapshot
from autoscaler.api.stall import FIRST_VALUES_ALLOWANCE_S, StallWatch
from autoscaler.api.status import ApiError
from autoscaler.selfmetrics import AdapterMetrics
from tests.support.clock import SteppedClock

LIMIT_S = 10.0
METRICS = AdapterMetrics()


class Store:
    """A snapshot store whose delivery time is the test's clock; its values are a running refresh's (ready:
    a snapshot marked not ready after the first is a drain's, never stalled)."""

    def __init__(self) -> None:
        self.current: ServingSnapshot = EMPTY._replace(ready=True)
        self.updated_at: float | None = None


def refused_for_a_stall(handler: object, request: object) -> bool:
    try:
        handler(request)  # type: ignore[operator]
    except ApiError as error:
        return "refreshed for" in error.message or "not come since the start" in error.message
    return False


steps = st.lists(st.one_of(
    st.tuples(st.just("advance"), st.floats(0.0, 4.0)),
    st.tuples(st.just("late"), st.floats(0.0, 1.0)),  # how late the watch's next check runs, in intervals
    st.tuples(st.just("snapshot"), st.just(0.0)),
    st.tuples(st.just("request"), st.just(0.0)),
), max_size=60)


@given(steps, st.booleans())
def test_a_request_is_refused_for_a_stall_exactly_while_the_values_are_stalled(
        course: list[tuple[str, float]], first_delivered: bool) -> None:
    clock, store = SteppedClock(0.0), Store()
    watch = StallWatch(store, LIMIT_S, clock=clock)
    if first_delivered:
        store.updated_at = clock.now
    handler = external_metric_handler(store, METRICS, watch)
    request = make_mocked_request(
        "GET", "/apis/external.metrics.k8s.io/v1beta1/namespaces/ml/modelmesh_desired_replicas"
        "?labelSelector=deployment%3Dx", match_info={"namespace": "ml", "metric": "modelmesh_desired_replicas"})
    watch.check()
    next_check, lateness = clock.now + watch.interval_s, 0.0
    for step, value in course:
        if step == "advance":
            target = clock.now + value
            while next_check + lateness <= target:  # the watch's checks on the way
                clock.now = next_check + lateness
                watch.check()
                next_check, lateness = clock.now + watch.interval_s, 0.0
            clock.now = target
        elif step == "late":
            lateness = value * watch.interval_s
        elif step == "snapshot":
            store.updated_at = clock.now
        else:
            assert refused_for_a_stall(handler, request) == (watch.stalled_for() is not None), (
                clock.now, store.updated_at, watch.suspect)


def test_the_watch_clears_its_suspicion_only_two_intervals_before_the_limit() -> None:
    """Worked by hand: limit 10 s, interval 1 s (a quarter of the limit, at most 1 s)."""
    clock, store = SteppedClock(0.0), Store()
    watch = StallWatch(store, LIMIT_S, clock=clock)
    assert watch.interval_s == 1.0 and watch.suspect  # until the first check, every request is tested
    store.updated_at = 0.0
    clock.now = 7.9
    watch.check()
    assert not watch.suspect  # 7.9 + 2 <= 10: no stall before 9.9, and the next check comes by 9.9
    clock.now = 8.1
    watch.check()
    assert watch.suspect  # 8.1 + 2 > 10: the stall may begin before the check after next
    store.updated_at = 8.1
    clock.now = 8.2
    watch.check()
    assert not watch.suspect
    store.updated_at = None
    clock.now = LIMIT_S + FIRST_VALUES_ALLOWANCE_S - 2.5
    watch.check()
    assert not watch.suspect  # before the first values, the start-up allowance counts too


@pytest.mark.parametrize("first_delivered", [True, False])
def test_a_stall_between_two_checks_is_refused_from_its_start(first_delivered: bool) -> None:
    clock, store = SteppedClock(0.0), Store()
    watch = StallWatch(store, LIMIT_S, clock=clock)
    limit = LIMIT_S if first_delivered else LIMIT_S + FIRST_VALUES_ALLOWANCE_S
    store.updated_at = 0.0 if first_delivered else None
    clock.now = limit - 1.5
    watch.check()  # the last check before the stall; the next comes 1 s (or, late, 2 s) after it
    clock.now = limit + 0.4
    handler = external_metric_handler(store, METRICS, watch)
    request = make_mocked_request(
        "GET", "/apis/external.metrics.k8s.io/v1beta1/namespaces/ml/modelmesh_desired_replicas"
        "?labelSelector=deployment%3Dx", match_info={"namespace": "ml", "metric": "modelmesh_desired_replicas"})
    assert refused_for_a_stall(handler, request)


def test_a_drain_is_never_a_stall() -> None:
    """After SIGTERM the refresh side marks its last values not ready and stops refreshing on purpose: however
    long the shutdown delay, they are served and nothing is logged as hung."""
    clock, store = SteppedClock(0.0), Store()
    watch = StallWatch(store, LIMIT_S, clock=clock)
    store.updated_at = 0.0
    store.current = EMPTY  # the drain's snapshot: not ready
    clock.now = 10 * LIMIT_S
    watch.check()
    assert watch.stalled_for() is None and not watch.suspect
    watch.refuse_if_stalled()  # raises nothing
    store.current = EMPTY._replace(ready=True)  # the same age, from a refresh that still runs: stalled
    assert watch.stalled_for() == 10 * LIMIT_S
