"""A clock that moves only when the test says so: monotonic or wall-clock seconds, whichever the code under
test reads, passed in (or patched in) where it would read the real one."""

from __future__ import annotations


class SteppedClock:
    """Seconds from `start` that change only by `advance` (or by setting `now`)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
