"""Where the user docs send a reader to the adapter's debug document, they name the path it is served at: the
README said "`/debug` shows the warning", and `GET /debug` is a 404; the document is
`/debug/runtimes/NS/DEPLOYMENT` (its `warnings`). docs/performance.md is left out: its "/debug records" are what
a refresh builds, measured, not a path to ask for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autoscaler.api.runtimes import DEBUG_ROUTE

REPO = Path(__file__).resolve().parent.parent
DOCS = [*sorted(doc for doc in (REPO / "docs").glob("*.md") if doc.name != "performance.md"),
        REPO / "README.md", REPO / "manifests" / "README.md"]
DOCUMENTED = "/debug/runtimes"
BARE = re.compile(r"(?<![\w/.-])/debug(?!/runtimes\b|/\*)(?![\w-])")
"""`/debug` not followed by `/runtimes` (nor `/*`, a prefix of --authorization-always-allow-paths), and not within
another path (`runtimes/debug`, the RBAC subresource)."""


def test_the_name_the_docs_use_is_the_served_route() -> None:
    assert DEBUG_ROUTE.startswith(f"{DOCUMENTED}/"), DEBUG_ROUTE


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: str(doc.relative_to(REPO)))
def test_every_debug_path_the_docs_give_is_one_the_adapter_serves(doc: Path) -> None:
    text = doc.read_text()
    bare = [f"line {text.count(chr(10), 0, found.start()) + 1}: ...{text[max(0, found.start() - 40):found.end() + 30]}"
            for found in BARE.finditer(text)]
    assert not bare, (f"{doc.relative_to(REPO)} says /debug, which the adapter answers 404; write "
                      f"{DEBUG_ROUTE.replace('{namespace}', 'NS').replace('{deployment}', 'DEPLOYMENT')}: {bare}")
