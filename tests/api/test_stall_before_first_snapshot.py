"""A refresh that hangs before it ever delivers (a deadlock in start-up): /readyz fails from the start, which
restarts nothing, so without a judgement the pod stayed unready for good. The stall watch counts from the
serving side's start until the first snapshot, as it counts from the last snapshot after it."""

from __future__ import annotations

import logging
import time

import pytest

from autoscaler.api.snapshot import EMPTY, SnapshotHolder
from autoscaler.api.stall import FIRST_VALUES_ALLOWANCE_S, StallWatch
from autoscaler.api.status import ApiError
from tests.support.clock import SteppedClock


def test_no_first_snapshot_within_the_limit_is_a_stall_that_fails_liveness(caplog: pytest.LogCaptureFixture) -> None:
    clock, store = SteppedClock(time.monotonic()), SnapshotHolder()
    watch = StallWatch(store, 60.0, clock=clock)
    assert FIRST_VALUES_ALLOWANCE_S == 120.0  # start-up's allowance beyond the limit (the examples below)
    clock.now += 179.0  # a slow start (a loaded node, a fleet of thousands of runtimes) is not judged
    watch.refuse_if_stalled()
    assert watch.stalled_for() is None
    clock.now += 2.0
    with pytest.raises(ApiError) as refused:
        watch.refuse_if_stalled()  # what /livez and /readyz answer: the kubelet restarts the pod
    assert refused.value.code == 503 and "not come since the start, 181 s ago" in str(refused.value)
    assert watch.stalled_for() == pytest.approx(181.0)
    with caplog.at_level(logging.ERROR, logger="autoscaler.api.stall"):
        watch.check()
    assert "no values at all since the start from the refresh process for 181 s" in caplog.text


def test_the_first_snapshot_ends_it_and_later_ones_are_judged_from_their_own_time() -> None:
    clock, store = SteppedClock(time.monotonic()), SnapshotHolder()
    watch = StallWatch(store, 60.0, clock=clock)
    clock.now += 200.0
    assert watch.stalled_for() == pytest.approx(200.0)
    store.current = EMPTY  # the first snapshot arrives (stamped with the real monotonic clock)
    clock.now = time.monotonic()
    assert watch.stalled_for() is None
    watch.refuse_if_stalled()
