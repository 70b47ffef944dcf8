"""A crash-looping pod that turns Ready for a moment must not block scale-down for ever (reviewer finding).

Pod p-0 not Ready for 26 s with its ModelMesh failing, then Ready for 4 s, over and over; its exporter's first
rates after the gap come a read later, so while Ready it reports no request rate. Load drops to 10 req/s on every
pod. The watch forgot when p-0 stopped being Ready at each blip, so the 5 minutes started over, and during the
blip the "missing on a Ready pod" hold had no limit: the replicas never fell. The docs promise: 5 minutes after
it stopped being Ready it is left out, said once at INFO, until it reports fresh data. Each test decides refresh
after refresh on a clock of its own.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import PodSample, RuntimeView
from autoscaler.names import ServedMetric
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.unready_pods import NOT_READY_HOLD_S
from tests.policies.builders import NOW, PROPERTIES, snapshot

DESIRED = ServedMetric.DESIRED_REPLICAS
FAST = RuntimePolicy(target_rps_per_pod=100.0, scale_down_tau_s=0.0)  # no smoothing: any fall shows at once
LOGGER = "autoscaler.policies.unready_pods"
STEP_S = 2.0  # refreshes 2 s apart: each 4 s Ready blip is seen


def sample(name: str, rps: float | None, at: float) -> PodSample:
    """A Ready pod read 1 s before `at` (`rps` None: its first read after a restart, no rate yet)."""
    return PodSample(name, sampled_at=at - 1.0, requests_per_second=rps, queue_delay_s=0.0)


def quiet(at: float) -> tuple[PodSample, ...]:
    return (sample("p-1", 10.0, at), sample("p-2", 10.0, at))


def desired(view: RuntimeView) -> float | None:
    return view.values[DESIRED].value


def test_the_reviewers_crash_loop_lets_the_replicas_fall_after_five_minutes(
        caplog: pytest.LogCaptureFixture) -> None:
    busy = (sample("p-0", 200.0, NOW), sample("p-1", 200.0, NOW), sample("p-2", 200.0, NOW))
    first, memory = decide(snapshot(busy), FAST, None, NOW, 30.0)
    alone, _ = decide(snapshot(quiet(NOW)), FAST, None, NOW, 30.0)
    assert desired(first) == 6.0 and desired(alone) == 1.0  # 600 req/s; without p-0, 20 req/s
    last_good = busy[0]
    crashed = NOW + 1.0  # p-0 stops being Ready; then 26 s not Ready, 4 s Ready, over and over
    at = NOW
    with caplog.at_level(logging.INFO, logger=LOGGER):
        while at < crashed + NOT_READY_HOLD_S + 120.0:
            at += STEP_S
            phase = (at - crashed) % 30.0
            p0 = (replace(last_good, ready=False, unready_since=at - phase) if phase < 26.0
                  else sample("p-0", None, at))  # Ready, ModelMesh failing: no rate read yet
            view, memory = decide(snapshot((p0, *quiet(at))), FAST, memory, at, 30.0)
            if at > crashed + NOT_READY_HOLD_S + STEP_S:
                assert desired(view) == 1.0, (at - crashed, view.held)
    lines = [record.getMessage() for record in caplog.records if record.name == LOGGER]
    assert len(lines) == 1, lines
    assert "pod p-0 not ready for" in lines[0] and "(over 300 s): left out of the values from now" in lines[0]


@PROPERTIES
@given(cycles=st.lists(st.tuples(st.integers(1, 90), st.integers(1, 20), st.booleans()), min_size=1, max_size=25))
def test_a_pod_without_fresh_data_is_never_held_past_the_bound_and_one_with_it_counts_again(
        cycles: list[tuple[int, int, bool]]) -> None:
    """p-0 not Ready for `down` refreshes, then Ready for `up`, reporting its 300 req/s while Ready (`fresh`) or
    nothing new. Past `NOT_READY_HOLD_S` after it first stopped being Ready with no fresh data since, the
    replicas are those of the other pods alone; at a refresh where it reports fresh data, those of all three."""
    busy = (sample("p-0", 300.0, NOW), *quiet(NOW))
    with_it, memory = decide(snapshot(busy), FAST, None, NOW, 30.0)
    without, _ = decide(snapshot(quiet(NOW)), FAST, None, NOW, 30.0)
    last_good = busy[0]
    stopped: float | None = None  # when it first stopped being Ready since it last reported fresh data
    at = NOW
    for down, up, fresh in cycles:
        spell_began = at + STEP_S
        for _ in range(down):
            at += STEP_S
            stopped = spell_began if stopped is None else stopped
            p0 = replace(last_good, ready=False, unready_since=spell_began)
            view, memory = decide(snapshot((p0, *quiet(at))), FAST, memory, at, 30.0)
            if at - stopped > NOT_READY_HOLD_S + STEP_S:
                assert desired(view) == desired(without), (at - stopped, view.held)
        for _ in range(up):
            at += STEP_S
            if fresh:
                last_good = sample("p-0", 300.0, at)
                stopped = None
                p0 = last_good
            else:
                p0 = last_good  # its last good sample, no newer one
            view, memory = decide(snapshot((p0, *quiet(at))), FAST, memory, at, 30.0)
            if fresh:
                assert desired(view) == desired(with_it), view.reason
            elif stopped is not None and at - stopped > NOT_READY_HOLD_S + STEP_S:
                assert desired(view) == desired(without), (at - stopped, view.held)
