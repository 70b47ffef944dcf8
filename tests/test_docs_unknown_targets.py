"""What an on-call sees first when the HPA cannot read the adapter's metric is `kubectl get hpa`'s TARGETS column
reading `<unknown>/1 (avg)` (kube-apiserver's table prints `<unknown>` for a metric without a current value). The
docs never said it: the table of what each answer means sits under "FailedGetExternalMetric on the HPA", which an
on-call had to know to look for. The Troubleshooting entry point and README's symptom table now start from it and
send the reader to that table."""

from __future__ import annotations

import re

from tests.test_docs_repo_paths import REPO

OPERATIONS = (REPO / "docs" / "operations.md").read_text()
README = (REPO / "README.md").read_text()
TABLE_ANCHOR = "#failedgetexternalmetric-on-the-hpa"


def flat(text: str) -> str:
    return " ".join(text.split())


def test_the_failed_get_external_metric_heading_is_where_the_anchor_points() -> None:
    assert "\n### FailedGetExternalMetric on the HPA\n" in OPERATIONS


def test_the_troubleshooting_entry_point_starts_from_unknown_targets_and_sends_to_the_table() -> None:
    start = OPERATIONS.index("\n## Troubleshooting\n")
    opening = flat(OPERATIONS[start:OPERATIONS.index("\n### ", start)])
    assert "`<unknown>/1 (avg)`" in opening and "kubectl get hpa" in opening, opening[:600]
    assert f"({TABLE_ANCHOR})" in opening, opening[:600]


def test_the_table_section_says_the_targets_read_unknown_meanwhile() -> None:
    start = OPERATIONS.index("\n### FailedGetExternalMetric on the HPA\n")
    section = flat(OPERATIONS[start:OPERATIONS.index("\n| answer |", start)])
    assert "`<unknown>/1 (avg)`" in section, section


def test_readmes_symptom_table_has_a_row_for_unknown_targets_that_points_at_the_table() -> None:
    rows = [row for row in README.splitlines() if row.startswith("|") and "<unknown>" in row]
    assert rows, "README's troubleshooting table has no row for TARGETS <unknown>"
    assert any(re.search(re.escape(f"docs/operations.md{TABLE_ANCHOR}"), row) for row in rows), rows
