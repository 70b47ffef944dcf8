"""The slow fall and the warm-up grace run on time the adapter really spent refreshing, not on its wall clock.

An NTP step, a VM resume or a host clock fix moves the wall clock by minutes or hours in one go; an adapter
stopped (SIGSTOP, a frozen cgroup, a paused VM) sees nothing for as long as it is stopped. Neither is time in
which the adapter watched the load stay low, so neither may lower a served value (docs/design.md, Slow
scale-down). The refresher is driven here on two injected clocks, the wall clock and the monotonic one.
"""

from __future__ import annotations

import logging

import pytest

from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot
from autoscaler.names import ServedMetric
from autoscaler.policies.config import PolicyBook
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.refresher import Refresher
from autoscaler.running_clock import SourceWait
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.sources.base import SourceDefaults

KEY = RuntimeKey("ml", "modelmesh-serving-triton")
DESIRED = ServedMetric.DESIRED_REPLICAS
INTERVAL_S = 15.0


class GpuSource(SourceDefaults):
    """Six pods at one GPU busy, sampled a second before each refresh (on the wall clock, as exporters are);
    `down` names pods whose exporter does not answer."""

    name = "test"
    errors: dict[str, int] = {}

    def __init__(self, busy: float) -> None:
        self.busy = busy
        self.down: set[str] = set()

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        pods = tuple(PodSample(f"pod-{i}", sampled_at=None if f"pod-{i}" in self.down else now - 1,
                               gpu_busy=self.busy, queue_delay_s=0.0) for i in range(6))
        return [RuntimeSnapshot(KEY, pods, now, replicas=6)]

    async def close(self) -> None:
        return None


class Clocks:
    """The wall clock and the monotonic clock, moved together (time passes) or apart (the wall clock steps)."""

    def __init__(self) -> None:
        self.wall = 1_700_000_000.0
        self.monotonic = 5_000.0

    def passes(self, seconds: float) -> None:
        self.wall += seconds
        self.monotonic += seconds

    def refresher(self, source: GpuSource, policy: RuntimePolicy, source_wait: SourceWait | None = None) -> Refresher:
        return Refresher(source, PolicyBook(policy), AdapterMetrics(), interval_s=INTERVAL_S,
                         clock=lambda: self.wall, monotonic=lambda: self.monotonic, source_wait=source_wait)


PROMETHEUS = SourceWait("Prometheus at http://127.0.0.1:22597", "--prometheus-timeout 50 s", deadline_s=101.0)
"""The reviewer's Prometheus: it accepts connections and never answers, a query given up after 50 s."""


class HungSource(GpuSource):
    """A source each read of which takes `hangs_s` of the clocks' time before it answers (its pods' reads
    failed): a Prometheus that accepted the connection and never answered, until its timeout."""

    def __init__(self, clocks: Clocks, hangs_s: float) -> None:
        super().__init__(busy=0.2)
        self.down = {f"pod-{i}" for i in range(6)}
        self.clocks = clocks
        self.hangs_s = hangs_s

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        self.clocks.passes(self.hangs_s)
        return await super().collect(now)


def late_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno >= logging.WARNING and r.getMessage().startswith("no refresh for")]


def desired(refresher: Refresher) -> float | None:
    return refresher.views[KEY].values[DESIRED].value


async def falling(clocks: Clocks) -> tuple[Refresher, GpuSource]:
    """A runtime at 6 pods (6 x 0.8 / 0.8) whose load has just dropped to 6 x 0.2 / 0.8 = 1.5, so 2 pods:
    one refresh into its fall with tau 60 s, 2 + 4 x exp(-15 / 60) = 5.12, served as 6."""
    source = GpuSource(busy=0.8)
    refresher = clocks.refresher(source, RuntimePolicy(scale_down_tau_s=60.0))
    await refresher.refresh_once()
    assert desired(refresher) == 6.0
    source.busy = 0.2
    clocks.passes(INTERVAL_S)
    await refresher.refresh_once()
    assert desired(refresher) == 6.0
    return refresher, source


async def test_a_forward_step_of_the_wall_clock_does_not_end_the_slow_fall(
        caplog: pytest.LogCaptureFixture) -> None:
    clocks = Clocks()
    refresher, _ = await falling(clocks)
    clocks.passes(INTERVAL_S)
    clocks.wall += 3600.0  # NTP steps the clock an hour forward between two refreshes
    with caplog.at_level(logging.WARNING, logger="autoscaler"):
        await refresher.refresh_once()
    # 15 s more of the fall, not 3615 s: 2 + 4 x exp(-30 / 60) = 4.43, served as 5 (it dropped to 2 at once).
    assert desired(refresher) == 5.0
    steps = [r for r in caplog.records if "wall clock" in r.getMessage()]
    assert len(steps) == 1 and steps[0].levelno == logging.WARNING, caplog.text
    assert "+3600 s" in steps[0].getMessage()

    with caplog.at_level(logging.WARNING, logger="autoscaler"):
        clocks.passes(INTERVAL_S)
        await refresher.refresh_once()  # the fall goes on from there: 2 + 4 x exp(-45 / 60) = 3.89, served as 4
    assert desired(refresher) == 4.0
    assert len([r for r in caplog.records if "wall clock" in r.getMessage()]) == 1  # one warning per step


async def test_a_backward_step_of_the_wall_clock_neither_stops_nor_speeds_the_slow_fall() -> None:
    clocks = Clocks()
    refresher, _ = await falling(clocks)
    clocks.passes(INTERVAL_S)
    clocks.wall -= 3600.0
    await refresher.refresh_once()
    assert desired(refresher) == 5.0  # 2 + 4 x exp(-30 / 60) = 4.43, as if the clock had not moved
    clocks.passes(INTERVAL_S)
    await refresher.refresh_once()
    assert desired(refresher) == 4.0  # (it held at 6 for the hour the wall clock took to catch up)


async def test_a_paused_adapter_earns_no_decay_for_the_time_it_did_not_refresh() -> None:
    clocks = Clocks()
    refresher, _ = await falling(clocks)
    clocks.passes(600.0)  # SIGSTOP, a frozen cgroup, a paused VM: ten minutes without a refresh
    await refresher.refresh_once()
    # At most three refresh intervals count: 2 + 4 x exp(-(15 + 45) / 60) = 3.47, served as 4; the ten minutes
    # would have ended the fall (2 + 4 x exp(-615 / 60), within 0.1 of 2: served as 2).
    assert desired(refresher) == 4.0


async def test_a_forward_step_does_not_end_the_warm_up_grace_early() -> None:
    clocks = Clocks()
    source = GpuSource(busy=0.2)
    source.down = {"pod-0"}
    refresher = clocks.refresher(source, RuntimePolicy(warmup_grace_s=30.0))
    await refresher.refresh_once()
    assert not refresher.views[KEY].known and refresher.views[KEY].warming_up
    clocks.passes(INTERVAL_S)
    clocks.wall += 3600.0
    await refresher.refresh_once()  # 15 s of the 30 s grace have passed, not 3615 s: still warming up (503)
    assert not refresher.views[KEY].known and "in 15 s (warmup_grace_s)" in refresher.views[KEY].reason
    clocks.passes(INTERVAL_S)
    await refresher.refresh_once()  # the grace is over: served, not below the 6 replicas that run
    assert refresher.views[KEY].known and desired(refresher) == 6.0


async def test_refreshes_late_from_a_hung_prometheus_blame_it_once_not_the_cpu(
        caplog: pytest.LogCaptureFixture) -> None:
    """The reviewer's run: every refresh waited its 50 s timeout on a Prometheus that never answers, and each said
    'the adapter was stopped or starved of CPU' (the docs then said to raise the CPU limit)."""
    clocks = Clocks()
    source = HungSource(clocks, hangs_s=50.0)
    refresher = clocks.refresher(source, RuntimePolicy(), PROMETHEUS)
    with caplog.at_level(logging.WARNING, logger="autoscaler"):
        for _ in range(4):  # back to back, as the loop runs them when each took longer than its interval
            await refresher.refresh_once()
    assert "starved of CPU" not in caplog.text
    (line,) = late_lines(caplog)
    assert "no refresh for 50 s (every 15 s expected)" in line, line
    assert "waited 50 s on the metrics source, Prometheus at http://127.0.0.1:22597 (--prometheus-timeout 50 s" in line

    caplog.clear()
    source.hangs_s = 0.0  # it answers again: a refresh on time ends the run of late ones
    with caplog.at_level(logging.WARNING, logger="autoscaler"):
        clocks.passes(INTERVAL_S)
        await refresher.refresh_once()
        source.hangs_s = 50.0
        for _ in range(3):
            await refresher.refresh_once()
    assert len(late_lines(caplog)) == 1 and "starved of CPU" not in caplog.text, caplog.text


async def test_a_stop_between_refreshes_that_wait_on_the_source_is_still_the_adapter_stopped(
        caplog: pytest.LogCaptureFixture) -> None:
    clocks = Clocks()
    refresher = clocks.refresher(HungSource(clocks, hangs_s=50.0), RuntimePolicy(), PROMETHEUS)
    await refresher.refresh_once()
    clocks.passes(600.0)  # SIGSTOP after a wait on the source: 650 s between the two refreshes
    with caplog.at_level(logging.WARNING, logger="autoscaler"):
        await refresher.refresh_once()
    (line,) = late_lines(caplog)
    assert "no refresh for 650 s" in line and "the adapter was stopped or starved of CPU" in line, line


async def test_a_wait_on_the_source_past_its_deadline_is_the_adapter_stopped(
        caplog: pytest.LogCaptureFixture) -> None:
    """A wait on the source ends at its deadline (101 s: two timeouts and a second) at the latest: a read that took
    300 s was 199 s of a process stopped (or starved) while it waited, not Prometheus."""
    clocks = Clocks()
    refresher = clocks.refresher(HungSource(clocks, hangs_s=300.0), RuntimePolicy(), PROMETHEUS)
    await refresher.refresh_once()
    with caplog.at_level(logging.WARNING, logger="autoscaler"):
        await refresher.refresh_once()
    (line,) = late_lines(caplog)
    assert "no refresh for 300 s" in line and "the adapter was stopped or starved of CPU" in line, line


async def test_an_adapter_stopped_between_refreshes_says_so(caplog: pytest.LogCaptureFixture) -> None:
    clocks = Clocks()
    refresher, _ = await falling(clocks)
    clocks.passes(600.0)
    with caplog.at_level(logging.WARNING, logger="autoscaler"):
        await refresher.refresh_once()
    (line,) = late_lines(caplog)
    assert line.startswith("no refresh for 600 s (every 15 s expected): the adapter was stopped or starved of CPU")
