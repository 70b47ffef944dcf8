"""What the tries of a failed review promise: they fit the review's deadline, never come sooner than the server
asked, and never hammer it (the first wait is half a second, each wait longer than the one before)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.review_backoff import TRIES, wait_before_try, worth_another_try
from autoscaler.kube.reviews import DEFAULT_TIMEOUT_S

DRAWS = st.lists(st.floats(0.0, 1.0, exclude_max=True), min_size=TRIES - 1, max_size=TRIES - 1)


@given(DRAWS)
def test_all_tries_fit_within_half_the_deadline_of_a_review(draws: list[float]) -> None:
    waits = [wait_before_try(failed, draw, None) for failed, draw in enumerate(draws, start=1)]
    assert sum(waits) < DEFAULT_TIMEOUT_S / 2
    assert waits[0] >= 0.5
    assert all(later > earlier for earlier, later in itertools.pairwise(waits))


@given(st.integers(1, TRIES - 1), st.floats(0.0, 1.0, exclude_max=True), st.floats(0.0, 60.0))
def test_never_sooner_than_the_server_asked(failed: int, draw: float, retry_after_s: float) -> None:
    assert wait_before_try(failed, draw, retry_after_s) >= retry_after_s


def test_what_is_tried_again() -> None:
    assert [worth_another_try(KubeApiError("x", status)) for status in (None, 429, 500, 503, 504)] == [True] * 5
    assert [worth_another_try(KubeApiError("x", status)) for status in (400, 401, 403, 404, 409)] == [False] * 5
