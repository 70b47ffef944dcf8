"""`FailingSpell`'s promise to an operator reading a watch's log, whatever the retries: a WARNING starts each failing
spell and an all-clear ends it, never two of either in a row, and nothing at all while it keeps failing or working."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.kube.failing_spell import FailingSpell


@given(st.booleans(), st.lists(st.booleans(), max_size=200))
def test_the_lines_said_alternate_one_a_spell(failing: bool, outcomes: list[bool]) -> None:
    """`outcomes`: True a time the loop works, False a failure, in the order they came."""
    spell = FailingSpell(failing=failing)
    said: list[str] = []
    for works in outcomes:
        if works and spell.works():
            said.append("all clear")
        elif not works and spell.failed():
            said.append("warning")
    assert all(a != b for a, b in pairwise(said)), said
    if said:  # the first line is the one the start calls for: an all-clear only where it starts as failing
        assert said[0] == ("all clear" if failing else "warning"), said
    spells = sum(1 for before, now in pairwise([not failing, *outcomes]) if before and not now)
    assert said.count("warning") == spells, said
