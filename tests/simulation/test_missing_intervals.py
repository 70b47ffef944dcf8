"""Intervals without a row inside steady, busy traffic: a collector down for 40 minutes, scrapes lost here and
there. Replayed as no requests at all, they flipped the verdict (mean-hpa scaled down through the outage and
met the traffic after it: 3.1% of requests delayed became 48%) with no word, as only stretches of an hour or
more were named. Now they are warned about with where, how long and what to do, and quiet traces are not."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from autoscaler.simulation.timestamps import span_text
from autoscaler.simulation.trace import read_csv
from tests.simulation.runs import report, simulate, write_trace

EPOCH = 1764547200  # 2025-12-01T00:00:00Z
MINUTES = 360


def steady(missing: set[int], per_minute: int = 600, models: int = 4, seed: int = 0) -> str:
    """Six hours at 60 s of `models` models sharing about `per_minute` requests, no rows in the `missing` minutes."""
    rng = random.Random(seed)
    return "".join(f"{EPOCH + 60 * i},m{m},{rng.randint(per_minute // models // 2, per_minute // models)}\n"
                   for i in range(MINUTES) if i not in missing for m in range(models))


def test_an_outage_and_lost_minutes_in_steady_traffic_are_warned_about_where_and_how_long(tmp_path: Path) -> None:
    """A 40-minute outage from 02:00 and three lost minutes: one warning naming the outage (how long, between
    which rows, on which line), how many such stretches and how long in all, and what to do; the run goes on."""
    outage = set(range(120, 160))
    trace = write_trace(tmp_path, steady(outage | {30, 200, 201}))
    result = simulate(tmp_path, trace, "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    [said] = [line for line in result.stderr.splitlines() if "no rows at all" in line]
    assert ("no rows at all for 40 min between the rows at 1764554340 (2025-12-01T01:59:00Z) and at 1764556800 "
            "(2025-12-01T02:40:00Z) (line 478; 3 such stretches, 43 min in all, this the longest)") in said, said
    assert "replayed as no requests" in said and "fill" in said and "cut the trace" in said, said
    assert "if the traffic did stop there, ignore this" in said, said
    assert any("no rows at all for 40 min" in warning for warning in report(tmp_path)["warnings"])


def test_quiet_traffic_with_empty_minutes_is_not_warned_about(tmp_path: Path) -> None:
    """A model requested a few times an hour: most minutes have no row, as its traffic has none."""
    rng = random.Random(1)
    rows = "".join(f"{EPOCH + 60 * i},a,{rng.randint(1, 3)}\n" for i in range(MINUTES) if i % 7 == 0 or i < 2)
    result = simulate(tmp_path, write_trace(tmp_path, rows), "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    assert "no rows at all" not in result.stderr, result.stderr


def test_traffic_that_fades_out_and_back_is_not_warned_about(tmp_path: Path) -> None:
    """A night with no requests between an evening that tails off and a morning that picks up: no data missing."""
    rows = "".join(f"{EPOCH + 60 * i},a,{abs(i - 180) // 10}\n" for i in range(MINUTES) if abs(i - 180) >= 10)
    trace = read_csv(write_trace(tmp_path, rows))
    assert not [note for note in trace.notes if "no rows at all" in note], trace.notes


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=st.integers(10, MINUTES - 70), minutes=st.integers(1, 59), seed=st.integers(0, 2**16))
def test_any_stretch_under_an_hour_lost_from_busy_traffic_is_named(tmp_path: Path, first: int, minutes: int,
                                                                    seed: int) -> None:
    """Wherever the lost stretch is and however long (under an hour: longer ones have their own warning), it is
    named with its length and the row after it."""
    trace = read_csv(write_trace(tmp_path, steady(set(range(first, first + minutes)), seed=seed)))
    [note] = [note for note in trace.notes if "no rows at all" in note]
    after = EPOCH + 60 * (first + minutes)
    assert f"no rows at all for {minutes} min between" in note, note
    assert f"and at {after} " in note and f"(line {2 + 4 * first})" in note, note


def busy_seconds(silences: dict[int, int], seconds: int = 3600, rate: int = 200) -> str:
    """An hour of one model at 1 s with about `rate` requests a second, no rows for `length` s from each
    second in `silences` (second: length)."""
    rng = random.Random(7)
    quiet = {s for first, length in silences.items() for s in range(first, first + length)}
    return "".join(f"{EPOCH + s},a,{rng.randint(rate // 2, rate)}\n" for s in range(seconds) if s not in quiet)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(length=st.integers(1, 14), every=st.integers(20, 600))
def test_silences_shorter_than_an_hpa_sync_in_busy_traffic_are_not_warned_about(tmp_path: Path, length: int,
                                                                                 every: int) -> None:
    """A 1 s trace of bursty load averaging 40 requests/s has seconds of nothing of its own (8 stretches of a
    few seconds were warned about as missing data): a stretch shorter than the HPA's 15 s sync cannot make a
    policy scale down through it, so it is not named, however often it comes."""
    trace = read_csv(write_trace(tmp_path, busy_seconds({s: length for s in range(30, 3500, every)})))
    assert not [note for note in trace.notes if "no rows at all" in note], trace.notes


def on_off(outage: tuple[int, int] | None = None, seed: int = 3) -> str:
    """Two hours of one model at 1 s, on for 20-60 s at about 30 requests/s, then off for 1-29 s; no rows
    for `outage` (first second, length) as well."""
    rng = random.Random(seed)
    rows, s = [], 0
    while s < 7200:
        for _ in range(rng.randint(20, 60)):
            if outage is None or not outage[0] <= s < outage[0] + outage[1]:
                rows.append(f"{EPOCH + s},a,{rng.randint(25, 36)}\n")
            s += 1
        s += rng.randint(1, 29)
    return "".join(rows)


def test_a_trace_of_on_and_off_traffic_is_not_warned_about(tmp_path: Path) -> None:
    """One model on and off by the half minute: its silences are the trace's shape ("154 such stretches, 36.7
    min" was warned about, and no policy made a scale event through them)."""
    result = simulate(tmp_path, write_trace(tmp_path, on_off()), "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    assert "no rows at all" not in result.stderr, result.stderr
    assert not [warning for warning in report(tmp_path)["warnings"] if "no rows at all" in warning]


def test_an_outage_unlike_the_traces_own_silences_is_named_as_a_possibility(tmp_path: Path) -> None:
    """Ten minutes without rows in the same on/off traffic is unlike any of its own silences (under 30 s): named,
    saying what a policy may do through it, not that every policy does."""
    result = simulate(tmp_path, write_trace(tmp_path, on_off(outage=(3000, 600))), "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    [said] = [line for line in result.stderr.splitlines() if "no rows at all" in line]
    assert "such stretches" not in said, said
    assert "within 5 intervals either side" in said, said
    assert "every policy" not in said and "a policy may scale down through it" in said, said


def test_a_night_cron_between_busy_days_is_not_warned_about(tmp_path: Path) -> None:
    """Two days at 60 s, busy 07-22 h, and at night 100 requests every 5 minutes: the 4 minutes between the
    night's batches are its shape (warned as "755 such stretches, 3.02e+03 min in all")."""
    rng = random.Random(5)
    rows = "".join(f"{EPOCH + 60 * i},a,{rng.randint(300, 600) if 7 <= i // 60 % 24 < 22 else 100}\n"
                   for i in range(2 * 24 * 60) if 7 <= i // 60 % 24 < 22 or i % 5 == 0)
    trace = read_csv(write_trace(tmp_path, rows))
    assert not [note for note in trace.notes if "no rows at all" in note], trace.notes


def test_hours_lost_in_all_are_said_in_hours(tmp_path: Path) -> None:
    """Outages of 50, 45 and 40 min in six hours of steady traffic: 2.25 h in all, not "135 min" (and 3,020
    min read "3.02e+03 min")."""
    lost = set(range(60, 110)) | set(range(170, 215)) | set(range(270, 310))
    trace = read_csv(write_trace(tmp_path, steady(lost)))
    [note] = [note for note in trace.notes if "no rows at all" in note]
    assert "(line 242; 3 such stretches, 2.25 h in all, this the longest)" in note, note


def stretches(missing: set[int]) -> int:
    """How many stretches without rows the `missing` minutes make (lost minutes side by side make one)."""
    return sum(1 for minute in missing if minute - 1 not in missing)


def runs(missing: set[int]) -> list[tuple[int, int]]:
    """The stretches without rows the `missing` minutes make, (first minute, length), in time order."""
    firsts = sorted(minute for minute in missing if minute - 1 not in missing)
    return [(first, next(n for n in range(1, len(missing) + 2) if first + n not in missing)) for first in firsts]


@pytest.mark.parametrize("lost", [6, 10, 30])
def test_more_lost_minutes_in_a_busy_export_are_still_warned_about_as_one_line(tmp_path: Path, lost: int) -> None:
    """Three or five lost minutes in a busy 60 s export were warned about, six, ten or thirty not: the more data
    lost, the less said. Now one line names how many silences and how long in all, however many there are."""
    missing = set(random.Random(lost).sample(range(20, MINUTES - 20), lost))
    result = simulate(tmp_path, write_trace(tmp_path, steady(missing)), "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    [said] = [line for line in result.stderr.splitlines() if "no rows at all" in line]
    assert f"; {stretches(missing)} such stretches, {lost} min in all, this the longest)" in said, said


def test_twelve_collector_restarts_in_busy_traffic_are_warned_about(tmp_path: Path) -> None:
    """Twelve 5-minute collector restarts in a busy 60 s export: nothing said (six were warned about), while
    mean-hpa delayed a third of the requests in the replay, none with the rows there."""
    starts = [5 * slot for slot in sorted(random.Random(23).sample(range(3, MINUTES // 5 - 3, 2), 12))]
    missing = {start + minute for start in starts for minute in range(5)}
    result = simulate(tmp_path, write_trace(tmp_path, steady(missing)), "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    [said] = [line for line in result.stderr.splitlines() if "no rows at all" in line]
    assert "no rows at all for 5 min between" in said and "12 such stretches, 1 h in all" in said, said


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lost=st.integers(1, MINUTES // 10), seed=st.integers(0, 2**16))
@example(lost=5, seed=328).via("four of the five lost minutes 71 minutes from another: taken for a schedule")
@example(lost=34, seed=29).via("five silences of 2 or 3 minutes, no spacing of theirs recurring: the smallest, 33, "
                               "taken for a period, and a lost minute a period from each")
def test_any_number_of_scattered_lost_minutes_in_a_busy_export_is_warned_about_in_one_line(
        tmp_path: Path, lost: int, seed: int) -> None:
    """However many minutes (up to a tenth of the trace) are lost at random from a busy 60 s export, one line
    names the silences: how many and how long in all, of those the line says it names: with 2 or more minutes
    with rows within 5 either side (a minute lost between single rows, 334 of 332, 334 and 336-340, is as a
    periodic job's silence, and left out)."""
    missing = set(random.Random(seed).sample(range(10, MINUTES - 10), lost))
    trace = read_csv(write_trace(tmp_path, steady(missing, seed=seed)))
    named = [(first, length) for first, length in runs(missing)
             if min(sum(minute not in missing for minute in side)
                    for side in (range(first - 5, first), range(first + length, first + length + 5))) >= 2]
    said = [note for note in trace.notes if "no rows at all" in note]
    assert len(said) == bool(named), trace.notes
    if len(named) > 1:
        assert (f"; {len(named)} such stretches, {span_text(60 * sum(length for _, length in named))} in all, "
                "this the longest)") in said[0], said


def test_lost_minutes_a_by_chance_recurring_spacing_apart_are_all_counted(tmp_path: Path) -> None:
    """Eight minutes lost at random from a busy 60 s export and a 5-minute outage: the silences of seven of the
    lost minutes end within 3 minutes of 67 from another's (three of them 67 apart one after another), and they
    were taken for the trace's own rhythm, a batch's: "2 such stretches, 6 min in all" for 9 and 13. A schedule
    is silences one a period after another, five or more in a row, not a spacing that recurs by chance."""
    missing = {40, 54, 75, 106, 123, 190, 257, 273} | set(range(336, 341))
    result = simulate(tmp_path, write_trace(tmp_path, steady(missing)), "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    [said] = [line for line in result.stderr.splitlines() if "no rows at all" in line]
    assert "no rows at all for 5 min between" in said and "; 9 such stretches, 13 min in all, this the" in said, said


def test_a_report_job_through_the_evening_at_the_end_of_the_trace_is_not_warned_about(tmp_path: Path) -> None:
    """A web model busy 08-20 h and a report job's 100 requests every 15 minutes, the export ending at 21 h: the
    evening's 14 minutes between the job's rows were named as lost data ("4 such stretches, 49 min in all ... a
    collector down"), the intervals with rows around each being one job row; to midnight nothing was said."""
    rng = random.Random(19)
    rows = "".join(f"{EPOCH + 60 * minute},{model},{count}\n" for minute in range(8 * 60, 21 * 60)
                   for model, count in (("web", rng.randint(1000, 1400) if minute < 20 * 60 else 0),
                                        ("report-job", rng.randint(80, 120) if minute % 15 == 7 else 0))
                   if count)
    result = simulate(tmp_path, write_trace(tmp_path, rows), "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    assert "no rows at all" not in result.stderr, result.stderr


def test_batches_at_a_regular_spacing_through_busy_traffic_are_not_warned_about(tmp_path: Path) -> None:
    """A model busy for 3 minutes every 10 minutes for two hours of a six-hour trace, busy otherwise: its 7
    minutes between batches are its rhythm, regularly spaced, not data lost."""
    rng = random.Random(4)
    rows = "".join(f"{EPOCH + 60 * minute},a,{rng.randint(200, 400)}\n" for minute in range(MINUTES)
                   if not 120 <= minute < 240 or minute % 10 < 3)
    trace = read_csv(write_trace(tmp_path, rows))
    assert not [note for note in trace.notes if "no rows at all" in note], trace.notes


def one_down(down: dict[int, tuple[int, int]], intervals: int = 720, step: int = 15, models: int = 6,
             seed: int = 11) -> str:
    """`intervals` at `step` s of `models` models, m0 the busiest (about 200 requests an interval, the others
    about 30), no rows of model m<k> for `length` intervals from `first` for each k: (first, length) in `down`."""
    rng = random.Random(seed)
    return "".join(f"{EPOCH + step * i},m{m},{rng.randint(150, 250) if m == 0 else rng.randint(20, 40)}\n"
                   for i in range(intervals) for m in range(models)
                   if not (m in down and down[m][0] <= i < down[m][0] + down[m][1]))


def test_one_busy_models_rows_lost_while_the_others_report_are_warned_about(tmp_path: Path) -> None:
    """A 15 s export where the busiest model's target was down for 40 minutes while the five others reported
    as usual: nothing was said (only intervals without any model's row were), and it was replayed as no
    requests for that model. One line names the model, how long, its rows either side, the line after, and
    what to do; the run goes on."""
    trace = write_trace(tmp_path, one_down({0: (300, 160)}))
    result = simulate(tmp_path, trace, "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    [said] = [line for line in result.stderr.splitlines() if "has no rows for" in line]
    assert ("model 'm0' has no rows for 40 min between its rows at 1764551685 (2025-12-01T01:14:45Z) and at "
            f"1764554100 (2025-12-01T01:55:00Z) (line {2 + 6 * 460 - 160}), while the trace's other models have "
            "rows through it") in said, said
    assert "replayed as no requests for 'm0'" in said and "fill those intervals" in said, said
    assert "cut the trace at them" in said and "if its traffic did stop there, ignore this" in said, said
    assert "no rows at all" not in result.stderr, result.stderr
    assert any("model 'm0' has no rows for 40 min" in warning for warning in report(tmp_path)["warnings"])


def test_several_models_lost_are_named_in_one_line(tmp_path: Path) -> None:
    """m0 down for 40 minutes, m3 for 10 and m5 for 20 at other times: one line, the longest in full, the
    other models named, how many stretches and how long in all."""
    trace = read_csv(write_trace(tmp_path, one_down({0: (300, 160), 3: (100, 40), 5: (550, 80)})))
    [note] = [note for note in trace.notes if "has no rows for" in note]
    assert "model 'm0' has no rows for 40 min" in note, note
    assert "; also models 'm3', 'm5'; 3 such stretches, 1.17 h in all, this the longest)" in note, note


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(model=st.integers(0, 3), first=st.integers(10, MINUTES - 120), minutes=st.integers(5, 110),
       seed=st.integers(0, 2**16))
def test_a_busy_models_silence_while_the_others_report_is_named_however_long(tmp_path: Path, model: int,
                                                                               first: int, minutes: int,
                                                                               seed: int) -> None:
    """Whichever busy model loses its rows, wherever and for however long from the HPA's 5-minute scale-down
    window, while the others report: named, with its length and the model."""
    rng = random.Random(seed)
    rows = "".join(f"{EPOCH + 60 * i},m{m},{rng.randint(75, 150)}\n" for i in range(MINUTES) for m in range(4)
                   if not (m == model and first <= i < first + minutes))
    trace = read_csv(write_trace(tmp_path, rows))
    [note] = [note for note in trace.notes if "has no rows for" in note]
    assert f"model 'm{model}' has no rows for {span_text(60 * minutes)} between" in note, note


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(model=st.integers(0, 3), first=st.integers(10, MINUTES - 120), minutes=st.integers(5, 110),
       shuffled=st.booleans(), seed=st.integers(0, 2**16))
def test_the_line_named_after_a_models_silence_holds_its_row_in_any_file_order(tmp_path: Path, model: int,
                                                                               first: int, minutes: int,
                                                                               shuffled: bool, seed: int) -> None:
    """The line the warning names, to open the file at, is the model's row that ends its silence, rows in time
    order or in any other (a model's rows after another's): the lines are kept as an array beside the rows put
    in order, not a list of them, and the row named is found again in the trace."""
    rng = random.Random(seed)
    rows = [f"{EPOCH + 60 * i},m{m},{rng.randint(75, 150)}\n" for i in range(MINUTES) for m in range(4)
            if not (m == model and first <= i < first + minutes)]
    if shuffled:
        rng.shuffle(rows)
    path = write_trace(tmp_path, "".join(rows))
    [note] = [note for note in read_csv(path).notes if "has no rows for" in note]
    line = int(note.split("(line ")[1].split(")")[0])
    assert path.read_text().splitlines()[line - 1].startswith(f"{EPOCH + 60 * (first + minutes)},m{model},"), note


DAY_MINUTES = 2 * 24 * 60


def sparse_model(kind: str, a: int, b: int, rng: random.Random) -> dict[int, int]:
    """The requests of a model sparse by nature, by minute of two days: a timer every `a` minutes (a few
    requests, or a batch of hundreds in one row), a night job busy `a` minutes from `b` each day, a model that
    goes quiet for good or appears at minute `b`, one that fades out to nothing for `b` minutes and back, or
    one busy `a` minutes of every `a + b` (a batch on a schedule)."""
    if kind == "timer":
        return {m: rng.randint(1, 3) for m in range(b % a, DAY_MINUTES, a)}
    if kind == "timer-batch":
        return {m: rng.randint(300, 600) for m in range(b % a, DAY_MINUTES, a)}
    if kind == "night-job":
        return {d * 1440 + m: rng.randint(500, 900) for d in range(2) for m in range(b, b + a)}
    if kind == "quiet-for-good":
        return {m: rng.randint(100, 200) for m in range(b)}
    if kind == "appears-midway":
        return {m: rng.randint(100, 200) for m in range(b, DAY_MINUTES)}
    if kind == "fades":  # down by 10 requests a minute every `a` minutes, `b` minutes of nothing, back
        middle = DAY_MINUTES // 2
        count = {m: max(0, abs(m - middle) - b // 2) * 10 // a for m in range(DAY_MINUTES)}
        return {m: c for m, c in count.items() if c}
    return {m: rng.randint(100, 200) for m in range(DAY_MINUTES) if m % (a + b) < a}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["timer", "timer-batch", "night-job", "quiet-for-good", "appears-midway", "fades",
                             "schedule"]),
       a=st.integers(5, 180), b=st.integers(10, 1200), seed=st.integers(0, 2**16))
def test_a_model_sparse_by_nature_among_busy_ones_is_never_named(tmp_path: Path, kind: str, a: int, b: int,
                                                                 seed: int) -> None:
    """Timers, night jobs, a model that goes quiet for good or appears midway, traffic that fades out and back,
    a batch on a schedule: their silences are their shape, not a target down, though two busy models report
    through them."""
    rng = random.Random(seed)
    sparse = sparse_model(kind, a, b, rng)
    rows = "".join(f"{EPOCH + 60 * minute},{model},{count}\n" for minute in range(DAY_MINUTES)
                   for model, count in (("busy-a", rng.randint(300, 500)), ("busy-b", rng.randint(50, 90)),
                                        ("sparse", sparse.get(minute, 0))) if count)
    trace = read_csv(write_trace(tmp_path, rows))
    assert not [note for note in trace.notes if "has no rows for" in note], trace.notes


def grafana(lost: set[tuple[int, int]], cell: str, intervals: int = 480, models: int = 4) -> str:
    """A Grafana export at 15 s of `models` busy models, `cell` (NaN, empty) for requests at each (interval,
    model) in `lost`."""
    rng = random.Random(3)
    return "".join(f"{EPOCH + 15 * i},m{m},{cell if (i, m) in lost else format(rng.uniform(200, 400), '.3f')}\n"
                   for i in range(intervals) for m in range(models))


@pytest.mark.parametrize("cell", ["NaN", ""])
def test_lost_scrapes_written_as_nan_are_said_once(tmp_path: Path, cell: str) -> None:
    """A Grafana export writing three lost scrapes of every model as NaN or empty: the NaN warning named them,
    and the warning for intervals without any row named the same intervals again. Said once now."""
    trace = write_trace(tmp_path, grafana({(i, m) for i in (100, 101, 250) for m in range(4)}, cell))
    result = simulate(tmp_path, trace, "--policies", "mean-hpa")
    assert result.returncode == 0, result.stderr
    assert "12 of 1,920 rows have requests empty, NaN or null (lines 402, 403, 404, 405, 406, ...)" in result.stderr
    assert "no rows at all" not in result.stderr, result.stderr


def test_one_models_lost_scrapes_written_as_nan_are_not_named_again_as_its_silence(tmp_path: Path) -> None:
    """m0's scrapes lost for 40 minutes, written as NaN, the others reporting: the NaN warning names them; the
    warning for a model's silence does not repeat them."""
    trace = read_csv(write_trace(tmp_path, grafana({(i, 0) for i in range(200, 360)}, "NaN")))
    assert [note for note in trace.notes if "160 of 1,920 rows have requests empty, NaN or null" in note], trace.notes
    assert not [note for note in trace.notes if "has no rows for" in note], trace.notes


def down_with_an_outage(model: int, first: int, minutes: int, outage_first: int, outage: int, seed: int) -> str:
    """Six hours at 60 s of four busy models (75 to 150 requests a minute each), model m<model> without rows for
    `minutes` from `first`, every model without rows for `outage` minutes from `outage_first`."""
    rng = random.Random(seed)
    return "".join(f"{EPOCH + 60 * i},m{m},{rng.randint(75, 150)}\n" for i in range(MINUTES) for m in range(4)
                   if not (m == model and first <= i < first + minutes)
                   and not outage_first <= i < outage_first + outage)


def test_a_models_silence_with_a_collector_outage_inside_is_named_whole(tmp_path: Path) -> None:
    """m0's target down 40 minutes, the collector down 10 minutes inside them (no model's rows): only the 10
    minutes were named ("no rows at all for 10 min"), as the other models had rows in 75% of m0's silence, under
    the 90% a model's silence is named for. Both are named now: m0's 40 minutes, saying that 10 of them are the
    trace's own silence, and the trace's 10 minutes."""
    trace = read_csv(write_trace(tmp_path, down_with_an_outage(0, 150, 40, 165, 10, seed=5)))
    [model] = [note for note in trace.notes if "has no rows for" in note]
    assert ("model 'm0' has no rows for 40 min between its rows at 1764556140 (2025-12-01T02:29:00Z) and at "
            "1764558600 (2025-12-01T03:10:00Z) (line ") in model, model
    assert "10 min of them without any model's rows" in model, model
    [whole] = [note for note in trace.notes if "no rows at all" in note]
    assert "no rows at all for 10 min between the rows at 1764557040 (2025-12-01T02:44:00Z)" in whole, whole


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(model=st.integers(0, 3), first=st.integers(10, MINUTES - 120), minutes=st.integers(10, 110),
       outage=st.integers(1, 105), where=st.floats(0.0, 1.0), seed=st.integers(0, 2**16))
def test_a_busy_models_silence_is_named_whole_whatever_trace_wide_silence_is_inside(
        tmp_path: Path, model: int, first: int, minutes: int, outage: int, where: float, seed: int) -> None:
    """Wherever inside a busy model's silence a stretch without any model's rows falls, however long, while the
    other models report for the HPA's 5-minute scale-down window or more of it: the model's silence is named
    at its whole length."""
    outage = min(outage, minutes - 5)
    outage_first = first + round(where * (minutes - outage))
    trace = read_csv(write_trace(tmp_path, down_with_an_outage(model, first, minutes, outage_first, outage, seed)))
    [note] = [note for note in trace.notes if "has no rows for" in note]
    assert f"model 'm{model}' has no rows for {span_text(60 * minutes)} between" in note, note
