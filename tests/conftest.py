"""Hypothesis without its deadline, and the order test files are handed to the xdist workers.

Hypothesis fails an example that takes longer than 200 ms, and says the test is flaky when a rerun is quicker: a
timing assertion, which the tests never make. On the two-core CI machine with three test files at once a 1 ms
example of `test_open_paths` once took 632 ms and failed the suite. The project's profile drops the deadline
everywhere (the tests that said `deadline=None` each still may).

The order (`./run test`: `-n 6 --dist loadfile`).

xdist's own order gives the files with the most tests first, so the end-to-end files of one or two long tests
(a minute of real processes each) came last, and one of them could run alone on one worker while the other
worker had nothing left: the suite ended up to a minute after it could have. Putting every file with a test
marked `slow` first fixed that end but starved the start: those files mostly wait on refresh intervals, and
with all three workers in them the two cores were 1.35 busy for the first 390 s of a 740 s run (then 2.0 to
the end; measured 4 December 2026 from each test's CPU time and its processes'). So the slow files still go
first, each by falling number of tests, but each is followed by one of the others (the largest first), which
keep the cores busy while the slow ones wait (1.8 to 1.9 busy in the first four minutes; 716 s in all, on a
machine then a tenth slower at the same in-process tests); the many quick files fill in at the end. pyproject's
`--no-loadscope-reorder` makes xdist keep this order instead of sorting its own.
"""

from __future__ import annotations

import warnings
from collections import Counter

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.errors import HypothesisSideeffectWarning, NonInteractiveExampleWarning

settings.register_profile("modelmesh-autoscaler", deadline=None)
settings.load_profile("modelmesh-autoscaler")


def pytest_configure(config: pytest.Config) -> None:
    """On a clean clone (CI's) every xdist worker built Hypothesis's Unicode tables for its first text strategy,
    all at once: 1.5 CPU-s a worker, 10 CPU-s of the run. The controller builds them before it starts the workers,
    into `.hypothesis/unicode_data/` (where Hypothesis keeps them), and the workers read them from there. Hypothesis
    warns of slow work while plugins load: here it is the point, and done once."""
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NonInteractiveExampleWarning)
        warnings.simplefilter("ignore", HypothesisSideeffectWarning)
        st.text().example()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests_in = Counter(item.path for item in items)
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    by_size = sorted(tests_in, key=lambda path: (-tests_in[path], str(path)))
    waiting = [path for path in by_size if path in slow]
    busy = [path for path in by_size if path not in slow]
    order = [path for pair in zip(waiting, busy, strict=False) for path in pair]
    order += waiting[len(busy):] + busy[len(waiting):]
    position = {path: index for index, path in enumerate(order)}
    # A stable sort on a key shared by all the tests of a file keeps each file's tests together and in order.
    items.sort(key=lambda item: position[item.path])
