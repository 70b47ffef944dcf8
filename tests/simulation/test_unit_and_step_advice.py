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
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from autoscaler.simulation.trace import TraceError, read_csv
from tests.simulation.runs import FAILED, report, simulate, write_trace

EPOCH = 1764547200  # 2025-12-01T00:00:00Z
MILLIS = "these look like milliseconds since the epoch; divide timestamp_s by 1000"
ROW_OF_0 = re.compile(r"add a row of 0 requests (?:for model '([^']+)' )?at (\d+(?:\.\d+)?)")
INTERVALS_PER_TIMESTAMP = 1000
"""The most intervals a trace may read as for each of its timestamps once a refusal's row of 0 is added."""


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


def follow(text: str, message: str) -> str | None:
    """The trace with the row of 0 the refusal names (for its model, or the first row's: "any model"), or None
    where it names none."""
    said = ROW_OF_0.search(message)
    if said is None:
        return None
    model = said.group(1) or text.split(",", 2)[1]
    return text + f"{said.group(2)},{model},0\n"


TIMESTAMPS = st.lists(st.tuples(st.integers(0, 400), st.sampled_from(["a", "b", "c"])), min_size=2, max_size=40,
                      unique=True)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(slots=TIMESTAMPS, step=st.sampled_from([1, 7, 60, 450, 1800, 86400]), jitter=st.sampled_from([0, 1, 3]),
       offsets=st.booleans(), millis=st.booleans(), seed=st.integers(0, 2**16))
def test_every_row_of_0_a_refusal_names_reads_the_trace_at_a_sane_length(
        tmp_path: Path, slots: list[tuple[int, str]], step: int, jitter: int, offsets: bool, millis: bool,
        seed: int) -> None:
    """Whatever trace is refused with a row of 0 to add, the trace with it added is read, at no more than
    `INTERVALS_PER_TIMESTAMP` intervals for each of its timestamps; and a trace in epoch milliseconds is told to
    divide by 1000, never a row of 0."""
    rng = random.Random(seed)
    shift = {model: rng.randint(0, step - 1) if offsets else 0 for model in "abc"}
    times = {(slot, model): EPOCH + step * slot + shift[model] + rng.randint(-jitter, jitter)
             for slot, model in slots}
    unit = 1000 if millis else 1
    text = "".join(f"{t * unit},{model},{1 + slot % 5}\n" for (slot, model), t in sorted(times.items()))
    path = tmp_path / "t.csv"
    path.write_text("timestamp_s,model,requests\n" + text)
    try:
        read_csv(path)
        return
    except TraceError as refused:
        message = str(refused)
    event("refused " + ("ms" if millis else "with a row of 0" if ROW_OF_0.search(message) else "otherwise"))
    if millis:
        assert MILLIS in message and "row of 0" not in message, message
        return
    fixed = follow(text, message)
    if fixed is None:
        return
    path.write_text("timestamp_s,model,requests\n" + fixed)
    trace = read_csv(path)  # the row of 0 said makes it readable
    distinct = len({line.split(",")[0] for line in fixed.splitlines()})
    assert trace.intervals <= INTERVALS_PER_TIMESTAMP * distinct, (message, trace.intervals, distinct)
