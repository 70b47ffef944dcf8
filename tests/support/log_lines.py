"""A logger's lines as its log shows them, taken in turns (a handler of its own: a property test runs many examples
in one test, where pytest's `caplog` is one per test)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager


class LineCatcher(logging.Handler):
    """The lines of the logger it is added to, at its level (INFO unless told) and above."""

    def __init__(self, level: int = logging.INFO) -> None:
        super().__init__(level)
        self.lines: list[str] = []
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())
        self.records.append(record)

    def take(self) -> list[str]:
        lines, self.lines, self.records = self.lines, [], []
        return lines

    def clear(self) -> None:
        self.take()


@contextmanager
def catching(logger_name: str, level: int = logging.INFO) -> Iterator[LineCatcher]:
    """The lines `logger_name` says at `level` and above while the block runs: the logger is let say them (its
    level lowered to `level` where it was higher, as the adapter's logging set-up does not run here) and put back
    as it was after."""
    logger, catcher = logging.getLogger(logger_name), LineCatcher(level)
    was = logger.level
    if was == logging.NOTSET or was > level:
        logger.setLevel(level)
    logger.addHandler(catcher)
    try:
        yield catcher
    finally:
        logger.removeHandler(catcher)
        logger.setLevel(was)
