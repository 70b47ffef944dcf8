"""The demo's per-pod table as a new user reads it: each value under its own heading.

A pod whose exporter had not answered yet printed `-` four places left of the exporter column, and its
deletion cost and unique copies slid under the wrong headings:

      pod      true req/s   exporter req/s   deletion cost   models only it served
      demo-0          360      348.0            700        6
      demo-6            0      -              -        -  (starting)
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.demo.report_lines import POD_TABLE_HEADER, average_hpa_line, pod_table_row
from autoscaler.demo.scenario import DEMO_BEHAVIOR, DESIRED
from autoscaler.simulation.hpa_spec import HpaPod, HpaSpec


def right_ends(line: str) -> list[int]:
    """The index just past each run of non-blank characters that is followed by 2 or more blanks or the end."""
    ends, i = [], 0
    while i < len(line):
        if line[i] != " " and (i + 1 == len(line) or line[i + 1 : i + 3] == "  "):
            ends.append(i + 1)
        i += 1
    return ends


HEADING_ENDS = [POD_TABLE_HEADER.index(h) + len(h) for h in
                ("true req/s", "exporter req/s", "deletion cost", "models only it served")]


@pytest.mark.parametrize(("exporter", "cost", "unique"), [
    (348.04, 700, 6),
    (None, None, None),  # a pod that has just started: nothing known yet
    (40.2, 0, None),  # ranked, but no per-model use reported yet
    (1234.5, 900, 12),
])
def test_every_value_ends_under_the_end_of_its_heading(exporter: float | None, cost: int | None,
                                                       unique: int | None) -> None:
    row = pod_table_row("demo-6", 360.0, exporter, cost, unique, ready=True)
    assert right_ends(row)[1:] == HEADING_ENDS, f"\n{POD_TABLE_HEADER}\n{row}"


def test_a_starting_pod_says_so_after_its_name_within_the_tables_width() -> None:
    """Said after the last column, `  (starting)` ran the row to 92 columns where the table is 80, and an 80-column
    terminal put it on a line of its own (test_demo_line_width.py)."""
    row = pod_table_row("demo-6", 0.0, None, None, None, ready=False)
    assert right_ends(row)[1:] == HEADING_ENDS, f"\n{POD_TABLE_HEADER}\n{row}"
    assert row.startswith("  demo-6 (starting) ")


def hpa_line(rates: dict[str, float], bounds: tuple[int, int] = (2, 8), starting: int = 0) -> str:
    """The demo's line for pods demo-0.. with these rates, then `starting` pods not Ready yet (no rate)."""
    names = [*rates, *(f"demo-{len(rates) + i}" for i in range(starting))]
    pods = [HpaPod(name, name in rates or i < len(names) - starting) for i, name in enumerate(names)]
    spec = HpaSpec((DESIRED,), min_replicas=bounds[0], max_replicas=bounds[1], behavior=DEMO_BEHAVIOR)
    line = average_hpa_line(pods, {name: rate for name, rate in rates.items() if rate >= 0}, spec)
    assert line is not None
    return line


def wanted(line: str) -> int:
    return int(re.search(r"would (?:want|keep) (\d+) pod", line).group(1))  # type: ignore[union-attr]


def pods_at(*rates: float) -> dict[str, float]:
    """demo-0, demo-1, ... at these rates; a negative one: a Ready pod whose exporter has no rate yet."""
    return {f"demo-{i}": rate for i, rate in enumerate(rates)}


@pytest.mark.parametrize(("rates", "bounds", "wants"), [
    # 4 pods at 90 req/s, target 100: 360 / 100 = 3.6, so 4
    (pods_at(90.0, 90.0, 90.0, 90.0), (2, 8), 4),
    # the traffic drop: 2 pods at 35 req/s is 0.7 of a pod, but the HPA never goes below minReplicas 2
    (pods_at(35.0, 35.0), (2, 8), 2),
    # a hot model: 8 pods with 345 + 7 x 45 = 660 req/s: 6.6, so 7
    (pods_at(345.0, *[45.0] * 7), (2, 8), 7),
    # more than maxReplicas allows: 1,000 req/s wants 10, held at 8
    (pods_at(500.0, 500.0), (2, 8), 8),
])
def test_the_average_hpa_is_held_to_the_same_bounds_as_the_demo_hpa(rates: dict[str, float],
                                                                   bounds: tuple[int, int], wants: int) -> None:
    """It said "an HPA on the average would want 1 pod" next to the adapter's 2, with minReplicas 2."""
    assert wanted(hpa_line(rates, bounds)) == wants


def test_right_after_a_scale_up_pods_without_a_rate_count_as_the_hpa_counts_them() -> None:
    """`replicas 8 (7 ready)`, five exporters with a rate, then "would want 7 pods (mean 136 req/s per pod,
    target 100)": the mean was over the five, the 7 from their sum. The HPA counts the two Ready pods without a
    rate and the starting one as 0 on a scale-up (85 req/s over 8), which turns it into a scale-down: it keeps 8."""
    line = hpa_line(pods_at(379.1, 81.3, 81.4, 80.9, 56.2, -1, -1), starting=1)
    assert line == ("  an HPA on the average would keep 8 pods (mean 136 req/s per pod over the 5 with a rate, but "
                    "85 req/s per pod over 8 pods, demo-5, demo-6 (no rate yet) and demo-7 (starting) counted as 0: "
                    "no scale-up then, so the HPA keeps the replicas; target 100, replicas 2..8)")


def test_a_pod_starting_on_a_scale_down_is_left_out_and_named() -> None:
    line = hpa_line(pods_at(*[45.0] * 7), starting=1)
    assert "would want 4 pods (mean 45 req/s per pod over 7 pods, demo-7 (starting) left out;" in line, line


RATE = st.one_of(st.just(-1.0), st.floats(0.0, 600.0))


@settings(max_examples=300, deadline=None)
@given(st.lists(RATE, min_size=1, max_size=8).filter(lambda r: any(x >= 0 for x in r)), st.integers(0, 4))
def test_the_mean_printed_never_contradicts_the_pods_wanted(rates: list[float], starting: int) -> None:
    """The line's mean above the target goes with at least the current replicas, below it with at most them,
    whatever the pods without a rate: the line the reviewer saw said 136 req/s per pod and fewer pods."""
    line = hpa_line(pods_at(*rates), (1, 20), starting)
    current = len(rates) + starting
    means = [int(m) for m in re.findall(r"(?:mean|but) (\d+) req/s per pod", line)]
    mean, wants = means[-1], wanted(line)  # the mean the HPA decides on: the last one said
    if mean > 100:
        assert wants >= current, line
    if mean < 100:
        assert wants <= current, line
    if "keep" in line:
        assert wants == current, line
