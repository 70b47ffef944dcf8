"""What `--source prometheus` promises of a signal series Prometheus stops having for a pod whose other series it
has (`prometheus_dropped_series`), whatever the rounds: one WARNING per run of rounds without it, and only for a run
that has lasted `max_staleness_s`; /debug shows the pod for exactly as long as such a run lasts; the INFO line that
it is back follows only a run the WARNING named."""

from __future__ import annotations

import logging

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import RuntimeKey
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.prometheus_dropped_series import DroppedSeries
from tests.support.log_lines import catching

STALE_S = 30.0
KEY = RuntimeKey("team-a", "triton")
POD = ("team-a", "a-1")
INVENTORY = {KEY: RuntimeInventory(KEY, (PodTarget("a-1", True, None),))}

rounds = st.lists(st.tuples(st.floats(min_value=0.5, max_value=40, allow_nan=False), st.booleans()),
                  min_size=1, max_size=30)


@given(rounds)
def test_each_run_without_the_series_is_named_once_when_it_has_lasted_max_staleness(
        later: list[tuple[float, bool]]) -> None:
    dropped = DroppedSeries("http://prometheus:9090", STALE_S)
    with catching("autoscaler.sources.prometheus") as lines:
        now, run_start, named_in_run = 0.0, None, False
        for step, has_it in [(0.0, True), *later]:  # Prometheus had it for the pod at first
            now += step
            lines.clear()
            dropped.note(INVENTORY, {"requests_per_second": {POD} if has_it else set()}, {POD}, now)
            warned = [r for r in lines.records if r.levelno == logging.WARNING]
            back = [r for r in lines.records if r.levelno == logging.INFO]
            if has_it:
                assert not warned
                assert bool(back) == named_in_run, (now, back)
                run_start, named_in_run = None, False
            else:
                run_start = now if run_start is None else run_start
                lasted = now - run_start >= STALE_S
                assert len(warned) == (1 if lasted and not named_in_run else 0), (now, run_start, warned)
                named_in_run = named_in_run or bool(warned)
            problems = dropped.problems(KEY)
            assert len(problems) == (1 if run_start is not None and now - run_start >= STALE_S else 0), problems
            assert all("modelmesh_pod_requests_per_second" in p.detail and p.pod == "a-1" for p in problems)
