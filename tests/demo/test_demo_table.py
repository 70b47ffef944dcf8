"""The demo's per-pod table as a new user reads it: each value under its own heading.

A pod whose exporter had not answered yet printed `-` four places left of the exporter column, and its
deletion cost and unique copies slid under the wrong headings:

      pod      true req/s   exporter req/s   deletion cost   models only it served
      demo-0          360      348.0            700        6
      demo-6            0      -              -        -  (starting)
"""

from __future__ import annotations

import pytest

from autoscaler.demo.run import POD_TABLE_HEADER, average_hpa_wants, pod_table_row


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


def test_a_starting_pod_says_so_after_the_last_column() -> None:
    row = pod_table_row("demo-6", 0.0, None, None, None, ready=False)
    assert right_ends(row)[1:5] == HEADING_ENDS, f"\n{POD_TABLE_HEADER}\n{row}"
    assert row.endswith("(starting)")


@pytest.mark.parametrize(("rates", "bounds", "wants"), [
    # 4 pods at 90 req/s, target 100: 360 / 100 = 3.6, so 4
    ([90.0, 90.0, 90.0, 90.0], (2, 8), 4),
    # the traffic drop: 2 pods at 35 req/s is 0.7 of a pod, but the HPA never goes below minReplicas 2
    ([35.0, 35.0], (2, 8), 2),
    # a hot model: 8 pods with 345 + 7 x 45 = 660 req/s: 6.6, so 7
    ([345.0, *[45.0] * 7], (2, 8), 7),
    # more than maxReplicas allows: 1,000 req/s wants 10, held at 8
    ([500.0, 500.0], (2, 8), 8),
])
def test_the_average_hpa_is_held_to_the_same_bounds_as_the_demo_hpa(rates: list[float], bounds: tuple[int, int],
                                                                   wants: int) -> None:
    """It said "an HPA on the average would want 1 pod" next to the adapter's 2, with minReplicas 2."""
    assert average_hpa_wants(rates, 100.0, *bounds) == wants
