"""Rows at each model's own scrape time: the step a trace's models come at, where their timestamps scatter.

Raw Prometheus samples, or an exporter per target, give every series its own timestamp: a few hundred
milliseconds around the step, or at the target's own offset within it. The trace's interval is the smallest gap
between distinct timestamps, which is then the milliseconds between two models' rows (refused as sub-second,
with the advice to sum into 1 s), or, with whole-second timestamps (rows at 59, 60 and 61 s), 1 s: each
minute's requests replayed within a second, 69 pods where 1-2 serve them. Each model's own spacing says the
step; this module finds it, so the trace is refused naming it and how to round to it. A genuine trace at the
smallest gap whose models come at their own times (clients calling every 15 s, each at its own second) looks
the same: it states its step as a sparse trace does, one model at its first two timestamps (a row of 0 there).
What no scraper writes is not refused: a model at several phases of its step (a poller and a user's requests
between its polls), or rows all on whole minutes (a few timers, each at its own minute).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import numpy as np

from autoscaler.simulation.stated_step import sane_at, whole_seconds_divisor
from autoscaler.simulation.timestamps import moment_text, seconds_text
from autoscaler.simulation.trace_file import MAX_INTERVAL_S, MIN_INTERVAL_S

REGULAR_SHARE: Final = 0.9
"""The share of a trace's per-model gaps that must be a whole number of steps for the
models' rows to be taken as scraped at that step (within a fifth of one, `REGULAR_WITHIN`): the gaps of
traffic are scattered, a scraper's are not."""
REGULAR_WITHIN: Final = 0.2
"""How far, as a share of the step, a model's gap may miss a whole number of steps and still count as one: a
second's rounding either side of a 15 s step."""
SCRAPE_JITTER_S: Final = 5.0
"""How far, in seconds, a model's gap may miss a whole number of steps and still count as one: scrape times
stray milliseconds, a second with whole-second times; a job every 7 minutes give or take one, on a 60 s trace's
grid, is traffic."""
INEXACT_SHARE: Final = 0.1
"""The share of those gaps that must differ from a whole number of the models' median gap for them to be taken
as scrape times whatever the grid (`FILLED`): exactly 300 s apart, each at its own minute, is a 60 s trace of
timer functions (Azure Functions' trace has thousands), not scrape times."""
FILLED: Final = 0.9
"""The share of the step's slots at the trace's interval (its minutes, in a 60 s trace) that must have rows for
gaps of exactly a whole number of steps to be a trace at that interval: timer functions at their own minutes
fill every minute of their step, while targets at their own offsets with times cut to whole seconds (`int(ts)`)
sit at a few of the step's seconds and leave the rest without a row all trace long (12 targets every 60 s were
read as a 1 s trace: 192 pods where 20 serve)."""
PHASE_SPREAD: Final = 5.0
"""How many times its rows' median distance from their phase in the step (plus `PHASE_SLACK_S`) a model's row
may be from that phase and still be at its one scrape offset: a scraper's jitter spreads every row alike
(uniform: the farthest is 2x the median; Gaussian: past 5x is one row in 10,000), while a request log's poller
sits at one second, and a user's requests between its polls are seconds off it."""
PHASELESS: Final = 0.125
"""A model whose rows' median distance from their phase is past this share of the step sits at no one phase:
rows at every phase of it (a client every 13 s in a trace whose step reads 7 s) are a quarter of the step off on
median; a scraper's jitter (2 s at 15 s) an eighth at most."""
PHASE_SLACK_S: Final = 1.5
"""What times cut to whole seconds (`int(ts)`, `.dt.floor('1s')`) add to a scrape's distance from its phase: a
second, where most of a model's rows sit on one second (their median distance near 0) and the rest on the next,
and half of one, as the phase (their circular mean) sits between the seconds."""
MINUTE_S: Final = 60.0
"""Timestamps all a whole number of minutes from the first are no scrape offsets: a scraper's offset is any
millisecond of the step, so targets at their own offsets, even cut to whole seconds, are never all on whole
minutes. A few timers or cron jobs at their own minutes (four every 5 min at minutes 0-3) cannot fill
`FILLED` of their step's minutes and were refused as targets at their own offsets."""
CLUSTERED: Final = 0.25
"""How far off the step, as a share of it, the farthest timestamp may be for the rows to be said to scatter
around it; past that they are at the models' own offsets within the step."""


def scatter_problem(t: np.ndarray, model: np.ndarray, models: Sequence[str], distinct: np.ndarray,
                    interval: float, allowed_off: int, line_of: Callable[[int], int]) -> str | None:
    """What to fix where each model's rows come a whole-second step apart but the models' timestamps scatter
    around it (or sit at their own offsets in it), so that the smallest gap, taken for the interval, is under
    half that step; None otherwise. `t` and `model`: the rows in time order; `allowed_off`: how many distinct
    timestamps off the step are strays (`strays` names those), not scatter."""
    step = scatter_step(t, model, distinct, interval, allowed_off)
    if step is None:
        return None
    off = _off_centre(np.mod(t, step), step, np.zeros_like(model))
    worst = int(np.argmax(off))
    where = f"line {line_of(worst)}: model {models[int(model[worst])]!r} at {moment_text(float(t[worst]))}"
    keep = _keep_it(t, model, models, distinct)
    either = ", or each client's own time in a request log" if keep else ""
    if off[worst] <= CLUSTERED * step:
        how = (f"the models' rows scatter up to {float(off[worst]):.2g} s around it, as each target's own scrape "
               f"time does{either} ({where})")
    else:
        how = (f"the models' rows are spread over the step, each at its own offset in it, as each target's own "
               f"scrape time is{either} ({where})")
    scraped = "if they are scrape times, round" if keep else "round"
    rounding = (f"down to the {step:g} s step (pandas: .dt.floor('{step:g}s'), not .dt.round, which would put two "
                "of a model's rows in one step; then sum by timestamp_s and model)" if rounds_down(t, model, step)
                else f"to the {step:g} s step (pandas: .dt.round('{step:g}s'), then sum by timestamp_s and model)")
    return (f"each model's rows are about {step:g} s apart, but {how}: read as they are, the step would be the "
            f"smallest gap between two rows ({interval:.3g} s) and each row's requests would arrive within it; "
            f"{scraped} every timestamp {rounding}, or export with query_range, whose steps are exact{keep}")


def scatter_step(t: np.ndarray, model: np.ndarray, distinct: np.ndarray, interval: float,
                 allowed_off: int) -> float | None:
    """The step each model's rows come at where the models' timestamps scatter around it or sit at their own
    offsets in it, which `scatter_problem` refuses; None where they do not. Apart from the message, so that a
    refusal offering a rounding can tell whether the trace so rounded would be refused so (`rows_rounded`)."""
    if _states_its_step(t, model, distinct, interval) or _on_whole_minutes(distinct):
        return None
    step = _model_step(t, model, distinct, interval)
    if step is None:
        return None
    if _at_several_phases(t, model, step) > allowed_off:
        return None
    phase = np.round(np.mod(distinct - distinct[0], step), 6)
    phase[phase >= step - 1e-6] = 0.0
    if len(distinct) - int(np.unique(phase, return_counts=True)[1].max()) <= allowed_off:
        return None  # one grid but for a stray or three: named as strays
    return step


def rows_rounded(t: np.ndarray, model: np.ndarray, step: float, *,
                 down: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(time, model) of the rows `t`, `model` with every timestamp rounded to `step` (pandas' `.dt.round`, half
    to even as `np.rint`), or floored (`down`, `.dt.floor`), one row per time and model as summing them leaves, in
    time order: the trace a refusal's rounding leads to, to check before it is offered."""
    slots = (np.floor if down else np.rint)(t / step).astype(np.int64)
    models = int(model.max()) + 1
    key = np.unique(slots * models + model)
    return (key // models).astype(np.float64) * step, key % models


def rounds_down(t: np.ndarray, model: np.ndarray, step: float) -> bool:
    """Whether flooring the timestamps to `step` keeps more of each model's rows a step apart than rounding
    does. Rounding suits rows around the step's multiples, but pandas' `.dt.round` rounds half to even: a model
    polled at :05 of every 10 s went to :00, :20, :20, :40, and the trace so rounded read as a 20 s one with a row
    off it, refused again. Flooring splits rows around the multiples instead, so the one of the two that merges
    fewer of a model's consecutive rows into one step is named (`np.rint` rounds half to even as pandas does)."""
    by_model = np.argsort(model, kind="stable")  # rows are in time order: each model's rows stay so
    same = model[by_model][1:] == model[by_model][:-1]
    at = t[by_model] / step
    del by_model

    def merged(slots: np.ndarray) -> int:
        return int((same & (slots[1:] == slots[:-1])).sum())

    return merged(np.floor(at)) < merged(np.rint(at))


def _on_whole_minutes(distinct: np.ndarray) -> bool:
    """Whether every timestamp is a whole number of minutes from the first (`MINUTE_S`): no scrape offsets."""
    minutes = (distinct - distinct[0]) / MINUTE_S
    return bool(np.abs(minutes - np.rint(minutes)).max() <= 1e-6)


def _at_several_phases(t: np.ndarray, model: np.ndarray, step: float) -> int:
    """How many rows sit off their model's own phase in the step (further from where its rows gather than a
    scrape's jitter spreads them, `PHASE_SPREAD`): a scraper gives each series one offset, so more than a stray or
    three are a request log's (a model polled every 10 s, and a user's requests between polls)."""
    off = _off_centre(np.mod(t, step), step, model)
    by_model = np.lexsort((off, model))
    rows = np.bincount(model)
    middle = by_model[(np.cumsum(rows) - rows + rows // 2)[rows > 0]]
    typical = np.zeros(len(rows))
    typical[rows > 0] = off[middle]
    phaseless = typical[model] > PHASELESS * step
    return int(((off > PHASE_SPREAD * typical[model] + PHASE_SLACK_S) | phaseless).sum())


def _states_its_step(t: np.ndarray, model: np.ndarray, distinct: np.ndarray, interval: float) -> bool:
    """Whether one model has rows at the trace's first two timestamps, `interval` apart: no scraper gives one
    series two rows a fraction of its step apart, and a sparse trace is told to pin its step so."""
    if len(distinct) < 2 or abs(float(distinct[1] - distinct[0]) - interval) > 1e-9:
        return False
    return bool(np.intersect1d(model[t == distinct[0]], model[t == distinct[1]]).size)


def _keep_it(t: np.ndarray, model: np.ndarray, models: Sequence[str], distinct: np.ndarray) -> str:
    """How to keep a trace whose step truly is fine (a request log, each model requested at its own whole
    seconds): the row of 0 that states 1 s, a request log's step, where the trace at it reads at a sane length.
    The smallest gap was named before (rows at 0, 2, 4 and 9 s were told a 2 s step that 9 s is off, and
    followed, refused), then the step every timestamp sits on (two pollers at seconds 0 and 5 of 20 were told
    5 s, each request replayed over 5 s)."""
    if whole_seconds_divisor(np.diff(distinct)) is None:
        return ""  # times at fractions of a second: no whole-second step to state
    step = MIN_INTERVAL_S
    if not sane_at(distinct, step):
        return ""
    return (f"; if the trace's step is {step:g} s (each model requested at its own times), add a row of 0 "
            f"requests for model {models[int(model[0])]!r} at {seconds_text(float(t[0]) + step)} to state it")


def _model_step(t: np.ndarray, model: np.ndarray, distinct: np.ndarray, interval: float) -> float | None:
    """The whole-second step each model's rows come at, where it is at least twice the trace's interval, at
    most 10 min, and the models' gaps are whole numbers of it give or take a little (`REGULAR_SHARE`), or exactly
    with the step's slots at the interval mostly empty (`INEXACT_SHARE`, `FILLED`); None otherwise."""
    rows_per_model = np.bincount(model)
    span = float(t[-1] - t[0])
    # A model's n rows over the span are n - 1 gaps: over n, two targets at 0 and 149.5 s of a 300 s step, 40
    # rows each, read 296 s apart, under twice their 149 s smallest gap, and were told to round to 150 s
    gaps_per_model = max(int(np.median(rows_per_model[rows_per_model > 0])) - 1, 1)
    if span <= 0 or span / gaps_per_model < 2 * interval:
        return None  # each model has rows about every interval: no coarser step to find (and no sort to pay)
    by_model = np.argsort(model, kind="stable")  # rows are in time order: each model's rows stay so
    same = model[by_model][1:] == model[by_model][:-1]
    gaps = np.diff(t[by_model])[same]
    if not len(gaps):
        return None
    typical = float(np.median(gaps))
    if typical <= 0:
        return None
    steps = np.maximum(np.rint(gaps / typical), 1.0)
    near = np.abs(gaps - steps * typical) <= REGULAR_WITHIN * typical
    if not near.any():
        return None
    # The gaps' span over the steps in them: a gap's jitter is the step's error over one gap, but over the span
    # of all of them (the median of 20 gaps 5 s either side of 120 s read 119)
    step = float(np.rint(gaps[near].sum() / steps[near].sum()))
    if not (MIN_INTERVAL_S <= step <= MAX_INTERVAL_S and step >= 2 * interval):
        return None
    regular = np.abs(gaps - steps * step) <= min(REGULAR_WITHIN * step, SCRAPE_JITTER_S)
    inexact = np.abs(gaps - steps * typical) > 1e-6
    if regular.mean() < REGULAR_SHARE:
        return None
    if inexact[regular].mean() < INEXACT_SHARE and _fills_its_slots(distinct, step, interval):
        return None
    return step


def _fills_its_slots(distinct: np.ndarray, step: float, interval: float) -> bool:
    """Whether the trace's timestamps, over all its steps, have rows at nearly every slot of the step at the
    trace's interval (`FILLED`): a trace at that interval whose models come a step apart, each at its own slot.
    A step that is no whole number of intervals has no such slots: its rows cannot be on the interval's grid.
    Only the times on the interval's grid (where most of them sit) fill a slot: rounded onto it, targets at 0, 6,
    12 and 20 s of a 30 s step (their 6 s smallest gap), the one at 0 s cut to 29 s of the step before about half
    the time, filled all five (those at 20 s the last two, as half to even went): read as a 6 s trace whose
    models take turns, they were told to state a 1 s step."""
    slots = int(np.rint(step / interval))
    if abs(step / interval - slots) > 1e-6:
        return False
    at = (distinct - distinct[0]) / interval
    residue = np.mod(np.round(np.mod(at, 1.0), 6), 1.0)
    kinds, many = np.unique(residue, return_counts=True)
    grid = float(kinds[np.argmax(many)])
    used = np.unique(np.mod(np.rint(at[residue == grid] - grid), slots)).size
    return used >= FILLED * slots


def _off_centre(phase: np.ndarray, step: float, group: np.ndarray) -> np.ndarray:
    """How far each row's phase in the step is from where the rows of its `group` gather: their circular mean,
    so that rows at 59.8 and 0.2 s gather at 0, not at 30."""
    turn = np.exp(1j * phase / step * 2 * np.pi)
    mean = np.bincount(group, weights=turn.real) + 1j * np.bincount(group, weights=turn.imag)
    centre: np.ndarray = np.angle(mean)[group] / (2 * np.pi) * step
    off: np.ndarray = np.abs(np.mod(phase - centre + step / 2, step) - step / 2)
    return off
