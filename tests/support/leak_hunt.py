"""A pytest plugin that names the test that leaked a socket, not the test the garbage collector happened to run in.

With `filterwarnings = error`, a connection left open by one test fails whichever later test of the same xdist worker
the collector runs in ("ResourceWarning: unclosed <socket.socket ...>" as PytestUnraisableExceptionWarning), so the
failing test is innocent. Loaded on purpose, never by default (it collects garbage after every test, which is slow):

    PYTHONTRACEMALLOC=20 LEAK_HUNT_OUT=/tmp/leaks.txt python -m pytest -p tests.support.leak_hunt tests/...

After each test it collects garbage and writes to `LEAK_HUNT_OUT` (default `leak-hunt.txt`) the test's id with
every ResourceWarning and unraisable exception that raised, and each asyncio transport still holding a socket
whose event loop has already closed (leaked even while something still refers to it); with `PYTHONTRACEMALLOC`
the warnings come with where the object was allocated.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import tracemalloc
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

_OUT = os.environ.get("LEAK_HUNT_OUT", "leak-hunt.txt")


def _leaked_transports() -> Iterator[str]:
    """Transports with an open socket on a closed loop: nothing will ever close them."""
    for thing in gc.get_objects():
        if isinstance(thing, asyncio.BaseTransport) and hasattr(thing, "_sock"):
            loop: Any = getattr(thing, "_loop", None)
            sock: Any = getattr(thing, "_sock", None)
            if loop is not None and loop.is_closed() and sock is not None and sock.fileno() != -1:
                yield f"OPEN ON A CLOSED LOOP {thing!r} {sock!r}"


def _allocated_at(source: object) -> str:
    trace = tracemalloc.get_object_traceback(source) if source is not None else None
    return "" if trace is None else "\n    allocated at:\n      " + "\n      ".join(trace.format())


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield
    found: list[str] = []
    previous = sys.unraisablehook

    def record(unraisable: Any) -> None:
        found.append(f"UNRAISABLE {unraisable.exc_type.__name__}: {unraisable.exc_value} in {unraisable.object!r}")

    sys.unraisablehook = record
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            gc.collect()
            gc.collect()
        found += [f"{w.category.__name__}: {w.message}{_allocated_at(w.source)}" for w in caught]
        found += list(_leaked_transports())
    finally:
        sys.unraisablehook = previous
    if found:
        with open(_OUT, "a") as out:
            out.write(f"== {item.nodeid}\n" + "\n".join(found) + "\n")
