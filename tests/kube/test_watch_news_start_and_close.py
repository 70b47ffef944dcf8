"""The first all-clear of watches starting together, and the watches that stop, as the log reads: one
`established` line however the first lists come back, and a watch closed while failing holds no one's
all-clear afterwards."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.kube.watch_news import WatchNews
from autoscaler.log_lists import NAMED
from tests.kube.test_watch_news_all_clear import FAILING, NAMESPACES, QUIET_S, WORKS_AGAIN, Lines
from tests.support.waiting import eventually


@settings(max_examples=10, deadline=None)
@given(groups=st.lists(st.tuples(st.integers(1, 8), st.integers(0, 4), st.booleans()), min_size=1, max_size=4))
def test_watches_answering_their_first_list_in_any_groups_say_their_all_clear_once_all_answered(
    groups: list[tuple[int, int, bool]],
) -> None:
    """`groups`: how many namespaces answer, then how many quiet periods pass before the next group, and whether
    their first list failed (a pod watch then says nothing yet: it answered, with no all-clear). The last
    namespace answers last, and works."""

    async def start() -> tuple[list[str], list[str]]:
        news = WatchNews(quiet_s=QUIET_S, held_s=600)
        working = []
        with Lines() as lines:
            for namespace in NAMESPACES:
                news.started(WORKS_AGAIN, namespace)
            waiting = NAMESPACES[:-1]
            for size, quiet_periods, failed in groups:
                for namespace in waiting[:size]:
                    if failed:
                        news.answered(WORKS_AGAIN, namespace)
                    else:
                        news.say(WORKS_AGAIN, namespace)
                        working.append(namespace)
                waiting = waiting[size:]
                await asyncio.sleep(quiet_periods * QUIET_S)
            assert not lines.said, "said before the last watch answered"
            for namespace in [*waiting, NAMESPACES[-1]]:
                news.say(WORKS_AGAIN, namespace)
                working.append(namespace)
            await eventually(lambda: bool(lines.saying("work")))
            await asyncio.sleep(3 * QUIET_S)  # anything more it would say, said
            news.flush()
            return lines.said, working

    said, working = asyncio.run(start())
    if len(working) > NAMED:
        assert len(said) == 1, said
        assert said[0].startswith(f"watches of {len(working)} namespaces work again: tenant"), said
    else:
        assert said == [f"watch of namespace {namespace} works again" for namespace in working], said


async def test_a_watch_that_never_answers_holds_the_start_line_only_so_long() -> None:
    news = WatchNews(quiet_s=QUIET_S, held_s=20 * QUIET_S)
    with Lines() as lines:
        for namespace in NAMESPACES:
            news.started(WORKS_AGAIN, namespace)
        for namespace in NAMESPACES[1:]:
            news.say(WORKS_AGAIN, namespace)
        await eventually(lambda: bool(lines.saying("work")))
        news.flush()
    assert lines.said == [lines.said[0]], lines.said
    assert lines.said[0].startswith(f"watches of {len(NAMESPACES) - 1} namespaces work again: tenant1, ")


async def test_a_watch_closed_while_failing_holds_no_later_all_clear() -> None:
    """A namespace's watch stopped while it failed (dropped from the watched namespaces): the recovery of the
    other watches of its kind is said after a quiet period, not held for it (`HELD_S`, ten seconds, by default;
    here longer than the test waits)."""
    news = WatchNews(quiet_s=QUIET_S, held_s=600)
    with Lines() as lines:
        news.say(FAILING, "tenant-gone", "503")
        news.say(FAILING, "tenant-a", "503")
        news.closed(WORKS_AGAIN, "tenant-gone")
        news.say(WORKS_AGAIN, "tenant-a")
        await eventually(lambda: bool(lines.saying("work")))
        news.flush()
    assert lines.saying("work") == ["watch of namespace tenant-a works again"], lines.said


async def test_a_watch_closed_before_its_first_answer_holds_no_start_line() -> None:
    news = WatchNews(quiet_s=QUIET_S, held_s=600)
    with Lines() as lines:
        news.started(WORKS_AGAIN, "tenant-gone")
        news.started(WORKS_AGAIN, "tenant-a")
        news.say(WORKS_AGAIN, "tenant-a")
        await asyncio.sleep(3 * QUIET_S)
        assert not lines.said, "held for the watch of tenant-gone"
        news.closed(WORKS_AGAIN, "tenant-gone")
        await eventually(lambda: bool(lines.saying("work")))
        news.flush()
    assert lines.said == ["watch of namespace tenant-a works again"], lines.said
