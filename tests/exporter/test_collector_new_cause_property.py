"""A failure's new cause gets its line, whatever the collector does; a failure that says nothing new gets none.

The GPU collector fails with one reason (`nvml`) whatever NVML answers: a GPU lost, then the driver unloaded 5 s
later, was one outage with one reason, and the line for the driver never came (the minute had not passed). So
each NVML error code a failure carries is a cause (`CollectorHealth.failed`'s `causes`): the platform engineer
must have read each cause of an outage in its own lines (of a flap without a line of its own, in the last minute's),
and must not read a line per attempt.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.collectors.health import CollectorHealth
from tests.exporter.test_collector_flap_count_property import health_on_a_stepped_clock

READS = st.lists(
    st.tuples(st.sampled_from([1.0, 5.0, 30.0, 61.0]),
              st.one_of(st.none(), st.tuples(st.sampled_from(["nvml", "timeout"]), st.sampled_from([3, 9, 15])))),
    min_size=1, max_size=60,
)
"""Reads: seconds since the one before, and None for a good read, else the failure's reason and NVML code."""


@settings(max_examples=300, deadline=None)
@given(reads=READS)
def test_every_cause_of_an_outage_is_said_and_no_line_says_nothing_new(
    reads: list[tuple[float, tuple[str, int] | None]],
) -> None:
    with health_on_a_stepped_clock() as (clock, health, lines):
        said: list[tuple[float, str]] = []  # (when, line) of every failure line
        outage_lines: list[tuple[float, str]] = []  # the failure lines of the outage going on
        for seconds, failure in reads:
            clock.advance(seconds)
            if failure is None:
                health.succeeded("gpu")
                lines.take()
                outage_lines = []
                continue
            reason, code = failure
            cause = f"NVML code {code}"
            health.failed("gpu", reason, f"it broke ({cause})", causes=[cause])
            new = lines.take()
            assert len(new) <= 1, new
            if new:
                (line,) = new
                if outage_lines:
                    last_at, _ = outage_lines[-1]
                    news = f"failed ({reason})" not in outage_lines[-1][1] or not any(
                        cause in earlier for _, earlier in outage_lines)
                    assert news or clock.now - last_at >= CollectorHealth.RELOG_AFTER_S, (
                        "a line within the minute of the outage's last said nothing new", line, outage_lines)
                said.append((clock.now, line))
                outage_lines.append((clock.now, line))
            # An outage with a line of its own has named its every cause; a flap (none yet), none that the last
            # minute's lines have not.
            assert any(cause in line for _, line in outage_lines) if outage_lines else any(
                cause in line and clock.now - at < CollectorHealth.RELOG_AFTER_S for at, line in said), (
                f"{cause} unsaid", said)
