"""The bars `ListWatch` judges a watch by (`SHORT_WATCH_S` open: it worked; `STAYED_OPEN_S`: it stayed open) set by
a test for a stretch of it, so that what a watch was in the story (broken as soon as it opened, cut after it worked
yet before it stayed open) does not hang on how long a loaded machine stretched a sleep of the test.

A loaded CI machine stalls the test and the adapter alike: a watch the test cut 0.05 s after it opened was open a
second on the adapter's clock, and worked; one cut 1.3 s after the fake had it open, read 0.4 s late by the client,
had not. Each bar is read as a watch opens (its timers) and as it ends (how long it was open), so one set while a
watch is open judges that watch's end too: a test changes the bars only between watches (after a cut, before the
reopen reaches the fake; or once the next watch is open, for the end of the one before it)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from autoscaler.kube import watch_ends

NEVER_S = 3600.0
"""Longer than any test: a watch opened under this bar works (or stays open) only by an event it carries."""


@contextmanager
def watches_judged(monkeypatch: pytest.MonkeyPatch, *, works_after_s: float, stays_open_after_s: float
                   ) -> Iterator[None]:
    """While inside, a watch works once open `works_after_s` (0: as soon as it opens) and stays open once open
    `stays_open_after_s` (`NEVER_S`: none does); the shipped bars again after."""
    with monkeypatch.context() as patch:
        patch.setattr(watch_ends, "SHORT_WATCH_S", works_after_s)
        patch.setattr(watch_ends, "STAYED_OPEN_S", stays_open_after_s)
        yield
