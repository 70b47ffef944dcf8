"""`FailuresInARow`: what a retrying loop's backoff counts after failures the API server did and did not answer.

The promise: an answered failure (a 5xx, a 429) backs off as the first, second ... answered failure in a row, however
many tries nobody answered came before it (an outage of refused connections, then a 503 of an API server still
starting: its wait is the base backoff, not the cap those tries had doubled to); a failure nobody answered counts
every failure in a row (its wait is capped at `UNANSWERED_MAX_S` by the caller); the logs count them all."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.kube.backoff import FailuresInARow
from autoscaler.kube.errors import KubeApiError

REFUSED = KubeApiError("list pods in namespace ml: Cannot connect to host")
STARTING = KubeApiError("list pods in namespace ml: 503 ServiceUnavailable", 503, "ServiceUnavailable")


def test_a_503_after_an_outage_of_refused_tries_is_the_first_answered_failure() -> None:
    in_a_row = FailuresInARow()
    assert [in_a_row.failed(REFUSED) for _ in range(12)] == list(range(1, 13))
    assert in_a_row.failed(STARTING) == 1  # 0.5 s for pod discovery, not its 30 s cap
    assert in_a_row.failed(STARTING) == 2
    assert in_a_row.failed(REFUSED) == 15  # an outage again: capped at about 4 s by the caller
    assert in_a_row.failures == 15


@given(st.lists(st.booleans(), max_size=40))
def test_an_answered_failure_counts_the_answered_ones_alone_and_the_logs_count_every_one(
        answers: list[bool]) -> None:
    in_a_row = FailuresInARow()
    answered = 0
    for index, answer in enumerate(answers, start=1):
        n = in_a_row.failed(STARTING if answer else REFUSED)
        answered += answer
        assert n == (answered if answer else index)
        assert in_a_row.failures == index
    in_a_row.reset()
    assert in_a_row.failed(REFUSED) == 1 and in_a_row.failed(STARTING) == 1


@given(st.lists(st.booleans(), min_size=1, max_size=6))
def test_a_try_of_several_calls_is_answered_where_any_call_was(answers: list[bool]) -> None:
    """The Deployment resync reads every namespace in one try: one answer among refusals is the server's word."""
    in_a_row = FailuresInARow()
    in_a_row.failed(REFUSED)
    in_a_row.failed(REFUSED)
    n = in_a_row.failed(*(STARTING if answer else REFUSED for answer in answers))
    assert n == (1 if any(answers) else 3)
