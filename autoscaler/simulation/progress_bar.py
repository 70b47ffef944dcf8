"""`simulate`'s progress bar, and its converters': one line on stderr per policy replayed or file read.

Stdlib only, so that `simulate`, `request_log` and `minute_table` import it at the top without loading the
report module (numpy, the engine) before a run needs it.
"""

from __future__ import annotations

import sys
import time
from typing import ClassVar, TextIO


class ProgressBar:
    """A one-line bar on stderr per policy, redrawn at most every 2%."""

    drawing: ClassVar[TextIO | None] = None
    """The stream a bar was last drawn on short of its end (a terminal's line not yet ended): `end_line`."""

    @classmethod
    def end_line(cls) -> None:
        """End the line a bar was left on, so that what follows (an error) starts a line of its own rather
        than being glued to "reading [####......]  33%   0.1s"."""
        if cls.drawing is not None:
            cls.drawing.write("\n")
            cls.drawing.flush()
            cls.drawing = None

    def __init__(self, label: str, stream: TextIO | None = None, width: int = 30) -> None:
        self.label, self.stream, self.width = label, stream or sys.stderr, width
        self._shown = -1
        self._started = time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        percent = 100 * done // max(1, total)
        if done < total and (percent // 2 == self._shown // 2 or not self.stream.isatty()):
            return  # a log file gets only the finished bar
        self._shown = percent
        filled = self.width * done // max(1, total)
        elapsed = time.perf_counter() - self._started
        self.stream.write(f"\r{self.label:<11} [{'#' * filled}{'.' * (self.width - filled)}] {percent:3d}% "
                          f"{elapsed:5.1f}s")
        if done >= total:
            self.stream.write("\n")
        ProgressBar.drawing = None if done >= total else self.stream
        self.stream.flush()
