"""Where the docs promise that an API request never waits on a refresh, they say that `--workers 0` breaks it.

design.md said without condition that handlers only read the loop's cache and a slow backend never makes the
API slow; with `--workers 0` the API runs in the refresh process, and at 3,000 targets requests waited up to
about a second at every refresh (p99 32-80 ms, against 2-6 ms with one worker)."""

from __future__ import annotations

from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.mark.parametrize("page", ["design.md", "configuration.md"])
def test_the_promise_that_requests_never_wait_names_workers_0(page: str) -> None:
    text = " ".join((DOCS / page).read_text().split())
    assert "--workers 0" in text or "`0` runs refresh and serving in one process" in text
    assert "a request waits while the refresh" in text or "a request then waits while a refresh" in text, page
