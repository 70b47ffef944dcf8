"""`SaidOnce` under any churn: a warning said once per object for as long as it is there, once per object
ever while no more than the bound have gone, and what is remembered bounded by those there and the bound.

Each step is what a watch does at an event: the object created or deleted, then every object there asked about
(`first_time`: a warning for it now?) and the rest given up as gone (`keep`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.said_once import SaidOnce

STEPS = st.lists(st.tuples(st.booleans(), st.integers(min_value=0, max_value=30)), max_size=200)
"""(created or deleted, which object), in order."""


def churned(steps: list[tuple[bool, int]], gone_kept: int) -> tuple[list[int], list[set[int]], list[int]]:
    """The objects warned about at each step, in order; the objects there after each step; the memory's size."""
    said_once: SaidOnce[int] = SaidOnce(gone_kept)
    live: set[int] = set()
    said: list[int] = []
    lives: list[set[int]] = []
    sizes: list[int] = []
    for created, key in steps:
        (live.add if created else live.discard)(key)
        said.extend(k for k in sorted(live) if said_once.first_time(k))
        said_once.keep(live)
        lives.append(set(live))
        sizes.append(len(said_once))
    return said, lives, sizes


@given(STEPS, st.integers(min_value=0, max_value=10))
def test_memory_is_bounded_by_the_objects_there_and_the_bound(steps: list[tuple[bool, int]], kept: int) -> None:
    _, lives, sizes = churned(steps, kept)
    assert all(size <= len(live) + kept for size, live in zip(sizes, lives, strict=True))


@given(STEPS, st.integers(min_value=0, max_value=10))
def test_an_object_is_said_once_while_it_stays(steps: list[tuple[bool, int]], kept: int) -> None:
    said_once: SaidOnce[int] = SaidOnce(kept)
    live: set[int] = set()
    said_while_there: set[int] = set()
    for created, key in steps:
        (live.add if created else live.discard)(key)
        said_while_there &= live  # gone: its next stay may be news again
        for k in sorted(live):
            if said_once.first_time(k):
                assert k not in said_while_there, f"{k} said twice while there"
                said_while_there.add(k)
        said_once.keep(live)


@given(STEPS)
def test_within_the_bound_an_object_back_again_is_never_said_again(steps: list[tuple[bool, int]]) -> None:
    said, _, _ = churned(steps, gone_kept=31)  # every object there can be
    assert len(said) == len(set(said)) == len({key for created, key in steps if created})
