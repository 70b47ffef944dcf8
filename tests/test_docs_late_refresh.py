"""operations.md's "no refresh for N s" passage says what the adapter says of a refresh late on its metrics
source, in its words, and does not send the reader to the adapter's CPU limit for it. It knew one line, 'the
adapter was stopped or starved of CPU', which a Prometheus that never answers made the adapter say at every
refresh, and advised raising the CPU limit."""

from __future__ import annotations

import logging

import pytest

from autoscaler.policies.policy import RuntimePolicy
from autoscaler.running_clock import SourceWait
from tests.test_docs_discovery_outage import section
from tests.test_refresher_clock import Clocks, HungSource, late_lines

TITLE = "\"the adapter's wall clock stepped\" or \"no refresh for N s\""


async def test_the_passage_quotes_the_line_of_a_refresh_late_on_prometheus(caplog: pytest.LogCaptureFixture) -> None:
    clocks = Clocks()
    wait = SourceWait("Prometheus at http://prometheus:9090", "--prometheus-timeout 50 s", deadline_s=101.0)
    refresher = clocks.refresher(HungSource(clocks, hangs_s=50.0), RuntimePolicy(), wait)
    with caplog.at_level(logging.WARNING, logger="autoscaler"):
        for _ in range(2):
            await refresher.refresh_once()
    (line,) = late_lines(caplog)
    quoted = line[:line.index(" kept up") + len(" kept up")]
    text = section(TITLE)
    assert f"`{quoted} ...`" in text, quoted
    bullet = text[text.index(quoted):]
    bullet = bullet[:bullet.find(" - ") if " - " in bullet else len(bullet)]
    assert "CPU is not the cause" in bullet and "raise its CPU limit" not in bullet, bullet
