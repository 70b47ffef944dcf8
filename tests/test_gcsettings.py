"""The refresh process's GC settings (autoscaler/gcsettings.py): start-up objects frozen, fewer collections,
and reference cycles made afterwards still collected. Run in a child interpreter: the settings are global."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from hypothesis import example, given, settings
from hypothesis import strategies as st

from autoscaler.gcsettings import GROWTH_BEFORE_COLLECTING, THRESHOLDS

CHILD = textwrap.dedent("""
    import gc, weakref
    from autoscaler.gcsettings import tune_for_refresh

    tune_for_refresh()
    print(gc.get_threshold(), gc.get_freeze_count() > 0)

    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle made after start-up, as a refresh could
    alive = weakref.ref(a)
    del a, b
    gc.collect()
    print(alive() is None)
""")


def test_refresh_process_collects_less_often_and_still_finds_cycles() -> None:
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.splitlines() == ["(50000, 20, 10) True", "True"]


SERVING_CHILD = textwrap.dedent("""
    import gc, weakref
    from autoscaler.gcsettings import tune_for_serving

    before = gc.get_threshold()
    tune_for_serving()
    print(gc.get_threshold() == before, gc.get_freeze_count() > 0)

    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle made while serving
    alive = weakref.ref(a)
    del a, b
    gc.collect()
    print(alive() is None)
""")


def test_a_serving_worker_freezes_its_start_up_keeps_the_thresholds_and_still_finds_cycles() -> None:
    done = subprocess.run([sys.executable, "-c", SERVING_CHILD], capture_output=True, text=True, check=True,
                          timeout=60)
    assert done.stdout.splitlines() == ["True True", "True"]



AFTER_REFRESH_CHILD = textwrap.dedent("""
    import asyncio, gc, sys, weakref
    from autoscaler.gcsettings import CollectAfterRefresh, tune_for_refresh

    def collections():
        return sum(generation["collections"] for generation in gc.get_stats())

    class Node:
        __slots__ = ("other", "__weakref__")

    def leave_cycle():
        a, b = Node(), Node()
        a.other, b.other = b, a  # two objects that refer to each other: garbage only the collector frees
        return weakref.ref(a)

    tune_for_refresh()
    listener = CollectAfterRefresh()
    cycles, held = [], []
    for refresh in sys.argv[1:]:
        # each refresh: objects allocated and freed in it; cycles it leaves as garbage; cycles it holds until the
        # next drops them (a connection open across the collection that ends a refresh, closed in the next)
        passing, garbage, holding = map(int, refresh.split(":"))
        kept = [[] for _ in range(passing)]
        del kept
        cycles += [leave_cycle() for _ in range(garbage)]
        held.clear()
        for _ in range(holding):
            a, b = Node(), Node()
            a.other, b.other = b, a
            held.append(a)
            cycles.append(weakref.ref(a))
        a = b = None
        before = collections()
        asyncio.run(listener.after_refresh({}))
        print(sum(cycle() is not None for cycle in cycles) - len(held), collections() - before)
""")


@settings(max_examples=15, deadline=None)
@example([(1_000, 300, 0)] * 40)  # a churning small fleet's 40 refreshes: 12,000 cycles left behind in all
@example([(1_000, 0, 300)] * 40)  # the same, each cycle garbage only once a collection has passed it
@example([(20_000, 0, 0)] * 40)  # a quiet one's
@given(st.lists(st.tuples(st.sampled_from([0, 1_000, 20_000]), st.integers(0, 300), st.integers(0, 300)),
                min_size=1, max_size=40))
def test_a_small_fleets_garbage_waits_for_a_bounded_growth_and_a_quiet_one_collects_nothing(
    refreshes: list[tuple[int, int, int]],
) -> None:
    # refreshes under the young threshold (a small fleet's): the cycles left waiting never exceed what
    # GROWTH_BEFORE_COLLECTING counts (two objects a cycle) and the last two refreshes' own, however many ran
    done = subprocess.run([sys.executable, "-c", AFTER_REFRESH_CHILD, *(":".join(map(str, r)) for r in refreshes)],
                          capture_output=True, text=True, check=True, timeout=60)
    rows = [tuple(map(int, line.split())) for line in done.stdout.splitlines()]
    assert len(rows) == len(refreshes)
    for waiting, _ in rows:
        assert waiting <= GROWTH_BEFORE_COLLECTING // 2 + 2 * 600
    if not any(garbage or holding for _, garbage, holding in refreshes):
        assert [started for _, started in rows] == [0] * len(rows)  # nothing left behind: no collection started


def test_a_large_fleets_refresh_runs_its_own_collections_and_the_listener_adds_none() -> None:
    # each refresh allocates more than the young threshold in passing: its own young collections run, and
    # the garbage it leaves is theirs to find; the listener starts nothing more
    refreshes = [f"{THRESHOLDS[0] + 10_000}:300:300"] * 12
    done = subprocess.run([sys.executable, "-c", AFTER_REFRESH_CHILD, *refreshes], capture_output=True, text=True,
                          check=True, timeout=60)
    assert [line.split()[1] for line in done.stdout.splitlines()] == ["0"] * len(refreshes)
