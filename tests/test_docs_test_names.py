"""Every test the user docs cite by name (`test_...`, alone or as `tests/x.py::test_...`) is a test in tests/:
docs/simulation.md cited `test_the_recommendation_leaves_room_for_every_copy_in_use` after the test was renamed
`..._for_two_copies_of_each_model_in_use`, so a reader looked for a promise no test made. File paths are checked
by `test_docs_repo_paths`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.test_docs_repo_paths import DOCS, REPO

CITED = re.compile(r"`(?:tests/[A-Za-z0-9_./-]+\.py::)?(test_[a-z0-9_]+)`")
DEFINED = re.compile(r"^\s*(?:async\s+)?def\s+(test_[a-z0-9_]+)\s*\(", re.MULTILINE)


def cited_tests(text: str) -> list[str]:
    """The test names a doc gives in backticks; a test file's name (`test_x.py`) is a path, not a test."""
    return [found.group(1) for found in CITED.finditer(text)]


def defined_tests() -> set[str]:
    return {name for path in (REPO / "tests").rglob("test_*.py") for name in DEFINED.findall(path.read_text())}


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: str(doc.relative_to(REPO)))
def test_every_test_the_docs_cite_is_in_the_tests(doc: Path) -> None:
    missing = sorted(set(cited_tests(doc.read_text())) - defined_tests())
    assert not missing, (f"{doc.relative_to(REPO)} cites tests that no file under tests/ defines (renamed? cite "
                         f"the new name): {missing}")


def test_the_cited_names_are_found() -> None:
    """The check reads what a doc cites (a pattern that matched nothing would pass every doc)."""
    assert cited_tests("`test_a_b` in `tests/x/test_y.py`, and `tests/api/test_z.py::test_c_d`; `test_e.py`.") == [
        "test_a_b", "test_c_d"]
    assert "test_every_test_the_docs_cite_is_in_the_tests" in defined_tests()
