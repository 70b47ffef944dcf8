"""docs/operations.md's /debug/runtimes section lists every `reason` a source problem can have: a user filters
/debug on them, and the list lacked `not_scraped` (a pod still queued behind --scrape-concurrency at the
refresh's deadline) and `too_large` (an exporter's answer past the size read). The reasons are the `REASON_*`
constants of the sources' modules, so a reason added in code and not in the docs fails here."""

from __future__ import annotations

import importlib
import pkgutil
import re

import autoscaler.sources
from tests.test_docs_repo_paths import REPO

LIST_START = "`source` says what the metric\nsource fails to read right now"
LIST_END = "`detail` (the backend's words"


def reasons_in_code() -> set[str]:
    modules = ["autoscaler.source_problems",
               *(f"autoscaler.sources.{module.name}" for module in pkgutil.iter_modules(autoscaler.sources.__path__))]
    return {value for name in modules for constant, value in vars(importlib.import_module(name)).items()
            if constant.startswith("REASON_") and isinstance(value, str)}


def reasons_in_the_docs() -> set[str]:
    text = (REPO / "docs" / "operations.md").read_text()
    start = text.index(LIST_START)
    return set(re.findall(r"`([a-z_]+)`", text[start:text.index(LIST_END, start)]))


def test_every_problem_reason_the_sources_give_is_in_the_debug_docs() -> None:
    missing = sorted(reasons_in_code() - reasons_in_the_docs())
    assert not missing, f"docs/operations.md's /debug/runtimes `reason` list lacks {missing}"


def test_the_reasons_are_read_from_the_code() -> None:
    assert {"connect", "discovery", "unseen", "address_reused", "other_pod"} <= reasons_in_code()
