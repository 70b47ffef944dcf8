"""`FailingSpell`'s promise to an operator reading a watch's log, whatever the retries: a WARNING starts each failing
spell, and another each time the failure's cause changes within it (a dropped stream, then a 403: the log must not
blame the network for RBAC); an all-clear ends it; never two all-clears in a row, never two WARNINGs of one cause
without an all-clear or another cause between, and nothing at all while it keeps failing the same way or working.
A spell that starts with the watch (one that starts as failing, so that its first success is said) is warned of
too: a pod watch refused from its start said nothing above DEBUG until it worked."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.failing_spell import FailingSpell
from autoscaler.kube.watch_health import failure_reason

FAILURES = [KubeApiError("stream broken"), KubeApiError("forbidden", 403), KubeApiError("throttled", 429),
            KubeApiError("unavailable", 503), RuntimeError("the adapter's own bug")]
"""One error of each of several causes (`failure_reason`)."""


@given(st.booleans(), st.lists(st.none() | st.sampled_from(FAILURES), max_size=200))
def test_the_lines_said_alternate_one_a_spell_and_cause(failing: bool, outcomes: list[Exception | None]) -> None:
    """`outcomes`: None a time the loop works, an error a failure, in the order they came."""
    spell = FailingSpell(failing=failing)
    said: list[str] = []
    for outcome in outcomes:
        if outcome is None and spell.works():
            said.append("all clear")
        elif outcome is not None and spell.failed(outcome):
            said.append(f"warning: {failure_reason(outcome)}")
    assert all(a != b for a, b in pairwise(said)), said
    if outcomes and outcomes[0] is not None:  # the first failure is said, however the watch started
        assert said[0] == f"warning: {failure_reason(outcomes[0])}", said
    elif said:  # an all-clear first only where it starts as failing
        assert said[0] == "all clear" if failing else said[0].startswith("warning"), said
    # Each spell said, the one the watch starts in too: its first cause, and each change of cause after it.
    expected: list[str] = []
    in_spell, last = failing, None
    for outcome in outcomes:
        if outcome is None:
            if in_spell:
                expected.append("all clear")
            in_spell, last = False, None
        elif not in_spell or failure_reason(outcome) != last:
            last = failure_reason(outcome)
            expected.append(f"warning: {last}")
            in_spell = True
    assert said == expected, (said, expected)
