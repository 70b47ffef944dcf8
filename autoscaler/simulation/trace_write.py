"""A trace written back as the CSV `trace.read_csv` reads (`minute_table` and the bench write theirs with it)."""

from __future__ import annotations

import csv
import os
from typing import TextIO

from autoscaler.simulation.timestamps import seconds_text
from autoscaler.simulation.trace import Trace
from autoscaler.simulation.trace_file import HEADER


def write_csv(trace: Trace, path: str | os.PathLike[str] | TextIO) -> None:
    """Write a trace in the format `read_csv` reads, so that it reads back as it was: every row, those of 0 too
    (a row of 0 is how a trace states its step: "add a row of 0 requests for model M at T"; dropped, a 1 s trace
    of clients at their own seconds was refused when read again), and a row of 0 in each of the first two
    intervals where one model needs it to come at both (a trace whose first requests come an hour apart was read
    back as starting there, at a step of an hour). `path` may be a stream already open (standard output), left
    open."""
    if not isinstance(path, str | os.PathLike):
        _write_rows(trace, path)
        return
    with open(path, "w", newline="", encoding="utf-8") as fh:
        _write_rows(trace, fh)


def _write_rows(trace: Trace, fh: TextIO) -> None:
    out = csv.writer(fh)
    out.writerow(HEADER)
    for s, m in _step_pins(trace):
        out.writerow((seconds_text(trace.start_s + s * trace.interval_s), trace.models[m], "0"))
    for s, m, r in zip(trace.slot.tolist(), trace.model.tolist(), trace.requests.tolist(), strict=True):
        out.writerow((seconds_text(trace.start_s + s * trace.interval_s), trace.models[m], f"{r:.17g}"))


def _step_pins(trace: Trace) -> list[tuple[int, int]]:
    """(interval, model) of the rows of 0 that pin a trace's start and step where written: one model at the first
    two intervals, as `scrape_times` asks a sparse trace to state its step (rows of two models there, each at its
    own second, read as scrape times). None where a model already comes at both, or the trace is one interval."""
    if trace.intervals < 2:
        return []
    at = [set(trace.model[trace.slot == s].tolist()) for s in (0, 1)]
    if at[0] & at[1]:
        return []
    model = min(at[0] or at[1] or {0})
    return [(s, model) for s in (0, 1) if model not in at[s]]

