"""`bench/simulate_report_hashes.py` promises one hash for one set of simulated results: a speed-up is shown
unchanged by the same hashes before and after. Its runs write under a random temporary folder, and the advice in
report.json names that folder in every command (`--out`, the policy file `printf` writes): the case mixed500s0
printed c1933456b7a4a7a5 then 5f083e011350ff66 for the same run, so no two runs could ever agree."""

from __future__ import annotations

import json
from pathlib import Path

from bench.simulate_report_hashes import report_hash

SMALL_WITH_ADVICE = "--models 100 --hours 1 --shape mixed --seed 0"
"""A run of about a second whose report gives advice (two compare commands), as mixed500s0's does."""


def test_the_same_run_in_two_folders_hashes_the_same(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second-folder"
    first.mkdir()
    second.mkdir()

    first_hash = report_hash(SMALL_WITH_ADVICE, first, "case")
    second_hash = report_hash(SMALL_WITH_ADVICE, second, "case")

    report = json.loads((first / "case" / "report.json").read_text())
    assert str(first.resolve()) in json.dumps(report), "the run gave no advice naming its folder: pick another"
    assert first_hash == second_hash


def test_a_different_run_hashes_differently(tmp_path: Path) -> None:
    assert report_hash(SMALL_WITH_ADVICE, tmp_path, "case") != report_hash(
        SMALL_WITH_ADVICE.replace("--seed 0", "--seed 1"), tmp_path, "case")
