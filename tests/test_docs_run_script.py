"""`./run help` is the first thing a new user runs: what it says of `./run test` is what the script does and
what the README says."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}


def files_at_a_time(text: str) -> int:
    found = re.search(rf"\b({'|'.join(WORDS)}|\d+) (?:test )?files at a time", " ".join(text.split()))
    assert found, text
    return WORDS.get(found.group(1)) or int(found.group(1))


def script_default() -> int:
    found = re.search(r"-n \"\$\{TEST_PROCESSES:-(\d+)\}\"", (REPO / "run").read_text())
    assert found, "./run no longer sets TEST_PROCESSES's default: update this test"
    return int(found.group(1))


def test_the_readme_says_how_many_test_files_run_at_once() -> None:
    assert files_at_a_time((REPO / "README.md").read_text()) == script_default()


def test_run_help_says_how_many_test_files_run_at_once() -> None:
    shown = subprocess.run([str(REPO / "run"), "help"], capture_output=True, text=True, timeout=30, check=True)
    assert files_at_a_time(shown.stdout) == script_default()
