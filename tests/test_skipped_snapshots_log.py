"""A serving worker at its open-file limit under a lasting connection flood: between batches of connections closing it
takes one snapshot now and then, which ends an outage of skipped ones, and the next skip starts another. Each outage
was said (a WARNING and an INFO every ~10 s for as long as the flood lasted). Outages that start again within a
minute of the last line are counted, and said in the next line, as the exporter's and the Prometheus source's
outages are (`exporter.outage_log`)."""

from __future__ import annotations

import errno
import logging

import pytest

from autoscaler.skipped_snapshots import SkippedSnapshots

EMFILE = OSError(errno.EMFILE, "Too many open files")


def test_outages_of_skipped_snapshots_within_a_minute_are_counted_not_each_said(
        caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    skips = SkippedSnapshots("127.0.0.1:6443", None, clock=lambda: now[0])
    caplog.set_level(logging.INFO, logger="autoscaler.workers")
    for _ in range(6):  # six outages, one a 10 s cycle: three refreshes skipped, then one taken
        for _ in range(3):
            skips.skipped(EMFILE)
            now[0] += 3
        skips.taken()
        now[0] += 1
    lines = [record for record in caplog.records if record.name == "autoscaler.workers"]
    warnings = [r.getMessage() for r in lines if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in lines]
    assert "cannot take the refresh process's new values" in warnings[0]
    assert len([r for r in lines if r.levelno == logging.INFO]) == 1  # the first outage's end, said with its line

    now[0] += 60  # a minute on: an outage that lasts past it gets its line, with the flaps before it
    skips.skipped(EMFILE)
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(said) == 2 and "(it failed 5 more times since the last line" in said[-1], said
