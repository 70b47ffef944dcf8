"""Intervals without a row inside busy, steady traffic: more likely data missing than traffic stopping.

An interval without a row is replayed as no requests, which is right for a quiet model and wrong where a
collector was down or scrapes were lost. `gap_notes` names stretches of an hour or more whatever surrounds them;
shorter ones are named here where the traffic around them makes none at all implausible: in a day of 150
requests/s, a 40-minute outage without rows flipped the verdict (mean-hpa scaled down through it and met the
traffic after it: 3.1% of requests delayed became 48%) with no word, and 3% of the minutes lost went unnamed.

A stretch is not named where it is the trace's own shape rather than loss: shorter than the HPA's sync (a policy
cannot scale down through it; bursty 1 s traffic has seconds of nothing), between single rows (a report job's rows
every 15 minutes through an evening), or one of a rhythm, judged among all the silences in traffic busy on average,
not only those each of whose neighbours is: silences as long on a schedule (its period found among all the silences
as long, busy around or not; five or more one a period after another, not a spacing that recurs by chance),
starting or ending a period from another (a batch every 10 minutes, a batch each hour that ends when it is done),
or silences that are a fifth of the trace's time (a model on and off by the half
minute). Minutes lost off the schedule (inside a batch's runs) are named. How many silences there are says nothing:
six lost minutes went unsaid where five were named, and twelve collector restarts where six were.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import numpy as np

from autoscaler.simulation.hpa import SYNC_PERIOD_S
from autoscaler.simulation.lost_cells import NO_CELLS, LostCells
from autoscaler.simulation.timestamps import moment_text, span_text

if TYPE_CHECKING:
    from autoscaler.simulation.trace import Trace

AROUND: Final = 5
"""Intervals either side of a stretch without rows whose traffic says whether it is likely missing data."""
BUSY_REQUESTS: Final = 20.0
"""The fewest requests each interval with rows around such a stretch must have for it to be named: at 20 an
interval, none at all is as unlikely as chance gets (e^-20 for arrivals at random); quieter traffic has intervals
of nothing of its own."""
WITH_ROWS: Final = 2
"""The fewest intervals with rows among the `AROUND` either side of a stretch for their traffic to say it is
busy: one is a periodic job's row between its silences, not traffic that stopped."""
RHYTHM_SHARE: Final = 0.2
"""The share of the trace's intervals that its silences in traffic busy on average must fill for them to be its
shape however spaced (a model on and off by the half minute is silent a quarter of the time; lost scrapes and
restarts were 4-15%)."""
RHYTHM_COUNT: Final = 5
"""The fewest silences at least half as long as a stretch for them to be a rhythm it is one of."""
SPACED_SHARE: Final = 0.8
"""The share of those silences that must have another one a period away (their starts, or their ends) for them
to keep a schedule: a batch's; lost scrapes fall where they fall."""
SPACED_WITHIN: Final = 0.05
"""How far, as a share of the period, a silence may be from one a period after another (exactly, under 20
intervals: one either side is most of a short period's slots, where lost scrapes would keep a schedule)."""


def missing_notes(trace: Trace, lines: np.ndarray, longest_s: float, lost: LostCells = NO_CELLS) -> list[str]:
    """A warning naming the stretches without a row, rows up to `longest_s` apart (longer ones have their own), whose
    `AROUND` intervals either side that have rows carry `BUSY_REQUESTS` or more each: the longest of them, where
    it is (the rows either side, the line after it), how many and how long in all, and what to do. `lost`: rows
    written with requests empty, NaN or null, named by their own warning: their intervals are not named again."""
    has_rows = np.zeros(trace.intervals, dtype=bool)
    has_rows[trace.slot] = True
    first, after = silences_between_rows(has_rows, lost)
    if not len(first):
        return []
    load = np.bincount(trace.slot, weights=trace.requests, minlength=trace.intervals)
    load[~has_rows] = np.inf  # an interval without rows around a stretch is left out of its traffic, not taken as 0
    padded = np.concatenate([np.full(AROUND, np.inf), load, np.full(AROUND, np.inf)])
    lowest = np.lib.stride_tricks.sliding_window_view(padded, AROUND).min(axis=1)  # lowest[i]: slots i-AROUND..i-1
    rows = np.concatenate([np.zeros(AROUND, dtype=np.int64), has_rows, np.zeros(AROUND, dtype=np.int64)])
    with_rows = np.lib.stride_tricks.sliding_window_view(rows, AROUND).sum(axis=1)  # as `lowest`: rows there
    carried = np.lib.stride_tricks.sliding_window_view(np.where(np.isfinite(padded), padded, 0.0), AROUND).sum(axis=1)
    mean = carried / np.maximum(with_rows, 1)  # as `lowest`: the mean of the intervals with rows there
    steady = np.minimum(with_rows[first], with_rows[after + AROUND]) >= WITH_ROWS
    steady &= np.minimum(mean[first], mean[after + AROUND]) >= BUSY_REQUESTS  # busy on average either side
    busy = steady & (np.minimum(lowest[first], lowest[after + AROUND]) >= BUSY_REQUESTS)
    busy &= (after - first + 1) * trace.interval_s <= longest_s  # as gap_notes measures: row to row
    busy &= unlike_the_rest(first, after - first, steady, trace.interval_s, trace.intervals)
    if not busy.any():
        return []
    first, after = first[busy], after[busy]
    widest = int(np.argmax(after - first))
    before_s, after_s = (trace.start_s + float(slot) * trace.interval_s for slot in (first[widest] - 1, after[widest]))
    line = int(lines[int(np.searchsorted(trace.slot, after[widest]))])
    many = (f"; {len(first):,} such stretches, {span_text(float((after - first).sum()) * trace.interval_s)} in "
            "all, this the longest") if len(first) > 1 else ""
    return [f"no rows at all for {span_text(float(after[widest] - first[widest]) * trace.interval_s)} between "
            f"the rows at {moment_text(before_s)} and at {moment_text(after_s)} (line {line}{many}), where the "
            f"intervals with rows within {AROUND} intervals either side ({WITH_ROWS} or more each side) have at "
            f"least {BUSY_REQUESTS:g} requests each, and the silences are not the trace's rhythm (regularly "
            "spaced, or a fifth of its time): replayed as no requests, so a policy may "
            "scale down through it and meet the traffic after it with too few pods. "
            "If data is missing there (a collector down, scrapes lost), fill those intervals (from another export, "
            "or with the rows around them) or cut the trace at them; if the traffic did stop there, ignore this"]


def silences_between_rows(has_rows: np.ndarray, lost: LostCells) -> tuple[np.ndarray, np.ndarray]:
    """Each stretch without a row with requests between two that have one, [first, after), judged across the
    rows written without a value (`lost`): one NaN row per model inside a 50-minute outage split it into two
    silences that each ended at a row, and the outage went unnamed. A stretch that is nothing but such rows is
    left out: their own warning names them, and they are no silence of the trace's."""
    with_rows = np.flatnonzero(has_rows)
    first, after = with_rows[:-1] + 1, with_rows[1:]
    lost_here = np.zeros(len(has_rows), dtype=bool)
    lost_here[lost.slot] = True
    running = np.concatenate([[0], np.cumsum(lost_here)])
    kept = (after > first) & (running[after] - running[first] < after - first)
    return first[kept], after[kept]


def unlike_the_rest(first: np.ndarray, lengths: np.ndarray, judged: np.ndarray, interval_s: float,
                     intervals: int) -> np.ndarray:
    """Which stretches (the first slots of all the trace's silences, in time order, and their lengths in
    intervals) are worth naming: at least an HPA sync long, and not one of a rhythm. The rhythm is judged among
    the `judged` silences (those in traffic busy on average either side), then only those whose every neighbour
    is busy are named: judged among those alone, a job on two minutes and off one at 25 requests a minute was a
    scatter of silences, "176 such stretches"; judged among all silences however quiet, a night's chance ones
    filled a fifth of a day and hid minutes lost by day. Of the judged silences at least half as long as a
    stretch (`RHYTHM_COUNT` or more), those on a schedule, starting or ending one period from another silence
    (an hourly batch's silences start where each run ends, and all end on the hour), are the rhythm and those
    off it are named (minutes lost inside a batch's runs); where few keep a schedule, they are the rhythm if
    the judged silences fill `RHYTHM_SHARE` of the trace, however spaced (three long outages filling a third of
    it are named)."""
    ordered = np.sort(lengths[judged])
    as_long = len(ordered) - np.searchsorted(ordered, lengths / 2, side="left")  # each judged one counts itself
    dense = float(ordered.sum()) >= RHYTHM_SHARE * intervals
    rhythm = np.zeros(len(lengths), dtype=bool)
    long_enough = judged & (lengths * interval_s >= SYNC_PERIOD_S)
    for length in np.unique(lengths[long_enough]):  # shorter ones are not named, rhythm or not
        these = judged & (lengths == length)
        kin = lengths >= length / 2
        peers, everyone = np.flatnonzero(judged & kin), np.flatnonzero(kin)
        scheduled = _on_schedule(first, peers, everyone) | _on_schedule(first + lengths, peers, everyone)
        if scheduled.any():
            rhythm[peers] |= scheduled & these[peers]
        else:
            rhythm[these] = dense & (as_long[these] >= RHYTHM_COUNT)
    return long_enough & ~rhythm


def _on_schedule(at: np.ndarray, peers: np.ndarray, kin: np.ndarray) -> np.ndarray:
    """Which of the `peers` (indices into `at`: the slots where the silences start, or end, in order) keep a
    schedule: another silence, any of the trace's, a period before or after, give or take `SPACED_WITHIN` of it,
    where `SPACED_SHARE` of the peers or more do (the silences an hourly batch's longest runs leave are under
    half as long as those its shortest leave, and still on the hour). The period is the most common spacing of
    the `kin` (all the trace's silences as long as the peers, busy around or not), not the median: minutes lost
    inside a batch's runs split the spacings they fall in; and not of the peers alone: a job on 2 minutes of
    every 13 at 15 requests a minute left few silences busy on average around them, spaced by chance 26 or 39
    minutes apart, and its rhythm went unseen. Lost scrapes fall where they fall: few have another a period
    away. None where fewer than `RHYTHM_COUNT` kin keep it, or no spacing of theirs recurs (five lost silences
    33 to 133 minutes apart took the smallest for a period, and 34 lost minutes put one a period from each)."""
    if len(kin) < RHYTHM_COUNT or not len(peers):
        return np.zeros(len(peers), dtype=bool)
    spacings = np.bincount(np.diff(at[kin]))
    period = int(np.argmax(spacings))
    if spacings[period] < 2:  # no spacing recurs: no schedule (the smallest was taken, and lost minutes kept it)
        return np.zeros(len(peers), dtype=bool)
    within = int(SPACED_WITHIN * period)
    partnered = np.zeros(len(kin), dtype=bool)
    for shift in (-period, period):
        lowest = np.searchsorted(at, at[kin] + shift - within, side="left")
        partnered |= np.searchsorted(at, at[kin] + shift + within, side="right") > lowest
    ours = partnered[np.isin(kin, peers)]
    # a schedule is kept by RHYTHM_COUNT silences or more: four of five minutes lost at random were 71 minutes
    # from another by chance, and the five were taken for a rhythm and only one named; and by that many one a
    # period after another: eight of eleven lost minutes ended within 3 of 67 minutes from another, none more
    # than three in a row, and were taken for a batch's rhythm ("3 such stretches, 7 min" for 11 and 15)
    kept = (partnered.sum() >= RHYTHM_COUNT and ours.mean() >= SPACED_SHARE
            and _in_a_row(at, kin, period, within) >= RHYTHM_COUNT)
    return ours if kept else np.zeros(len(peers), dtype=bool)


def _in_a_row(at: np.ndarray, kin: np.ndarray, period: int, within: int) -> int:
    """The most of the slots `at` (in order, all the trace's silences) one `period` after another, give or take
    `within`, from one of the `kin`, up to `RHYTHM_COUNT`: a schedule's silences follow one another at its period
    (the next is looked for among all: an hourly batch's longest silences are not each hour's, and a lost minute
    between two does not break the row), where silences that fall where they fall are a period from one or
    another by chance, seldom one after another five times."""
    target = at + period
    above = np.minimum(np.searchsorted(at, target), len(at) - 1)
    below = np.maximum(above - 1, 0)
    nearest = np.where(np.abs(at[below] - target) < np.abs(at[above] - target), below, above)
    after = np.where(np.abs(at[nearest] - target) <= within, nearest, -1)  # the next in the row, or none
    reach, count = kin, 1
    while count < RHYTHM_COUNT:
        reach = np.where(reach >= 0, after[np.maximum(reach, 0)], -1)
        if not (reach >= 0).any():
            break
        count += 1
    return count
