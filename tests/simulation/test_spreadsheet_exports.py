"""Traces as spreadsheets and float-minded exports write them: `,,` rows under the trace, numbers written for a
locale ('2,743', '192,5'), and timestamps whose last digits are a float's noise (60 s rows ±2 µs)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.simulation.trace import TraceError, read_csv
from tests.simulation.runs import FAILED, report, simulate, write_trace

EPOCH = 1764547200


def test_rows_of_nothing_but_commas_under_the_trace_are_skipped_as_blank_lines(tmp_path: Path) -> None:
    """A spreadsheet saves the empty rows under a table as ",,": refused as "timestamp_s must be seconds ... got
    ''" on the first of them."""
    rows = "".join(f"{EPOCH + 60 * k},a,10\n" for k in range(60)) + ",,\n" * 5 + " , ,\n"
    result = simulate(write_trace(tmp_path, rows).parent, tmp_path / "trace.csv", "--policies", "fixed")
    assert result.returncode == 0, result.stderr
    assert report(tmp_path)["trace"]["requests"] == 600


@pytest.mark.parametrize(("written", "field", "said"), [
    ("2,743", "requests", "the comma is likely a thousands separator (2743), or a decimal comma (2.743)"),
    ("192,5", "requests", "the comma is likely a decimal comma (192.5)"),
    ("1,764,547,200", "timestamp_s", "the comma is likely a thousands separator (1764547200), as a spreadsheet"),
])
def test_a_number_written_with_a_locales_comma_is_refused_naming_the_comma(tmp_path: Path, written: str, field: str,
                                                                           said: str) -> None:
    """'2,743' and '192,5' read "requests must be a number, got '2,743'", which named no cause."""
    row = f'{EPOCH},a,"{written}"\n' if field == "requests" else f'"{written}",a,5\n'
    trace = write_trace(tmp_path, row + f"{EPOCH + 60},a,5\n")
    result = simulate(tmp_path, trace)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"{FAILED}{trace}: line 2: {field} must be ")
    assert said in result.stderr and "without thousands separators and with '.' for decimals" in result.stderr, \
        result.stderr


def test_timestamps_with_a_floats_noise_read_at_their_step(tmp_path: Path) -> None:
    """A 60 s export through floats: each scrape's rows 1.6 µs apart (.1229990 beside .1230006), refused as
    "2.38419e-07 s apart; intervals must be 1 s to 10 min: sum the rows into 1 s intervals"."""
    rng = random.Random(4)
    rows = "".join(f"{EPOCH + 60 * k + 0.123 + rng.uniform(-2e-6, 2e-6):.7f},m{m},{10 + m}\n"
                   for k in range(60) for m in range(5))
    result = simulate(tmp_path, write_trace(tmp_path, rows), "--policies", "fixed")
    assert result.returncode == 0, result.stderr
    got = report(tmp_path)
    assert (got["trace"]["interval_s"], got["trace"]["hours"], got["trace"]["requests"]) == (60, 1.0, 60 * 60)
    assert any("rounded to the millisecond" in warning for warning in got["warnings"]), got["warnings"]


def test_sub_second_rows_of_a_request_log_are_still_told_to_sum_into_1_s(tmp_path: Path) -> None:
    """Rows truly under a second apart (a log's own times) are no noise: rounded to the millisecond they would
    still be, and the refusal stays the one that says how to sum them."""
    rows = "".join(f"{EPOCH + k * 0.25:.3f},a,1\n" for k in range(40))
    with pytest.raises(TraceError, match=r"0\.25 s apart; intervals must be 1 s to 10 min: sum the rows into 1 s"):
        read_csv(write_trace(tmp_path, rows))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(step=st.sampled_from([1, 15, 60, 600]), noise=st.floats(1e-7, 4e-4), models=st.integers(1, 4),
       blanks=st.integers(0, 3), digits=st.sampled_from([6, 7, 9]), seed=st.integers(0, 2**16))
def test_any_float_noise_under_half_a_millisecond_reads_as_the_export_without_it(
        tmp_path: Path, step: int, noise: float, models: int, blanks: int, digits: int, seed: int) -> None:
    """Whatever the step, the models, the noise (under half a millisecond) and how many digits the export writes,
    and with ",," rows under it or not, a trace on whole milliseconds reads as it does without the noise."""
    rng = random.Random(seed)
    start = EPOCH + rng.randint(0, 999) / 1000
    times = [start + step * k for k in range(30)]
    exact = "".join(f"{t:.3f},m{m},{k + m}\n" for k, t in enumerate(times) for m in range(models))
    noisy = "".join(f"{t + rng.uniform(-noise, noise):.{digits}f},m{m},{k + m}\n" for k, t in enumerate(times)
                    for m in range(models)) + ",,\n" * blanks
    want = read_csv(write_trace(tmp_path, exact))
    got = read_csv(write_trace(tmp_path, noisy))
    assert got.start_s == pytest.approx(want.start_s, abs=1e-6)
    assert (got.interval_s, got.intervals, got.models) == (want.interval_s, want.intervals, want.models)
    assert got.slot.tolist() == want.slot.tolist() and got.requests.tolist() == want.requests.tolist()
