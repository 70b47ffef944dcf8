"""The all-clear after many watches failed together, as the log reads: one line however the watches come back
(a loaded adapter brings some back seconds after the others), and said even while one never comes back."""

from __future__ import annotations

import asyncio
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.kube.watch_news import ScopeLine, WatchNews
from autoscaler.log_lists import NAMED
from tests.support.waiting import eventually

LOGGER = "tests.kube.watch_news"
FAILING = ScopeLine(LOGGER, logging.WARNING, "watch of {scope} failing: {detail}",
                    "watches of {count} namespaces failing: {scopes} (e.g. {scope}: {detail})")
WORKS_AGAIN = ScopeLine(LOGGER, logging.INFO, "watch of {scope} works again",
                        "watches of {count} namespaces work again: {scopes}", ends=(FAILING,))
QUIET_S = 0.05
NAMESPACES = [f"tenant{number}" for number in range(NAMED + 5)]


class Lines(logging.Handler):
    """What the log said under `LOGGER`, in order (caplog is per test, not per hypothesis example)."""

    def __init__(self) -> None:
        super().__init__()
        self.said: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.said.append(record.getMessage())

    def __enter__(self) -> Lines:
        logger = logging.getLogger(LOGGER)
        logger.addHandler(self)
        logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *_: object) -> None:
        logging.getLogger(LOGGER).removeHandler(self)

    def saying(self, words: str) -> list[str]:
        return [line for line in self.said if words in line]


@settings(max_examples=10, deadline=None)
@given(groups=st.lists(st.tuples(st.integers(1, 8), st.integers(0, 4)), min_size=1, max_size=4))
def test_watches_coming_back_in_any_groups_say_one_all_clear(groups: list[tuple[int, int]]) -> None:
    """`groups`: how many namespaces come back, then how many quiet periods pass before the next group."""

    async def restart() -> list[str]:
        news = WatchNews(quiet_s=QUIET_S, held_s=600)
        with Lines() as lines:
            for namespace in NAMESPACES:
                news.say(FAILING, namespace, "503")
            waiting = list(NAMESPACES)
            for size, quiet_periods in groups:
                for namespace in waiting[:size]:
                    news.say(WORKS_AGAIN, namespace)
                waiting = waiting[size:]
                await asyncio.sleep(quiet_periods * QUIET_S)
            for namespace in waiting:
                news.say(WORKS_AGAIN, namespace)
            await eventually(lambda: bool(lines.saying("work again")))
            await asyncio.sleep(3 * QUIET_S)  # anything more it would say, said
            news.flush()
            return lines.said

    said = asyncio.run(restart())
    all_clear = [line for line in said if "work again" in line]
    assert len(all_clear) == 1, said
    assert all_clear[0].startswith(f"watches of {len(NAMESPACES)} namespaces work again: tenant")
    assert sum("failing" in line for line in said) == 1, said


async def test_a_watch_that_stays_broken_holds_the_others_all_clear_only_so_long() -> None:
    news = WatchNews(quiet_s=QUIET_S, held_s=20 * QUIET_S)
    with Lines() as lines:
        for namespace in NAMESPACES:
            news.say(FAILING, namespace, "503")
        for namespace in NAMESPACES[1:]:
            news.say(WORKS_AGAIN, namespace)
        await eventually(lambda: bool(lines.saying("work again")))
        news.flush()
    all_clear = lines.saying("work again")
    assert len(all_clear) == 1, lines.said
    assert all_clear[0].startswith(f"watches of {len(NAMESPACES) - 1} namespaces work again: tenant1, "), all_clear


@pytest.mark.parametrize("late", [0, 3])
async def test_a_new_failure_is_said_while_an_all_clear_waits(late: int) -> None:
    """Holding an all-clear never holds a warning back: a watch that breaks meanwhile is said after a quiet
    period as ever."""
    other = ScopeLine(LOGGER, logging.WARNING, "list of {scope} failing: {detail}",
                      "lists of {count} namespaces failing: {scopes}")
    news = WatchNews(quiet_s=QUIET_S, held_s=600)
    with Lines() as lines:
        for namespace in NAMESPACES:
            news.say(FAILING, namespace, "503")
        news.say(WORKS_AGAIN, NAMESPACES[0])
        await asyncio.sleep(late * QUIET_S)
        news.say(other, "tenant-x", "403")
        await eventually(lambda: bool(lines.saying("list of namespace tenant-x failing")))
        assert not lines.saying("work")
        news.flush()
