"""The not-Ready hold (`policies.unready_pods`) lasts `NOT_READY_HOLD_S` of time that really passed, whatever the
adapter's wall clock does (reviewer finding rv3: it was timed on the wall clock, so a clock stepped back an hour
held a not-Ready pod for an hour and 5 minutes, and kept the runtime from scaling down all that time).

The refresher runs on two injected clocks (`tests.test_refresher_clock.Clocks`). The source plays discovery: it
stamps the hot pod's `unready_since` from the wall clock when its probe fails, as the pod watch does.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import PodSample, RuntimeSnapshot
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.unready_pods import NOT_READY_HOLD_S
from autoscaler.sources.base import SourceDefaults
from tests.policies.builders import NOW, PROPERTIES, snapshot
from tests.test_refresher_clock import DESIRED, INTERVAL_S, KEY, Clocks

FAST = RuntimePolicy(target_rps_per_pod=100.0, scale_down_tau_s=0.0)  # no smoothing: a fall shows at once


class HotPodSource(SourceDefaults):
    """Pods at 400, 20 and 20 req/s (7 replicas at 100 req/s a pod); once `unready_since` is set, the hot pod is
    not Ready with its last good sample held, as the scrape source holds it."""

    name = "test"
    errors: dict[str, int] = {}

    def __init__(self) -> None:
        self.unready_since: float | None = None
        self.last_good: PodSample | None = None

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        cold = tuple(PodSample(name, sampled_at=now - 1, requests_per_second=20.0, queue_delay_s=0.0)
                     for name in ("c1", "c2"))
        if self.unready_since is None or self.last_good is None:
            self.last_good = PodSample("hot", sampled_at=now - 1, requests_per_second=400.0, queue_delay_s=0.0)
            hot = self.last_good
        else:
            hot = replace(self.last_good, ready=False, unready_since=self.unready_since)
        return [RuntimeSnapshot(KEY, (hot, *cold), now, replicas=3)]

    async def close(self) -> None:
        return None


@pytest.mark.parametrize("step_s", [0.0, -3600.0, -30.0], ids=["no-step", "back-an-hour", "back-30s"])
async def test_a_wall_clock_stepped_back_does_not_stretch_the_hold(step_s: float,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    clocks = Clocks()
    source = HotPodSource()
    refresher = clocks.refresher(source, FAST)  # type: ignore[arg-type]
    await refresher.refresh_once()
    assert refresher.views[KEY].values[DESIRED].value == 7.0

    source.unready_since = clocks.wall  # the probe fails; discovery stamps it as the watch sees it
    clocks.passes(5.0)
    await refresher.refresh_once()
    assert "pod hot" in refresher.views[KEY].held
    clocks.wall += step_s  # the node's clock is stepped back (an NTP step, a clock set by hand)

    passed = 5.0
    with caplog.at_level(logging.INFO, logger="autoscaler.policies.unready_pods"):
        while passed <= NOT_READY_HOLD_S + 2 * INTERVAL_S and "pod hot" in refresher.views[KEY].held:
            clocks.passes(INTERVAL_S)
            passed += INTERVAL_S
            await refresher.refresh_once()
            assert refresher.views[KEY].values[DESIRED].value == (7.0 if "pod hot" in refresher.views[KEY].held
                                                                   else 1.0)
    assert "pod hot" not in refresher.views[KEY].held, refresher.views[KEY].held["pod hot"]
    assert NOT_READY_HOLD_S < passed <= NOT_READY_HOLD_S + INTERVAL_S  # ends after 5 minutes of real time
    assert refresher.views[KEY].values[DESIRED].value == 1.0
    [line] = [r.getMessage() for r in caplog.records if r.name == "autoscaler.policies.unready_pods"]
    assert f"pod hot not ready for {passed:.0f} s (over 300 s): left out of the values" in line

    for _ in range(4):  # and it stays left out: the clock step does not start it again
        clocks.passes(INTERVAL_S)
        await refresher.refresh_once()
        assert "pod hot" not in refresher.views[KEY].held
        assert refresher.views[KEY].values[DESIRED].value == 1.0


@PROPERTIES
@given(steps=st.lists(st.floats(-7200.0, 7200.0), min_size=1, max_size=30),
       stamped=st.floats(-60.0, 60.0))
def test_no_wall_clock_steps_hold_a_pod_past_the_bound(steps: list[float], stamped: float) -> None:
    """Refreshes 15 s apart on the running clock, the wall clock stepped by any amounts between them, the pod
    stamped not Ready anywhere near the first refresh that sees it: it is never held after `NOT_READY_HOLD_S`
    of running time from that refresh, and once left out stays so."""
    running = NOW
    wall = NOW
    _, memory = decide(snapshot(three_pods(NOW)), FAST, None, NOW, 30.0, running=running)
    hot = replace(three_pods(NOW)[0], ready=False, unready_since=NOW + stamped)
    first_seen: float | None = None
    left_out = False
    for step in [*steps, *([0.0] * 22)]:
        running += INTERVAL_S
        wall += INTERVAL_S + step
        pods = (hot, *three_pods(wall)[1:])
        view, memory = decide(snapshot(pods, now=wall), FAST, memory, wall, 30.0, running=running)
        first_seen = running if first_seen is None else first_seen
        if "pod hot" in view.held:
            assert not left_out and running - first_seen <= NOT_READY_HOLD_S
        else:
            left_out = True
    assert left_out


def three_pods(at: float) -> tuple[PodSample, ...]:
    return tuple(PodSample(name, sampled_at=at - 1, requests_per_second=rps, queue_delay_s=0.0)
                 for name, rps in (("hot", 400.0), ("c1", 20.0), ("c2", 20.0)))
