"""What a refused trace is told to do about its unit and its step, followed as a user follows it.

Epoch milliseconds whose rows sit at each target's own offset in the step were refused as whole seconds off a
253 s grid and told to add a row of 0 requests one second after the first: followed, 4 h read as 14.4 million
1 s intervals (166 days), still replaying after 45 s. Milliseconds on the grid were told "divide timestamp_s by
1000"; these are now too. A 60 s export with rows only where cron jobs at :00 and :30 ran read 1800 s apart and
was told only to export at 10 min or less, which it already was: the row of 0 that states its step is named.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import pytest
from hypothesis import HealthCheck, event, example, given, note, settings
from hypothesis import strategies as st

from autoscaler.simulation.trace import Trace, TraceError, read_csv
from tests.simulation.runs import FAILED, ROUND, report, rounded, simulate, write_trace

EPOCH = 1764547200  # 2025-12-01T00:00:00Z
MILLIS = "these look like milliseconds since the epoch; divide timestamp_s by 1000"
ROW_OF_0 = re.compile(r"add a row of 0 requests (?:for model '([^']+)' )?at (\d+(?:\.\d+)?)")
INTERVALS_PER_TIMESTAMP = 1000
"""The most intervals a trace may read as for each of its timestamps once a refusal's row of 0 is added..."""
WEEK_AT_1S = 7 * 86400
"""... or, for a sparse request log (a few requests a day at 1 s), a week of 1 s intervals: milliseconds read
as seconds are months to years of them."""


def per_target_millis(targets: int, steps: int, seed: int) -> str:
    """Rows every 15 s per target in epoch milliseconds, each target at its own offset in the step, a few
    milliseconds of jitter: an exporter per target as a dashboard writes it."""
    rng = random.Random(seed)
    offsets = [rng.uniform(0, 15000) for _ in range(targets)]
    return "".join(f"{int(EPOCH * 1000 + 15000 * i + offsets[m] + rng.gauss(0, 3))},m{m},{rng.randint(50, 150)}\n"
                   for i in range(steps) for m in range(targets))


def test_epoch_milliseconds_at_each_targets_offset_are_told_to_divide_by_1000(tmp_path: Path) -> None:
    trace = write_trace(tmp_path, per_target_millis(8, 240, seed=17))
    result = simulate(tmp_path, trace)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(FAILED + f"{trace}: "), line
    assert MILLIS in line, line
    assert "row of 0" not in line and "round" not in line, line

    # Divided by 1000, the next refusal names the 15 s step the targets' rows come at.
    seconds = "".join(f"{int(t) / 1000:.3f},{m},{r}\n" for t, m, r in
                      (row.split(",") for row in per_target_millis(8, 240, seed=17).splitlines()))
    result = simulate(tmp_path, write_trace(tmp_path, seconds))
    assert result.returncode == 2, result.stderr
    assert "each model's rows are about 15 s apart" in result.stderr and MILLIS not in result.stderr, result.stderr


def cron_jobs(hours: int) -> str:
    """A 60 s export with rows only where requests came: a cleanup job at :00 and :30, a report at :00."""
    return "".join(f"{EPOCH + 60 * minute},cleanup,1\n" + (f"{EPOCH + 60 * minute},hourly-report,3\n"
                                                            if minute % 60 == 0 else "")
                   for minute in range(0, 60 * hours, 30))


def test_a_60s_export_of_jobs_every_half_hour_is_told_the_row_of_0_that_states_its_step(tmp_path: Path) -> None:
    trace = write_trace(tmp_path, cron_jobs(24))
    result = simulate(tmp_path, trace)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert "timestamps are 1800 s apart; intervals must be 1 s to 10 min" in line, line
    assert f"add a row of 0 requests at {EPOCH + 60} (2025-12-01T00:01:00Z) (any model)" in line, line
    assert "export at a step of 10 min or less" in line, line  # an hourly export is still told to export finer

    followed = write_trace(tmp_path, cron_jobs(24) + f"{EPOCH + 60},cleanup,0\n")
    result = simulate(tmp_path, followed)
    assert result.returncode == 0, result.stderr
    assert report(tmp_path)["trace"]["interval_s"] == 60


def test_an_hourly_export_on_no_whole_minute_is_told_only_to_export_finer(tmp_path: Path) -> None:
    """Rows 3600.5 s apart are no whole number of any step: no row of 0 states a step they sit on."""
    trace = write_trace(tmp_path, "".join(f"{EPOCH + 3600.5 * i},a,10\n" for i in range(6)))
    result = simulate(tmp_path, trace)
    assert result.returncode == 2, result.stderr
    assert "export at a step of 10 min or less" in result.stderr and "row of 0" not in result.stderr, result.stderr


def with_row_of_0(text: str, said: re.Match[str]) -> str:
    """The trace with the row of 0 a refusal names (for its model, or the first row's: "any model")."""
    model = said.group(1) or text.split(",", 2)[1]
    return text + f"{said.group(2)},{model},0\n"


def follow(text: str, message: str) -> list[str]:
    """The trace as each way through a refusal names leaves it: rounded to the step it names, with the row of 0
    it names, or both where it says to do both ("..., then add a row of 0")."""
    rounding, row = ROUND.search(message), ROW_OF_0.search(message)
    if rounding and row and "then add a row of 0" in message:
        return [with_row_of_0(rounded(text, rounding), row)]
    return [*([rounded(text, rounding)] if rounding else []), *([with_row_of_0(text, row)] if row else [])]


def sane_length(read: Trace, timestamps: int) -> bool:
    """Whether a trace reads at a length a row of 0 or a rounding may lead to: `INTERVALS_PER_TIMESTAMP` for
    each timestamp, or a sparse log's week at 1 s (`WEEK_AT_1S`)."""
    return read.intervals <= max(INTERVALS_PER_TIMESTAMP * timestamps, WEEK_AT_1S)


def on_a_grid(draw: st.DrawFn, millis: bool) -> str:
    """Up to 40 rows of three models at slots of a step, each model at its own offset or not, jittered or not."""
    slots = draw(TIMESTAMPS)
    step = draw(st.sampled_from([1, 7, 60, 450, 1800, 86400]))
    jitter, offsets = draw(st.sampled_from([0, 1, 3])), draw(st.booleans())
    rng = random.Random(draw(st.integers(0, 2**16)))
    shift = {model: rng.randint(0, step - 1) if offsets else 0 for model in "abc"}
    times = {(EPOCH + step * slot + shift[model] + rng.randint(-jitter, jitter), model): 1 + slot % 5
             for slot, model in slots}  # one row per model and time, however the jitter falls
    unit = 1000 if millis else 1
    return "".join(f"{t * unit},{model},{requests}\n" for (t, model), requests in sorted(times.items()))


def poller_with_extras(draw: st.DrawFn) -> str:
    """A request log of one model polled every few seconds at its own phase, and a few requests besides."""
    every = draw(st.sampled_from([5, 10, 15, 30, 60]))
    polls = draw(st.integers(30, 600))
    phase = draw(st.integers(0, every - 1))
    extras = draw(st.lists(st.integers(0, every * polls), max_size=12))
    counts = Counter([*(EPOCH + phase + every * i for i in range(polls)), *(EPOCH + e for e in extras)])
    return "".join(f"{t},poller,{n}\n" for t, n in sorted(counts.items()))


def whole_minute_timers(draw: st.DrawFn) -> str:
    """A 60 s export with rows only where a few timers or cron jobs fired, each every few minutes at its own."""
    jobs = draw(st.lists(st.sampled_from([2, 3, 5, 6, 10, 15, 30, 60]).flatmap(
        lambda every: st.tuples(st.just(every), st.integers(0, every - 1))), min_size=1, max_size=5, unique=True))
    minutes = draw(st.integers(60, 2880))
    return "".join(f"{EPOCH + 60 * minute},t{every}_{at},{1 + minute % 7}\n" for minute in range(minutes)
                   for every, at in jobs if minute % every == at)


def sparse_log(draw: st.DrawFn) -> str:
    """A request log of a few requests at random seconds over days, of one to three models."""
    days = draw(st.integers(1, 10))
    times = draw(st.lists(st.integers(0, days * 86400), min_size=2, max_size=80, unique=True))
    rng = random.Random(draw(st.integers(0, 2**16)))
    return "".join(f"{EPOCH + t},{rng.choice('abc')},1\n" for t in sorted(times))


class SlotsOfACoarserStep(NamedTuple):
    """Models each every `every` steps at its own slot of them (`slots`), `phase` of a step on, every time up
    to `jitter` of a step either way, in whole seconds or milliseconds, for `steps` of the coarser step."""

    step: int
    every: int
    slots: tuple[int, ...]
    phase: float
    jitter: float
    whole: bool
    steps: int = 60
    seed: int = 1


def at_slots_of_a_coarser_step(shape: SlotsOfACoarserStep) -> str:
    """The rows of `shape`, one model a slot."""
    rng = random.Random(shape.seed)
    step = shape.step
    rows = sorted((EPOCH + shape.every * step * i + step * (slot + shape.phase + rng.uniform(-1, 1) * shape.jitter),
                   f"m{slot}", rng.randint(50, 150)) for i in range(shape.steps) for slot in shape.slots)
    return "".join(f"{round(t) if shape.whole else f'{t:.3f}'},{model},{requests}\n" for t, model, requests in rows)


def jittered_slots(draw: st.DrawFn) -> str:
    """Models each every few steps at its own slot of them, every time 4% to 10% of the step off (past a
    scraper's jitter, within what is told to round), in whole seconds or milliseconds."""
    every = draw(st.integers(2, 6))
    shape = SlotsOfACoarserStep(
        step=draw(st.sampled_from([45, 90, 120, 300])), every=every,
        slots=tuple(draw(st.lists(st.integers(0, every - 1), min_size=1, max_size=every, unique=True))),
        phase=draw(st.floats(0, 1, exclude_max=True)), jitter=draw(st.floats(0.04, 0.1)),
        whole=draw(st.booleans()), steps=draw(st.integers(10, 60)), seed=draw(st.integers(0, 2**16)))
    note(repr(shape))
    return at_slots_of_a_coarser_step(shape)


@st.composite
def traces(draw: st.DrawFn) -> tuple[str, str, bool]:
    """(shape, the rows, whether in epoch milliseconds) of a trace a refusal may be given for."""
    shape = draw(st.sampled_from(["grid", "poller with extras", "whole-minute timers", "sparse log",
                                  "jittered slots"]))
    millis = shape == "grid" and draw(st.booleans())
    text = (on_a_grid(draw, millis) if shape == "grid" else poller_with_extras(draw)
            if shape == "poller with extras" else whole_minute_timers(draw) if shape == "whole-minute timers"
            else sparse_log(draw) if shape == "sparse log" else jittered_slots(draw))
    return shape, text, millis


TIMESTAMPS = st.lists(st.tuples(st.integers(0, 400), st.sampled_from(["a", "b", "c"])), min_size=2, max_size=40,
                      unique=True)


POLLED_AT_5 = "".join(f"{t},poller,1\n" for t in sorted({EPOCH, EPOCH + 26, *range(EPOCH + 5, EPOCH + 300, 10)}))
"""One model polled every 10 s at :05, :15, ... and two requests besides (at :00 and :26): a request log a
scraper's times look like."""
ON_A_71S_GRID_ONCE_ROUNDED = (f"{EPOCH},a,1\n{EPOCH + 11},b,2\n{EPOCH + 145},a,2\n{EPOCH + 216},b,2\n")
"""Four rows of a sparse 1 s trace, typically 71 s apart: rounded to 71 s (half to even, as pandas), they sit on
one 71 s grid, each model every third step at its own slot, which reads as targets at their own offsets in a
213 s step: the rounding was offered, and followed, refused again."""
SPARSE_AT_14S_ONCE_ROUNDED = (f"{EPOCH},b,1\n{EPOCH + 11},b,1\n{EPOCH + 22},a,1\n{EPOCH + 40},b,1\n"
                              f"{EPOCH + 56},c,1\n")
"""Five requests of a sparse log, told to round to their typical 14 s gap, which followed was refused again as
three models each at its own offset of a 42 s step (`--hypothesis-seed=110`)."""


FLOORED_TO_36S_AT_SLOTS_OF_180S = at_slots_of_a_coarser_step(SlotsOfACoarserStep(
    step=45, every=4, slots=(3, 0), phase=0.5, jitter=0.09375, whole=False, steps=34, seed=4457))
"""Two models each every 180 s at 22.5 and 157.5 s of it, up to 4.2 s off: told "not on the 36.842 s grid ...
round every timestamp down to a 36 s step", which followed was refused as each model at its own offset in the
180 s step (`--hypothesis-seed=5`)."""


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trace=traces())
@example(trace=("poller with extras", POLLED_AT_5, False))
@example(trace=("grid", ON_A_71S_GRID_ONCE_ROUNDED, False))
@example(trace=("sparse log", SPARSE_AT_14S_ONCE_ROUNDED, False))
@example(trace=("jittered slots", FLOORED_TO_36S_AT_SLOTS_OF_180S, False))
def test_every_way_through_a_refusal_reads_the_trace_at_a_sane_length(
        tmp_path: Path, trace: tuple[str, str, bool]) -> None:
    """Whatever trace is refused (rows on a grid or jittered or at their own offsets, a poller with a few other
    requests, a few timers at whole minutes, a sparse log over days), each way through it the refusal names, the
    rounding or the row of 0 or both, gives a trace that reads, at a sane length (`sane_length`): a rounding to a
    step over 10 min, or a row of 0 refused at a sane length, was a dead end. A trace in epoch milliseconds is
    told to divide by 1000, never a row of 0."""
    shape, text, millis = trace
    path = tmp_path / "t.csv"
    path.write_text("timestamp_s,model,requests\n" + text)
    try:
        read_csv(path)
        return
    except TraceError as refused:
        message = str(refused)
    fixes = follow(text, message)
    event(f"{shape}: refused " + ("ms" if millis else "with a way through" if fixes else "otherwise"))
    if millis:
        assert MILLIS in message and "row of 0" not in message, message
        return
    for fixed in fixes:
        path.write_text("timestamp_s,model,requests\n" + fixed)
        try:
            read = read_csv(path)
        except TraceError as again:
            raise AssertionError(f"followed {message!r}, refused: {again}") from None
        distinct = len({line.split(",")[0] for line in fixed.splitlines()})
        assert sane_length(read, distinct), (message, read.intervals, distinct)


def test_a_sparse_log_over_two_days_is_told_a_way_through_that_reads(tmp_path: Path) -> None:
    """50 requests at random seconds over 2 days: told only "round every timestamp to the 2377 s step", their
    typical gap, and followed, refused as "2377 s apart; intervals must be 1 s to 10 min". No rounding over 10
    min is advised; the row of 0 for the log's 1 s step is (172,800 intervals: a 1 s day is 86,400), and the
    trace so pinned replays every request."""
    rng = random.Random(50)
    times = sorted(rng.sample(range(EPOCH, EPOCH + 2 * 86400), 50))
    rows = "".join(f"{t},llama,1\n" for t in times)
    result = simulate(tmp_path, write_trace(tmp_path, rows))
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    said = ROUND.search(line)
    assert said is None or int(said.group(2)) <= 600, line
    [pinned] = follow(rows, line)
    result = simulate(tmp_path, write_trace(tmp_path, pinned), "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    assert report(tmp_path)["trace"]["interval_s"] == 1 and report(tmp_path)["trace"]["requests"] == 50


def test_a_poller_half_way_into_its_step_is_told_a_rounding_that_reads_at_its_step(tmp_path: Path) -> None:
    """A model polled every 10 s at :05 of each step, two requests besides: told "round every timestamp to the
    10 s step (pandas: .dt.round('10s'))", which rounds half to even, :05 to :00 and :15 to :20, and followed,
    refused as "line 4: timestamp 1764547230 is off the 20 s step". The rounding named keeps one row every 10 s,
    and the trace so rounded replays every request at 10 s."""
    result = simulate(tmp_path, write_trace(tmp_path, POLLED_AT_5))
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert "each model's rows are about 10 s apart" in line, line
    said = ROUND.search(line)
    assert said is not None and said.group(2) == "10", line
    result = simulate(tmp_path, write_trace(tmp_path, rounded(POLLED_AT_5, said)), "--policies", "fixed")
    assert result.returncode == 0, result.stderr
    assert report(tmp_path)["trace"]["interval_s"] == 10 and report(tmp_path)["trace"]["requests"] == 32
    assert "round every timestamp down to the 10 s step (pandas: .dt.floor('10s')" in line, line


def test_a_sparse_trace_that_rounding_would_scatter_is_told_only_the_row_of_0(tmp_path: Path) -> None:
    """Four rows 0, 11, 145 and 216 s in: told to round to their 71 s typical gap, followed, they were refused as
    each model 213 s apart at its own offset. Only the row of 0 for 1 s is named, and followed, it replays every
    request."""
    result = simulate(tmp_path, write_trace(tmp_path, ON_A_71S_GRID_ONCE_ROUNDED))
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert "the rows are typically 71 s apart" in line and ROUND.search(line) is None, line
    [pinned] = follow(ON_A_71S_GRID_ONCE_ROUNDED, line)
    result = simulate(tmp_path, write_trace(tmp_path, pinned), "--policies", "fixed")
    assert result.returncode == 0, result.stderr
    assert report(tmp_path)["trace"]["interval_s"] == 1 and report(tmp_path)["trace"]["requests"] == 7


def one_target(step: int, offset_ms: int, jitter_ms: int, scrapes: int, seed: int) -> str:
    """Five models of one scrape target `offset_ms` into each `step`, every scrape `jitter_ms` either way: the
    models share each scrape's timestamp, in milliseconds."""
    rng = random.Random(seed)
    rows = []
    for k in range(scrapes):
        at = (EPOCH + step * k) * 1000 + offset_ms + rng.randint(-jitter_ms, jitter_ms)
        rows += [f"{at / 1000:.3f},m{m},{50 + (k * 7 + m) % 60}\n" for m in range(5)]
    return "".join(rows)


def test_one_target_at_its_own_offset_with_a_millisecond_of_jitter_is_told_its_own_step(tmp_path: Path) -> None:
    """One target scraped 17.4 s past each minute, ±1 ms: the smallest gap read 59.998 s, and the refusal said to
    round down to a 59 s step, measured against whole minutes; followed, the trace was refused again."""
    rows = one_target(60, 17_400, 1, 60, 1)
    result = simulate(tmp_path, write_trace(tmp_path, rows))
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert "timestamps are about 60 s apart but not exactly (up to 0.001" in line, line
    assert "round every timestamp to the 60 s step (pandas: .dt.round('60s')" in line, line
    [fixed] = follow(rows, line)
    result = simulate(tmp_path, write_trace(tmp_path, fixed), "--policies", "fixed")
    assert result.returncode == 0, result.stderr
    assert report(tmp_path)["trace"]["interval_s"] == 60


@pytest.mark.parametrize(("phase", "whole"), [(0.0, True), (0.0, False), (0.5, False)])
def test_jittered_rows_at_their_own_slots_of_a_coarser_step_are_told_a_rounding_that_reads(
        tmp_path: Path, phase: float, whole: bool) -> None:
    """Three models each every 180 s at its own 45 s slot of it (0, 45 and 90 s), every time up to 4.2 s off:
    further off than a scraper's times, so not read as targets at their own offsets (`SCRAPE_JITTER_S`), yet
    within a tenth of the 45 s step. Told "timestamps are about 45 s apart but not exactly ... round every
    timestamp to the 45 s step" (or down, `.dt.floor`, where they gather half way into it), and followed, refused
    as "each model's rows are about 180 s apart, but the models' rows scatter up to 45 s around it": so rounded,
    each model sits at its own slot of 180 s, a slot empty all trace long. The rounding named, followed as pandas
    does, reads with every request."""
    rows = at_slots_of_a_coarser_step(SlotsOfACoarserStep(45, 4, (0, 1, 2), phase, 4.2 / 45, whole))
    with pytest.raises(TraceError) as refused:
        read_csv(write_trace(tmp_path, rows))
    message = str(refused.value)
    assert "timestamps are about 45 s apart but not exactly" in message, message
    said = ROUND.search(message)
    assert said is not None, message
    try:
        read = read_csv(write_trace(tmp_path, rounded(rows, said)))
    except TraceError as again:
        raise AssertionError(f"followed {message!r}, refused: {again}") from None
    assert read.interval_s == 180 and read.total_requests == sum(int(r.split(",")[2]) for r in rows.splitlines())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(step=st.sampled_from([5, 15, 30, 60, 300]), offset=st.floats(0.0, 0.999), jitter=st.floats(0.0005, 0.05),
       seed=st.integers(0, 2**16))
def test_one_jittered_target_at_any_offset_is_told_a_rounding_that_reads_at_its_step(
        tmp_path: Path, step: int, offset: float, jitter: float, seed: int) -> None:
    """Wherever in the step the target is scraped and however its scrapes stray (up to a twentieth of the step),
    the refusal names the target's step and a rounding (to it, or down to it where the offset is near half of it)
    that, followed, reads at that step."""
    rows = one_target(step, int(offset * step * 1000), max(1, int(jitter * step * 1000)), 40, seed)
    path = write_trace(tmp_path, rows)
    try:
        read_csv(path)
        return  # the jitter fell on the grid
    except TraceError as refused:
        message = str(refused)
    said = ROUND.search(message)
    assert said is not None and int(said.group(2)) == step, message
    [fixed] = follow(rows, message)
    assert read_csv(write_trace(tmp_path, fixed)).interval_s == step
