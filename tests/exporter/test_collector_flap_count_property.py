"""What a collector's failure lines say of the outages between them, whatever the collector does.

A line's "(it failed N more times since the last line ...)" is the platform engineer's only sight of the flaps
that were counted, not logged: N must be exactly the outages since the last failure line that failed and
recovered without a line of their own, and a quiet outage that lasts must get its line after the minute.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.collectors.health import CollectorHealth
from tests.support.clock import SteppedClock

MORE = re.compile(r"\(it failed (\d+) more times since the last line \d+ s ago, recovering in between\)")

READS = st.lists(
    st.tuples(st.sampled_from([1.0, 5.0, 30.0, 61.0]), st.sampled_from([None, "http", "timeout"])),
    min_size=1, max_size=60,
)
"""Reads: seconds since the one before, and None for a good read, else the failure's reason."""


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.said: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.said.append(record)

    def take(self) -> list[str]:
        said, self.said = self.said, []
        return [record.getMessage() for record in said]


@contextlib.contextmanager
def health_on_a_stepped_clock() -> Iterator[tuple[SteppedClock, CollectorHealth, Lines]]:
    """A collector's health on a clock the test steps, and the lines its logger says at INFO meanwhile."""
    clock = SteppedClock()
    logger = logging.getLogger("exporter.collectors.health")
    lines, level = Lines(), logger.level
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)
    try:
        yield clock, CollectorHealth(clock=clock), lines
    finally:
        logger.removeHandler(lines)
        logger.setLevel(level)


@settings(max_examples=200, deadline=None)
@given(reads=READS)
def test_a_failure_line_counts_the_outages_since_the_last_that_recovered_without_one(
    reads: list[tuple[float, str | None]],
) -> None:
    with health_on_a_stepped_clock() as (clock, health, lines):
        failing = had_line = False
        flaps = 0  # outages since the last failure line that failed and recovered without one
        last_line_at: float | None = None
        for seconds, reason in reads:
            clock.advance(seconds)
            if reason is None:
                health.succeeded("modelmesh")
                said = lines.take()
                assert said == (["modelmesh collector recovered"] if failing and had_line else []), said
                flaps += failing and not had_line
                failing = had_line = False
                continue
            starts = not failing
            health.failed("modelmesh", reason, "it broke")
            said = lines.take()
            failing = True
            if starts:
                had_line = False
            if said:
                (line,) = said
                counted = MORE.search(line)
                assert (int(counted.group(1)) if counted else 0) == flaps, (line, flaps)
                flaps, had_line, last_line_at = 0, True, clock.now
            elif not had_line:
                assert last_line_at is not None and clock.now - last_line_at < CollectorHealth.RELOG_AFTER_S, (
                    "an outage without a line went on past the minute without one")
