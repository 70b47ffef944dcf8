"""A logger's lines as its log shows them, taken in turns (a handler of its own: a property test runs many examples
in one test, where pytest's `caplog` is one per test)."""

from __future__ import annotations

import logging


class LineCatcher(logging.Handler):
    """The lines of the logger it is added to, at INFO and above."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def take(self) -> list[str]:
        lines, self.lines = self.lines, []
        return lines
