"""`RetryGuard.wait`'s promise, whatever the owner's backoff does: a finite wait, never before the server's
`Retry-After`, the backoff's own answer where it is one, and at most the fallback's cap where it is not."""

from __future__ import annotations

import logging
import math

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.kube.retry_guard import FALLBACK_CAP_S, RetryGuard

log = logging.getLogger("tests.kube.retry_guard")

answers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.just(None))
"""What the backoff answers; None: it raises."""


@given(answer=answers, failures=st.integers(min_value=1, max_value=10**6),
       retry_after=st.one_of(st.none(), st.floats(min_value=0, max_value=3600)))
def test_the_wait_is_always_one(answer: float | None, failures: int, retry_after: float | None) -> None:
    def backoff(n: int) -> float:
        if answer is None:
            raise OverflowError("int too large to convert to float")
        return answer

    wait = RetryGuard(backoff, log=log, name="test watch").wait(failures, retry_after)

    assert math.isfinite(wait) and wait >= (retry_after or 0.0)
    if answer is not None and math.isfinite(answer) and answer >= 0:
        assert wait == max(answer, retry_after or 0.0)
    else:
        assert wait <= max(FALLBACK_CAP_S, retry_after or 0.0)
