"""The refresh process's GC settings (autoscaler/gcsettings.py): start-up objects frozen, fewer collections,
and reference cycles made afterwards still collected. Run in a child interpreter: the settings are global."""

from __future__ import annotations

import subprocess
import sys
import textwrap

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
