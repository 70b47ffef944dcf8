"""A runtime whose pods stopped reporting per-model use forgets it after a window; a short gap still holds.

A runtime remembers that its pods reported per-model use (`SIGNAL_MODELS` in its `seen`), so that a pod, or
every pod, that reports none now holds the cache term rather than dropping its cache need. That memory never
shrank: a runtime whose ModelMesh was downgraded to one without per-model metrics (or an exporter rolled back)
held its last cache proposal for as long as the adapter ran: `per-model use missing on 4 of 4 ready pods` in
/debug's `held`, and `modelmesh_desired_replicas` never below it, hours after the load had gone.

The exporters' texts are read as the scrape source reads them (`read_exporter_text`) and decided refresh after
refresh, as the adapter does. The by-hand runtime: four pods with 3 models at cache use 0.5 (6 models a pod),
each the only one to have served 10 models in the last `target_lru_age_s`: 40 models need ceil(40 / 6) = 7
pods; at 10 req/s each and `target_rps_per_pod` 20, the request term asks for 4 x 10 / 20 = 2; no GPU.
"""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import RuntimeKey, RuntimeSnapshot, RuntimeView
from autoscaler.names import ServedMetric
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.runtime_memory import RuntimeMemory
from autoscaler.sources.exposition import read_exporter_text
from tests.policies.builders import PROPERTIES
from tests.support.exporter_texts import exporter_text

KEY = RuntimeKey("ns", "modelmesh-serving-x")
START = 2_000_000_000.0
WINDOW = 30.0
STEP = 15.0
POLICY = RuntimePolicy(scale_down_tau_s=0.0, target_rps_per_pod=20.0)  # target_lru_age_s: the 600 s default
FORGOTTEN = "forgets its per-model use"


def refresh(reporting: list[bool], now: float, memory: RuntimeMemory | None,
            policy: RuntimePolicy = POLICY, models_unread: bool = False) -> tuple[RuntimeView, RuntimeMemory]:
    pods = tuple(read_exporter_text(exporter_text(i, now, "recent" if per_model else None), f"pod-{i}", True,
                                    now).sample for i, per_model in enumerate(reporting))
    return decide(RuntimeSnapshot(KEY, pods, now, models_unread=models_unread), policy, memory, now, WINDOW)


def served(view: RuntimeView) -> float | None:
    return view.values[ServedMetric.DESIRED_REPLICAS].value


def test_a_runtime_whose_pods_stopped_reporting_per_model_use_forgets_it_after_target_lru_age_s(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    view, memory = refresh([True] * 4, START, None)
    assert served(view) == 7.0, view.reason

    # ModelMesh downgraded: no per-model metrics any more. For a window, the cache term holds its last proposal.
    steps = int(POLICY.target_lru_age_s // STEP)
    for step in range(1, steps):
        view, memory = refresh([False] * 4, START + STEP * step, memory)
        assert served(view) == 7.0, (step, view.reason)
        assert "per-model use missing on 4 of 4 ready pods" in view.held["cache proposal"], view.held
    assert FORGOTTEN not in caplog.text

    # A whole target_lru_age_s without it: every model the held proposal counted is outside the window now.
    view, memory = refresh([False] * 4, START + STEP * steps, memory)
    assert served(view) == 2.0, view.reason  # the request term's
    assert "cache proposal" not in view.held, view.held
    [forgot] = [r for r in caplog.records if FORGOTTEN in r.getMessage()]
    assert forgot.levelno == logging.INFO
    assert str(KEY) in forgot.getMessage() and "7 pods" in forgot.getMessage(), forgot.getMessage()
    assert "target_lru_age_s" in forgot.getMessage(), forgot.getMessage()

    for step in range(1, 240):  # an hour on: still forgotten, said once
        view, memory = refresh([False] * 4, START + STEP * (steps + step), memory)
        assert served(view) == 2.0 and "cache proposal" not in view.held, view.held
    assert len([r for r in caplog.records if FORGOTTEN in r.getMessage()]) == 1

    # A pod that reports per-model use again brings it back: the cache need proposes as ever.
    view, memory = refresh([True] * 4, START + STEP * (steps + 240), memory)
    assert served(view) == 7.0, view.reason


def test_one_pod_that_still_reports_keeps_the_memory() -> None:
    """Three pods without per-model use beside one with it: those three may have served models nobody counted,
    so the cache term is held however long it lasts (the forgetting is for a runtime none of whose pods reports)."""
    view, memory = refresh([True] * 4, START, None)
    for step in range(1, 100):
        view, memory = refresh([False] * 3 + [True], START + STEP * step, memory)
        assert served(view) == 7.0, (step, view.reason)
        assert "per-model use missing on 3 of 4 ready pods" in view.held["cache proposal"], view.held


@PROPERTIES
@given(gaps=st.lists(st.integers(min_value=1, max_value=int(600 // STEP) - 1), min_size=1, max_size=6))
def test_gaps_shorter_than_the_window_never_lower_the_served_replicas(gaps: list[int]) -> None:
    """Per-model use gone from every pod for less than `target_lru_age_s` at a time (a models query failing, an
    exporter restart), back in between: the cache term holds throughout, the replicas never fall below 7."""
    view, memory = refresh([True] * 4, START, None)
    now = START
    for gap in gaps:
        for _ in range(gap):
            now += STEP
            view, memory = refresh([False] * 4, now, memory)
            assert served(view) == 7.0, view.reason
        now += STEP
        view, memory = refresh([True] * 4, now, memory)
        assert served(view) == 7.0, view.reason


def test_a_models_query_failing_for_an_hour_never_lowers_and_then_ages_from_its_answer(
        caplog: pytest.LogCaptureFixture) -> None:
    """Prometheus mode: the recent-models query fails for an hour (`models_unread`; every other signal read). No
    pod's per-model use is evidence of nothing, so the cache term holds all that hour; once the query answers
    without per-model use, a whole `target_lru_age_s` of answers passes before the runtime forgets it."""
    caplog.set_level(logging.INFO)
    view, memory = refresh([True] * 4, START, None)
    now = START
    for _ in range(240):  # an hour of a failing query
        now += STEP
        view, memory = refresh([False] * 4, now, memory, models_unread=True)
        assert served(view) == 7.0, view.reason
    assert FORGOTTEN not in caplog.text
    steps = int(POLICY.target_lru_age_s // STEP)
    for _ in range(steps - 1):  # it answers: ModelMesh really reports none now
        now += STEP
        view, memory = refresh([False] * 4, now, memory)
        assert served(view) == 7.0, view.reason
    view, memory = refresh([False] * 4, now + STEP, memory)
    assert served(view) == 2.0 and FORGOTTEN in caplog.text, view.reason


def test_the_forgetting_line_says_a_target_lru_age_s_under_a_second_as_set(caplog: pytest.LogCaptureFixture) -> None:
    """`target_lru_age_s: 0.5` (the policy file takes any over 0) was said `target_lru_age_s 0 s`: a window that
    forgets at once, not the half second set."""
    caplog.set_level(logging.INFO)
    policy = RuntimePolicy(scale_down_tau_s=0.0, target_rps_per_pod=20.0, target_lru_age_s=0.5)
    _, memory = refresh([True] * 4, START, None, policy)
    refresh([False] * 4, START + 1.0, memory, policy)
    [forgot] = [r.getMessage() for r in caplog.records if FORGOTTEN in r.getMessage()]
    assert "(target_lru_age_s 0.5 s," in forgot, forgot
