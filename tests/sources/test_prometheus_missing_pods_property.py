"""What `--source prometheus` promises of a Ready pod Prometheus has no series for while it has the runtime's other
pods' (`prometheus_missing_pods`), whatever the rounds, Prometheus's outages included: the pod is named once per run
without it, as soon as its last sample is `max_staleness_s` old (it counts as stale) and Prometheus has answered for
`max_staleness_s` since a round it did not answer (an outage, an empty TSDB held), and not before: a Prometheus back
from one scrapes one pod before another."""

from __future__ import annotations

import logging

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import PodSample, RuntimeKey
from autoscaler.sources.base import PodTarget, RuntimeInventory
from autoscaler.sources.prometheus_missing_pods import MissingPods
from tests.support.log_lines import catching

STALE_S = 30.0
KEY = RuntimeKey("team-a", "triton")
SEEN, MISSING = ("team-a", "a-1"), ("team-a", "a-2")
INVENTORY = {KEY: RuntimeInventory(KEY, (PodTarget("a-1", True, None), PodTarget("a-2", True, None)))}

rounds = st.lists(st.tuples(st.floats(min_value=0.5, max_value=40, allow_nan=False),
                            st.sampled_from(["with", "without", "no answer"])), min_size=1, max_size=30)


@given(rounds)
def test_a_missing_pod_is_named_once_prometheus_has_answered_without_it_for_max_staleness(
        later: list[tuple[float, str]]) -> None:
    missing = MissingPods("http://prometheus:9090", STALE_S)
    with catching("autoscaler.sources.prometheus", logging.WARNING) as lines:
        now = 0.0
        last: dict[tuple[str, str], PodSample] = {}
        answering_since = 0.0  # the first answer since Prometheus last did not answer
        unanswered = False
        named_in_run = False
        for step, kind in [(0.0, "with"), *later]:
            now += step
            lines.lines.clear()
            if kind == "no answer":
                missing.unanswered()
                unanswered = True
                continue
            if unanswered:
                answering_since, unanswered = now, False
            seen = {SEEN, MISSING} if kind == "with" else {SEEN}
            if kind == "with":
                last[MISSING] = PodSample(name="a-2", sampled_at=now)
            missing.note(INVENTORY, seen, (), last, now)
            named = [line for line in lines.lines if "team-a/a-2" in line]
            if kind == "with":
                assert not named
                named_in_run = False
                continue
            sampled_at = last[MISSING].sampled_at
            assert sampled_at is not None
            due = now - sampled_at >= STALE_S and now - answering_since >= STALE_S
            assert len(named) == (1 if due and not named_in_run else 0), (now, sampled_at, answering_since, named)
            named_in_run = named_in_run or bool(named)
