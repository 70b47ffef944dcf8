"""Traces whose rows carry each model's own scrape time: raw Prometheus samples or a per-target exporter give
every series its own timestamp, a few hundred milliseconds around the step (or at its own offset in it). Read as
they are, the smallest gap between two models' rows was taken for the step: refused as "0.001 s apart ... sum
the rows into 1 s intervals", and that advice (or whole-second timestamps, rows at 59/60/61 s) replayed each
minute's requests within one second, 69 pods where 1-2 serve them. Each now ends in one line naming the step
the models' rows come at and how to round to it."""

from __future__ import annotations

import itertools
import math
import random
import re
import statistics
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from autoscaler.simulation.trace import TraceError, read_csv
from tests.simulation.reading_runs import ONE_POLICY
from tests.simulation.runs import FAILED, ROUND, report, rounded, simulate, write_trace

EPOCH = 1764547200  # 2025-12-01T00:00:00Z


def scraped(step: int, models: int, steps: int, jitter_s: float, seed: int) -> list[tuple[float, str, int]]:
    """Rows every `step` s per model, each at its own time up to `jitter_s` off the step (a scraper's times)."""
    rng = random.Random(seed)
    return [(EPOCH + step * i + rng.uniform(-jitter_s, jitter_s), f"m{m}", 10 * (m + 1))
            for i in range(steps) for m in range(models)]


def written(rows: list[tuple[float, str, int]], how: str) -> str:
    """The rows as a user's export writes them: `ms` (milliseconds kept), `whole` (rounded to whole seconds),
    `floored` (the advice the error gave: floored to 1 s, then summed by timestamp and model)."""
    if how == "ms":
        return "".join(f"{t:.3f},{m},{r}\n" for t, m, r in rows)
    if how == "whole":
        return "".join(f"{round(t)},{m},{r}\n" for t, m, r in rows)
    summed: Counter[tuple[int, str]] = Counter()
    for t, m, r in rows:
        summed[(math.floor(t), m)] += r
    return "".join(f"{t},{m},{r}\n" for (t, m), r in sorted(summed.items()))


@pytest.mark.parametrize("how", ["ms", "whole", "floored"])
def test_rows_at_each_models_own_scrape_time_are_told_the_step_to_round_to(tmp_path: Path, how: str) -> None:
    """Three models scraped every 60 s, each row up to 1.2 s off the minute: refused naming the 60 s step,
    never read at 1 s (or 0.001 s) intervals nor told to sum into 1 s."""
    trace = write_trace(tmp_path, written(scraped(60, 3, 240, 1.2, seed=1), how))
    result = simulate(tmp_path, trace)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(FAILED + f"{trace}: each model's rows are about 60 s apart"), line
    assert "round every timestamp to the 60 s step (pandas: .dt.round('60s'), then sum by timestamp_s and model)" \
        in line, line
    assert "floor('1s')" not in line and "1 s intervals" not in line, line
    assert not (tmp_path / "out" / "report.json").exists()


def test_rows_at_each_models_own_offset_in_the_minute_are_told_the_step_to_round_to(tmp_path: Path) -> None:
    """Each series scraped at its own second of the minute (Prometheus spreads its targets so): the models'
    rows are spread over the step, not around it, and the line says so."""
    rng = random.Random(3)
    offsets = [rng.uniform(0, 60) for _ in range(5)]
    rows = "".join(f"{EPOCH + 60 * i + offsets[m] + rng.gauss(0, 0.2):.3f},m{m},{5 + m}\n"
                   for i in range(120) for m in range(5))
    trace = write_trace(tmp_path, rows)
    result = simulate(tmp_path, trace)
    assert result.returncode == 2, result.stderr
    assert "each model's rows are about 60 s apart, but the models' rows are spread over the step" in result.stderr
    assert ".dt.round('60s')" in result.stderr, result.stderr


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(step=st.sampled_from([5, 10, 15, 30, 60, 120]), models=st.integers(2, 6), steps=st.integers(20, 60),
       share=st.floats(0.005, 0.03), how=st.sampled_from(["ms", "whole", "floored"]), seed=st.integers(0, 2**16))
def test_scrape_times_are_refused_naming_their_step_and_its_rounding_reads_at_that_step(
        tmp_path: Path, step: int, models: int, steps: int, share: float, how: str, seed: int) -> None:
    """Whatever the step, the models, the scatter (up to 3% of the step and 2 s, a second or more where
    whole seconds are written, at steps of 15 s or more) and how the times are written: refused naming the
    step the models' rows come at, and the trace rounded as the line says reads at that step with every
    request."""
    if how != "ms":
        step = max(step, 15)
    jitter_s = min(max(share * step, 1.0) if how != "ms" else share * step, 2.0)
    rows = scraped(step, models, steps, jitter_s, seed)
    trace = write_trace(tmp_path, written(rows, how))
    with pytest.raises(TraceError, match=f"each model's rows are about {step} s apart") as refused:
        read_csv(trace)
    assert f".dt.round('{step}s')" in str(refused.value)
    rounded: Counter[tuple[int, str]] = Counter()
    for t, m, r in rows:
        rounded[(step * round((t - EPOCH) / step), m)] += r
    read = read_csv(write_trace(tmp_path, "".join(f"{EPOCH + t},{m},{r}\n" for (t, m), r in rounded.items())))
    assert read.interval_s == step
    assert read.total_requests == sum(r for _, _, r in rows)


def test_a_second_trace_with_bursts_every_minute_still_reads_at_one_second(tmp_path: Path) -> None:
    """A model requested in 3 s bursts once a minute has rows a second apart: its step is 1 s, not a scrape's."""
    rows = "".join(f"{EPOCH + 60 * i + s},m{m},{3 + s}\n" for i in range(30) for m in range(3) for s in range(3))
    trace = read_csv(write_trace(tmp_path, rows))
    assert trace.interval_s == 1.0


def test_timer_functions_at_their_own_minutes_still_read_at_the_minute(tmp_path: Path) -> None:
    """Azure Functions' timer triggers fire every 5 minutes, each at its own minute: rows exactly 300 s apart per
    model on a 60 s grid are a 60 s trace, not scatter around a 300 s step."""
    rows = "".join(f"{EPOCH + 300 * i + 60 * m},f{m},1\n" for i in range(40) for m in range(5))
    trace = read_csv(write_trace(tmp_path, rows))
    assert trace.interval_s == 60.0


@pytest.mark.parametrize("wobble", [0, 1])
def test_a_model_requested_every_few_minutes_on_a_minute_grid_still_reads_at_the_minute(tmp_path: Path,
                                                                                          wobble: int) -> None:
    """A job every 7 minutes (give or take one) in a 60 s trace with a row a minute apart at its start: its rows
    are 420 s apart, exactly or by whole minutes, which is traffic on the trace's grid, not scrape times (read
    as scattered around a 412 s step, it was refused)."""
    rng = random.Random(2)
    minutes = [0, 1, *(7 * i + rng.randint(-wobble, wobble) for i in range(1, 50))]
    trace = read_csv(write_trace(tmp_path, "".join(f"{EPOCH + 60 * m},a,{rng.randint(1, 3)}\n" for m in minutes)))
    assert trace.interval_s == 60.0


def periodic_clients() -> str:
    """A genuine 1 s trace: 30 models, each requested every 15 s (give or take a second) at its own phase."""
    rng = random.Random(4)
    phases = [rng.randint(0, 14) for _ in range(30)]
    return "".join(f"{t},m{m},{rng.randint(1, 9)}\n" for t, m in sorted(
        (EPOCH + 15 * i + phases[m] + rng.choice((-1, 0, 0, 0, 1)), m) for i in range(1, 240) for m in range(30)))


def test_periodic_clients_in_a_one_second_trace_are_told_how_to_keep_it_and_then_read_at_one_second(
        tmp_path: Path) -> None:
    """Thirty clients each calling every ~15 s at its own second look like scrape times and are refused, but
    the line says how to keep the 1 s step (it offered only rounding to 15 s); with the row of 0 it asks for,
    the trace reads at 1 s with every request."""
    rows = periodic_clients()
    result = simulate(tmp_path, write_trace(tmp_path, rows))
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert "each model's rows are about 15 s apart" in line and ".dt.round('15s')" in line, line
    asked = re.search(r"if the trace's step is 1 s \(each model requested at its own times\), add a row of 0 "
                      r"requests for model '(\w+)' at (\d+) to state it", line)
    assert asked, line
    first = min(int(row.split(",")[0]) for row in rows.splitlines())
    assert int(asked[2]) == first + 1 and f"{first},{asked[1]}," in rows, line
    read = read_csv(write_trace(tmp_path, f"{asked[2]},{asked[1]},0\n" + rows))
    assert read.interval_s == 1.0
    assert read.total_requests == sum(int(row.split(",")[2]) for row in rows.splitlines())


def test_a_one_second_trace_of_batches_a_minute_apart_is_told_the_typical_step_not_the_smallest_gap(
        tmp_path: Path) -> None:
    """One model's batches every 60 s, give or take 3, in whole seconds: refused with "round every timestamp down
    to a 57 s step", the smallest gap, which is no step of the trace; now it names the typical gap (the median) and how
    to keep the trace at 1 s, which then reads with every request."""
    rng = random.Random(6)
    times = [EPOCH]
    while len(times) < 120:
        times.append(times[-1] + 60 + rng.randint(-3, 3))
    rows = "".join(f"{t},only,{rng.randint(50, 90)}\n" for t in times)
    result = simulate(tmp_path, write_trace(tmp_path, rows))
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert "57 s step" not in line and "floor('57s')" not in line, line
    gaps = [b - a for a, b in itertools.pairwise(times)]
    typical = round(statistics.median(gaps))
    assert 59 <= typical <= 61 and min(gaps) == 57
    assert f"typically {typical} s apart" in line and f".dt.round('{typical}s')" in line, line
    assert f"add a row of 0 requests at {EPOCH + 1} (any model) to state it" in line, line
    read = read_csv(write_trace(tmp_path, f"{EPOCH + 1},only,0\n" + rows))
    assert read.interval_s == 1.0 and read.total_requests == sum(int(r.split(",")[2]) for r in rows.splitlines())


def offsets_cut_to_whole_seconds(step: int, offsets: list[float], steps: int, seed: int) -> str:
    """Each target scraped at its own offset in the step with milliseconds of jitter, the time cut to whole
    seconds (`int(ts)`, as many exports write it): each model's rows come exactly `step` s apart."""
    rng = random.Random(seed)
    return "".join(f"{t},{m},{r}\n" for t, m, r in sorted(
        (int(EPOCH + step * i + offset + rng.gauss(0, 0.003)), f"m{m}", rng.randint(600, 1200))
        for i in range(steps) for m, offset in enumerate(offsets)))


@pytest.mark.parametrize("step", [15, 60])
def test_own_offsets_cut_to_whole_seconds_are_told_the_step_to_round_to(tmp_path: Path, step: int) -> None:
    """Twelve targets each at its own second of the step, exactly a step apart once cut to whole seconds: read
    as a 1 s trace with no word (only the --tick warning; maxReplicas 192 and 480 fixed pod-hours where 20 and 48
    serve); now refused naming the step and how to round to it. Two of the 60 s targets are at 30 s once cut:
    told `.dt.round('60s')`, which rounds half to even, each of theirs went to alternate minutes, two scrapes in one
    and none in the next; the rounding named keeps every target's scrapes a minute apart."""
    rng = random.Random(11)
    offsets = [rng.uniform(0, step) for _ in range(12)]
    rows = offsets_cut_to_whole_seconds(step, offsets, 3600 // step, seed=11)
    trace = write_trace(tmp_path, rows)
    result = simulate(tmp_path, trace)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(FAILED + f"{trace}: each model's rows are about {step} s apart, but the models' rows are "
                           "spread over the step, each at its own offset in it"), line
    assert not (tmp_path / "out" / "report.json").exists()
    said = ROUND.search(line)
    assert said is not None and int(said.group(2)) == step, line
    fixed = rounded(rows, said)
    assert fixed.count("\n") == rows.count("\n"), line  # no two of a target's scrapes in one step
    read = read_csv(write_trace(tmp_path, fixed))
    assert read.interval_s == step and read.total_requests == sum(int(r.split(",")[2]) for r in rows.splitlines())


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(step=st.sampled_from([15, 30, 60, 120, 300]), data=st.data(), seed=st.integers(0, 2**16))
def test_any_targets_at_their_own_whole_seconds_are_refused_naming_their_step(tmp_path: Path, step: int,
                                                                             data: st.DataObject, seed: int) -> None:
    """Whatever the step and the targets' offsets (at two or more whole seconds, fewer than 9 in 10 of the
    step's), cut to whole seconds: refused naming the step, never read at the smallest gap."""
    offsets = data.draw(st.lists(st.floats(0, step, exclude_max=True), min_size=2, max_size=12))
    seconds = {int(offset) for offset in offsets}
    assume(2 <= len(seconds) < 0.9 * step)
    # Offsets all whole minutes apart are timers at their own minutes (MINUTE_S), as likely and read so.
    assume(len({second % 60 for second in seconds}) >= 2)
    # Seconds that tile the step evenly (13 and 28 of 30) are a trace at the finer step whose models take turns,
    # as likely and read so: nothing in the rows tells them apart.
    ordered = sorted(seconds)
    assume(len({(b - a) % step for a, b in zip(ordered, ordered[1:] + ordered[:1], strict=True)}) >= 2)
    refused_naming_the_step_and_read_at_it_rounded(tmp_path, step, offsets, seed)


def refused_naming_the_step_and_read_at_it_rounded(tmp_path: Path, step: int, offsets: list[float],
                                                   seed: int) -> None:
    """Targets at `offsets` of `step`, cut to whole seconds: refused naming the step, and the trace rounded as
    the refusal says (as pandas does) reads at it with every request."""
    rows = offsets_cut_to_whole_seconds(step, offsets, 40, seed)
    with pytest.raises(TraceError, match=f"each model's rows are about {step} s apart") as refused:
        read_csv(write_trace(tmp_path, rows))
    said = ROUND.search(str(refused.value))
    assert said is not None and int(said.group(2)) == step, refused.value
    read = read_csv(write_trace(tmp_path, rounded(rows, said)))  # a target at half the step: .dt.round split it
    assert read.interval_s == step and read.total_requests == sum(int(r.split(",")[2]) for r in rows.splitlines())


def test_targets_at_0_6_12_and_20_s_of_30_are_refused_naming_the_30s_step(tmp_path: Path) -> None:
    """Targets at 0, 6.5, 12.5 and 20.5 s of a 30 s step (the property's example for --hypothesis-seed=137), cut
    to whole seconds, the one at 0 s to 29 s of the step before about half the time: every 30 s of a target's
    requests was told to land in one second ("no two rows are 1 s apart ... where the trace's step is 1 s ...
    add a row of 0 requests"), as the 6 s smallest gap's slots read filled by the rows off its grid."""
    refused_naming_the_step_and_read_at_it_rounded(tmp_path, 30, [20.5, 0.0, 6.5, 12.5, 20.5], seed=0)


def test_two_targets_half_a_300s_step_apart_are_refused_naming_the_300s_step(tmp_path: Path) -> None:
    """Targets at 0 and 149.5 s of a 300 s step, cut to whole seconds (the property's example at 3,000 examples,
    --hypothesis-seed=8): each model's rows were taken to come about every smallest gap (149 s) and no step
    sought, as 40 rows over their 11,849 s span are 296 s each, under twice it, where the 39 gaps between them are
    300 s; told to round to 150 s, each target's 300 s of requests read as landing in 150 s."""
    refused_naming_the_step_and_read_at_it_rounded(tmp_path, 300, [0.0, 149.5], seed=0)


def test_timer_functions_every_few_minutes_at_their_own_minutes_still_read_at_the_minute(tmp_path: Path) -> None:
    """A per-minute trace of timer functions every 5, 15 and 60 minutes, each at its own minute: rows exactly
    a whole number of 5 minutes apart fill every minute of the 5, a 60 s trace, not targets at their offsets."""
    rng = random.Random(8)
    functions = [(every, rng.randrange(every)) for every in (5, 15, 60) for _ in range(20)]
    rows = "".join(f"{EPOCH + 60 * minute},f{f},{rng.randint(1, 3)}\n" for minute in range(24 * 60)
                   for f, (every, at) in enumerate(functions) if minute % every == at)
    trace = read_csv(write_trace(tmp_path, rows))
    assert trace.interval_s == 60.0


def poller_with_extras(seed: int) -> tuple[str, list[int]]:
    """One model polled every 10 s for 3 h in a 1 s request log, and six requests besides at random seconds:
    the rows and the extra requests' times."""
    rng = random.Random(seed)
    polls = {EPOCH + 10 * i for i in range(3 * 360)}
    extras = sorted(t for t in rng.sample(range(EPOCH, EPOCH + 3 * 3600), 40) if (t - EPOCH) % 10 >= 3)[:6]
    counts = Counter([*polls, *extras])
    return "".join(f"{t},llama,{counts[t]}\n" for t in sorted(counts)), extras


def test_one_model_polled_every_10s_with_a_few_other_requests_reads_at_one_second(tmp_path: Path) -> None:
    """One series has one scrape offset: a model whose rows sit at several phases of its 10 s step (its
    poller's, and six requests of a user's between polls) is a request log, not scrape times. It was refused
    as "the models' rows are spread over the step, each at its own offset in it", naming an extra request."""
    rows, extras = poller_with_extras(seed=3)
    assert len(extras) == 6
    result = simulate(tmp_path, write_trace(tmp_path, rows), *ONE_POLICY)
    assert result.returncode == 0, result.stderr
    assert report(tmp_path)["trace"]["interval_s"] == 1


def test_clients_every_7s_and_13s_read_at_one_second(tmp_path: Path) -> None:
    """A client every 7 s and another every 13 s: the 13 s one's rows fall at every second of a 7 s step, no
    one scrape offset, so the log reads at 1 s (it was refused as targets each at its own offset)."""
    rows = "".join(f"{t},{m},1\n" for t, m in sorted([(EPOCH + 7 * i, "a") for i in range(1500)]
                                                    + [(EPOCH + 4 + 13 * i, "b") for i in range(800)]))
    result = simulate(tmp_path, write_trace(tmp_path, rows), *ONE_POLICY)
    assert result.returncode == 0, result.stderr
    assert report(tmp_path)["trace"]["interval_s"] == 1


def timers(every_at: list[tuple[int, int]], minutes: int) -> str:
    """A 60 s export with rows only where timers fired: each (every, at) fires every `every` minutes at minute
    `at` of it, with a few requests."""
    rng = random.Random(5)
    return "".join(f"{EPOCH + 60 * minute},t{every}_{at},{rng.randint(1, 40)}\n" for minute in range(minutes)
                   for every, at in every_at if minute % every == at)


@pytest.mark.parametrize("every_at", [
    [(5, 0), (5, 1), (5, 2), (5, 3)],  # four timers every 5 min at minutes 0-3
    [(5, 1), (10, 3), (15, 7)],  # every 5, 10, 15 min at their own minutes
    [(3, 0), (3, 1), (6, 4)],  # cron */3 jobs at minutes 0 and 1, a */6 one at minute 4
], ids=["4timers_5m", "timers_5_10_15", "cron3"])
def test_a_few_timers_at_whole_minutes_read_at_the_minute(tmp_path: Path, every_at: list[tuple[int, int]]) -> None:
    """A few timers or cron jobs at their own whole minutes cannot fill 90% of their step's minutes
    (`FILLED`), and were refused as targets at their own offsets ("round every timestamp to the 300 s step"):
    a scraper's offsets are at any millisecond of the step, never all on whole minutes."""
    result = simulate(tmp_path, write_trace(tmp_path, timers(every_at, 24 * 60)), *ONE_POLICY)
    assert result.returncode == 0, result.stderr
    assert report(tmp_path)["trace"]["interval_s"] == 60


def test_clients_at_their_own_seconds_are_told_both_readings_and_the_1s_row_of_0(tmp_path: Path) -> None:
    """Two clients polling every 20 s at seconds 0 and 5 of it, in a request log: the refusal reads either way,
    scrape times or a request log, and the row of 0 it offers keeps the log's 1 s step (it stated 5 s, the step
    every timestamp sits on, which spread each request over 5 s)."""
    rows = "".join(f"{EPOCH + 20 * i},a,2\n{EPOCH + 20 * i + 5},b,1\n" for i in range(540))
    result = simulate(tmp_path, write_trace(tmp_path, rows))
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert "as each target's own scrape time does, or each client's own time in a request log" in line, line
    assert "if they are scrape times, round every timestamp to the 20 s step" in line, line
    asked = re.search(r"if the trace's step is 1 s \(each model requested at its own times\), add a row of 0 "
                      r"requests for model '(\w+)' at (\d+) to state it", line)
    assert asked and int(asked[2]) == EPOCH + 1, line
    result = simulate(tmp_path, write_trace(tmp_path, f"{asked[2]},{asked[1]},0\n" + rows), *ONE_POLICY)
    assert result.returncode == 0, result.stderr
    assert report(tmp_path)["trace"]["interval_s"] == 1
