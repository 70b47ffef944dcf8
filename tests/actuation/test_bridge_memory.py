"""The bridge's memory of a RuntimeScale's reconciled spec: which events are late."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.actuation.bridge_memory import ScaleMemory

uids = st.sampled_from(["uid-a", "uid-b"])


def scale(uid: str, generation: int) -> dict[str, Any]:
    return {"metadata": {"uid": uid, "generation": generation}}


@given(st.lists(st.tuples(uids, st.integers(1, 20)), min_size=1, max_size=10), uids, st.integers(1, 20))
def test_an_event_is_late_only_when_a_newer_spec_of_the_same_object_was_reconciled_last(
        reconciled: list[tuple[str, int]], uid: str, generation: int) -> None:
    memory = ScaleMemory()
    newest: dict[str, int] = {}
    last_uid = ""
    for seen_uid, seen in reconciled:
        memory.note_reconciled(scale(seen_uid, seen))
        if seen_uid != last_uid:
            newest = {seen_uid: seen}  # another object under the name: the old one's specs say nothing
        else:
            newest[seen_uid] = max(newest[seen_uid], seen)
        last_uid = seen_uid
    assert memory.reconciled_newer_than(scale(uid, generation)) == (generation < newest.get(uid, 0))
