"""The readings of a trace that its rows without a value (lost scrapes: `lost_scrapes`) make possible where the rows
with requests alone do not read: the step their timestamps state (`stated_by_lost`), or the finer grid they fill
(`refined_by_lost`, `lost_grid`), read with them as rows of 0, then without them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from autoscaler.simulation.lost_grid import finer_grid
from autoscaler.simulation.lost_scrapes import LostScrapes
from autoscaler.simulation.trace_arrays import Trace
from autoscaler.simulation.trace_file import TraceError
from autoscaler.simulation.trace_grid import in_order


def stated_by_lost(valued: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], index: dict[str, int],
                   lost: LostScrapes, name: str,
                   spaced: Mapping[str, tuple[str, int]]) -> tuple[Trace, np.ndarray] | None:
    """The trace where the timestamps of the rows without a value state the step that those with requests alone
    do not (a sparse export whose one row a step after the first was a lost scrape was refused as off a 7-minute
    step), read with them as rows of 0 then without them; None where it does not read that way either. A row
    without a value beside a value of its model and time is no repeat (`in_order`'s `lost_rows`)."""
    if not lost.lines:
        return None
    times, models, counts, lines = valued
    index = dict(index)  # the lost rows' models join only a reading that takes them
    extra = np.fromiter((index.setdefault(model, len(index)) for model in lost.models), dtype=np.int64,
                        count=len(lost.models))
    lost_rows = np.concatenate([np.zeros(len(times), dtype=bool), np.ones(len(extra), dtype=bool)])
    try:
        trace, ordered_lines = in_order(np.concatenate([times, np.asarray(lost.times)]),
                                        np.concatenate([models, extra]), tuple(index),
                                        np.concatenate([counts, np.zeros(len(extra))]), name,
                                        np.concatenate([lines, np.asarray(lost.lines, dtype=np.int64)]), spaced,
                                        lost_rows)
    except TraceError:
        return None
    return _without_lines(trace, ordered_lines, lost.lines)


def refined_by_lost(valued: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], index: dict[str, int],
                    lost: LostScrapes, name: str,
                    spaced: Mapping[str, tuple[str, int]]) -> tuple[Trace, np.ndarray] | None:
    """The trace read on the finer grid the lost rows fill (`finer_grid`: a 60 s export with every other scrape
    lost, its values 120 s apart, read at 120 s spread each minute's requests over two; a 300 s export with two
    scrapes in three lost and one more lost row off its step, its values 900 s apart, was refused), with the lost
    rows on it; None where they fill none, or the trace does not read at that step with them."""
    grid = finer_grid(lost, valued[0], index)
    if grid is None:
        return None
    refined = stated_by_lost(valued, index, grid.rows, name, spaced)
    if refined is None or abs(refined[0].interval_s - grid.step_s) > 1e-6 * grid.step_s:
        return None
    return refined


def _without_lines(trace: Trace, ordered_lines: np.ndarray, dropped: Sequence[int]) -> tuple[Trace, np.ndarray]:
    """The trace without the rows of these file lines (lost scrapes: read with the others for the step, replayed
    as no row), and the lines of the rows left. Models left without a row are dropped, and the trace runs from
    its first row left to its last, as every trace does."""
    if not dropped:
        return trace, ordered_lines
    keep = ~np.isin(ordered_lines, np.asarray(dropped, dtype=np.int64))
    model, slot = trace.model[keep], trace.slot[keep]
    present = np.unique(model)
    renumbered = np.full(len(trace.models), -1, dtype=np.int64)
    renumbered[present] = np.arange(len(present), dtype=np.int64)
    before = int(slot.min())
    return (replace(trace, models=tuple(trace.models[i] for i in present.tolist()),
                    start_s=trace.start_s + before * trace.interval_s, intervals=int(slot.max()) - before + 1,
                    slot=slot - before, model=renumbered[model], requests=trace.requests[keep]),
            ordered_lines[keep])
