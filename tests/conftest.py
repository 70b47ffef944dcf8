"""Hypothesis without its deadline, and the order test files are handed to the xdist workers.

Hypothesis fails an example that takes longer than 200 ms, and says the test is flaky when a rerun is quicker: a
timing assertion, which the tests never make. On the two-core CI machine with three test files at once a 1 ms
example of `test_open_paths` once took 632 ms and failed the suite. The project's profile drops the deadline
everywhere (the tests that said `deadline=None` each still may).

The order (`./run test`: `-n 3 --dist loadfile`).

xdist's own order gives the files with the most tests first, so the end-to-end files of one or two long tests
(a minute of real processes each) came last, and one of them could run alone on one worker while the other
worker had nothing left: the suite ended up to a minute after it could have. Here the files with a test marked
`slow` go first, then the rest, each group by falling number of tests as before: the many quick files fill in
at the end. pyproject's `--no-loadscope-reorder` makes xdist keep this order instead of sorting its own.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import settings

settings.register_profile("modelmesh-autoscaler", deadline=None)
settings.load_profile("modelmesh-autoscaler")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    slow_files = {item.path for item in items if item.get_closest_marker("slow") is not None}
    tests_in = Counter(item.path for item in items)
    # A stable sort on a key shared by all the tests of a file keeps each file's tests together and in order.
    items.sort(key=lambda item: (item.path not in slow_files, -tests_in[item.path], str(item.path)))
