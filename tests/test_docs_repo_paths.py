"""Every repository path the user docs give in backticks names a file or folder that is there: the docs sent a
reader to `manifests/examples/exporter-tls-patch.yaml`, which lives in `manifests/examples/exporter-tls/`.
Links are checked by `test_docs` (`test_links_stay_inside_the_repository_and_resolve`); a path written as code
was not checked at all."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md", REPO / "manifests" / "README.md"]
TOP = ("manifests/", "docs/", "exporter/", "autoscaler/", "bench/", "tests/")
TOPS = "|".join(re.escape(top) for top in TOP)
PATH = re.compile(rf"`((?:{TOPS})[A-Za-z0-9_./-]*)`")


def repo_paths(text: str) -> list[str]:
    """Backticked words that start at a top folder of the repository: no globs, no placeholders (`<...>`). A
    path the doc itself says was removed (its history, "`bench/x.py`, removed now") is not a pointer."""
    return [found.group(1).rstrip(".") for found in PATH.finditer(text)
            if "removed" not in text[found.end():found.end() + 15]]


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: str(doc.relative_to(REPO)))
def test_every_backticked_repository_path_exists(doc: Path) -> None:
    missing = [path for path in repo_paths(doc.read_text()) if not (REPO / path).exists()]
    assert not missing, f"{doc.relative_to(REPO)} names paths that are not in the repository: {missing}"


def test_the_paths_are_found() -> None:
    """The check reads the paths a doc gives (a pattern that matched nothing would pass every doc)."""
    assert repo_paths("see `manifests/examples/exporter-tls/exporter-tls-patch.yaml` and `docs/x.md`. Once "
                      "`bench/old.py`, removed now, did it.") == [
        "manifests/examples/exporter-tls/exporter-tls-patch.yaml", "docs/x.md"]
