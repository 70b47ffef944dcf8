"""An export whose step changes partway (Prometheus answers 11,000 points a query, so a day comes in pieces,
sometimes at other steps): the rows at the coarser step were warned about, then each replayed within one interval
of the finest step, bursts the reading made: a 15 s export with an hour at 60 s of even load (1,200 requests a
minute) delayed 3.3% of mean-hpa's requests in 6.83 pod-hours, where the same load at one step delays none in 4.0.
Each coarse row is now replayed over its own step."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.simulation.trace import read_csv
from tests.simulation.runs import report, simulate, write_trace

EPOCH = 1764547200


def export(pieces: list[tuple[int, int]], models: int, per_second: list[float]) -> str:
    """Rows of an export in `pieces` of (step in seconds, how long in seconds), one after another, each row holding
    the requests of its step: model m at `per_second[m]` requests a second throughout."""
    rows, at = [], 0
    for step, length in pieces:
        for t in range(at, at + length, step):
            rows += [f"{EPOCH + t},m{m},{per_second[m] * step!r}\n" for m in range(models)]
        at += length
    return "".join(rows)


def test_an_hour_at_60_s_in_a_15_s_export_replays_as_the_same_load_at_one_step(tmp_path: Path) -> None:
    even = [4.0] * 5  # 1,200 requests a minute in all
    changed, one_step = tmp_path / "changed", tmp_path / "one_step"
    changed.mkdir()
    one_step.mkdir()
    result = simulate(changed, write_trace(changed, export([(15, 3600), (60, 3600)], 5, even)))
    assert result.returncode == 0, result.stderr
    assert "each of those rows' requests are replayed spread over its own 60 s (4 intervals of 15 s)" in \
        result.stderr, result.stderr
    assert simulate(one_step, write_trace(one_step, export([(15, 7200)], 5, even))).returncode == 0
    got, want = report(changed), report(one_step)
    assert got["trace"]["hours"] == want["trace"]["hours"] == 2.0
    for name, policy in want["policies"].items():
        assert (got["policies"][name]["pod_hours"], got["policies"][name]["delayed_ratio"]) == \
            (policy["pod_hours"], policy["delayed_ratio"]), name  # mean-hpa read 6.83 and 3.3% where 4.0 and 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fine=st.sampled_from([1, 10, 15, 30]), every=st.integers(2, 8), models=st.integers(1, 3),
       order=st.sampled_from(["fine-first", "coarse-first", "fine-coarse-fine"]),
       load=st.lists(st.floats(0.5, 50.0), min_size=3, max_size=3))
def test_every_interval_of_a_changed_export_carries_the_requests_a_second_of_one_step(
        tmp_path: Path, fine: int, every: int, models: int, order: str, load: list[float]) -> None:
    """Whatever the steps, the load and where the coarse stretch is, the trace read replays in each interval the
    requests a second of the same traffic exported at the fine step throughout, and as many requests in all."""
    coarse = fine * every
    if coarse > 600:
        coarse, every = fine * (600 // fine), 600 // fine
    span = 30 * coarse  # 30 coarse rows: past the 20 a stretch is named from
    pieces = {"fine-first": [(fine, span), (coarse, span)], "coarse-first": [(coarse, span), (fine, span)],
              "fine-coarse-fine": [(fine, span), (coarse, span), (fine, span)]}[order]
    changed = read_csv(write_trace(tmp_path, export(pieces, models, load)))
    one_step = read_csv(write_trace(tmp_path, export([(fine, sum(length for _, length in pieces))], models, load)))
    assert changed.interval_s == one_step.interval_s == fine
    assert changed.intervals == one_step.intervals
    assert changed.total_requests == pytest.approx(one_step.total_requests)
    np.testing.assert_allclose(changed.rate_per_interval(), one_step.rate_per_interval())
