"""What one namespace's watch says, as the log reads it, when it breaks again while its all-clear waits for others
(a load balancer cutting streams every 6 to 7 s, one namespace's watch slower to come back).

The all-clear was held for the other watches (up to `HELD_S`, 10 s) while the next break of the same watch was
said at once: the log read `broken` twice without an all-clear, then each `established` twice in one millisecond,
and grouped by kind rather than in the order things happened. Each namespace's line comes once a batch, in the
order it happened, and its latest state last."""

from __future__ import annotations

import asyncio
import re
from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.kube.errors import KubeApiError
from autoscaler.kube.watch_news import WatchNews
from tests.kube.test_watch_news_all_clear import FAILING, QUIET_S, WORKS_AGAIN, Lines
from tests.support.waiting import eventually

LINE = re.compile(r"watch of namespace (\S+) (failing|works again)")


def states(said: list[str]) -> dict[str, list[str]]:
    """Each namespace's lines, in the order logged: `failing` or `works again`."""
    by_scope: dict[str, list[str]] = {}
    for line in said:
        if (match := LINE.search(line)) is not None:
            by_scope.setdefault(match[1], []).append(match[2])
    return by_scope


async def test_a_watch_broken_again_while_its_all_clear_waits_is_said_in_order_once_each() -> None:
    news = WatchNews(quiet_s=QUIET_S, held_s=40 * QUIET_S)
    with Lines() as lines:
        news.say(FAILING, "slow", "stream broken")  # held back by this one, which stays broken a while
        news.say(FAILING, "cut", "stream broken")
        await eventually(lambda: len(lines.said) == 2)
        for _ in range(2):  # back, and cut again before the slow one is back
            news.say(WORKS_AGAIN, "cut")
            await asyncio.sleep(3 * QUIET_S)
            news.say(FAILING, "cut", "stream broken")
            await asyncio.sleep(3 * QUIET_S)
        news.say(WORKS_AGAIN, "cut")
        news.say(WORKS_AGAIN, "slow")
        await eventually(lambda: states(lines.said).get("slow") == ["failing", "works again"])
        news.flush()
    cut = states(lines.said)["cut"]
    assert cut[0] == "failing" and cut[-1] == "works again", lines.said
    assert all(a != b for a, b in pairwise(cut)), lines.said

EVENTS = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 3)), min_size=1, max_size=30)
"""(namespace, quiet periods after) : each a turn of that namespace's watch, failing then working in turn."""


@settings(max_examples=15, deadline=None)
@given(events=EVENTS, held=st.integers(2, 8))
def test_each_namespace_s_lines_alternate_in_order_and_end_in_its_latest_state(
    events: list[tuple[str, int]], held: int
) -> None:
    async def run() -> tuple[list[str], dict[str, str]]:
        news = WatchNews(quiet_s=QUIET_S, held_s=held * QUIET_S)
        latest: dict[str, str] = {}
        with Lines() as lines:
            for scope, quiet in events:
                failing = latest.get(scope) != "failing"
                news.say(FAILING if failing else WORKS_AGAIN, scope, "stream broken" if failing else "")
                latest[scope] = "failing" if failing else "works again"
                await asyncio.sleep(quiet * QUIET_S)
            news.flush()
            return lines.said, latest

    said, latest = asyncio.run(run())
    for scope, logged in states(said).items():
        assert all(a != b for a, b in pairwise(logged)), (scope, said)
        assert logged[-1] == latest[scope], (scope, said)
        assert logged[0] == "failing", (scope, said)


async def test_a_refusal_between_two_failures_of_another_cause_in_one_batch_is_said() -> None:
    """A pod watch's stream dropped, its watch then refused with a 403 (a Role edited) and the API server then
    unreachable, all while the batch waits for another namespace: only the last failure was said, and the log
    blamed the network for what RBAC refused. The last failure of each cause is said, in order."""
    news = WatchNews(quiet_s=QUIET_S, held_s=40 * QUIET_S)
    with Lines() as lines:
        news.say(FAILING, "slow", KubeApiError("stream broken", status=None))  # holds the batch a while
        news.say(FAILING, "ns", KubeApiError("stream broken", status=None))
        news.say(FAILING, "ns", KubeApiError("watch pods: 403 Forbidden", status=403))
        news.say(FAILING, "ns", KubeApiError("Cannot connect to host", status=None))
        news.flush()
    ns = [line for line in lines.said if "namespace ns" in line]
    assert any("403 Forbidden" in line for line in ns), lines.said
    assert "Cannot connect" in ns[-1], lines.said
    assert not any("stream broken" in line for line in ns), lines.said


async def test_a_watch_that_worked_between_two_failures_of_one_batch_says_it_in_order() -> None:
    """A pod watch refused (a 403), working again (the Role fixed), then its stream dropped, all while the batch waits
    for another namespace: the all-clear in between was left out, and the log read two WARNINGs in a row, as if the
    watch had been failing all along, first refused and then unreachable. It reads what happened, in order."""
    news = WatchNews(quiet_s=QUIET_S, held_s=40 * QUIET_S)
    with Lines() as lines:
        news.say(FAILING, "slow", KubeApiError("stream broken", status=None))  # holds the batch a while
        news.say(FAILING, "ns", KubeApiError("watch pods: 403 Forbidden", status=403))
        news.say(WORKS_AGAIN, "ns")
        news.say(FAILING, "ns", KubeApiError("stream broken", status=None))
        news.flush()
    assert lines.saying("namespace ns") == [
        "watch of namespace ns failing: watch pods: 403 Forbidden",
        "watch of namespace ns works again",
        "watch of namespace ns failing: stream broken",
    ], lines.said


CAUSES = {"dropped": KubeApiError("stream broken", status=None), "refused": KubeApiError("403 Forbidden", status=403),
          "throttled": KubeApiError("429 Too Many Requests", status=429)}
TURNS = st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from([None, *CAUSES])), min_size=1, max_size=20)
"""(namespace, a failure's cause or None for the all-clear) : what the watches say, in order, in one batch."""


def collapsed(states: list[str]) -> list[str]:
    return [state for index, state in enumerate(states) if index == 0 or states[index - 1] != state]


@settings(max_examples=50, deadline=None)
@given(turns=TURNS)
def test_every_change_between_failing_and_working_within_a_batch_is_said_in_order(
    turns: list[tuple[str, str | None]],
) -> None:
    """Whatever a batch holds, each namespace's lines go from failing to working and back exactly as it did (its
    repeats of one failure folded), and each failure's cause last said before an all-clear is among them."""

    async def run() -> list[str]:
        news = WatchNews(quiet_s=QUIET_S, held_s=40 * QUIET_S)
        with Lines() as lines:
            for scope, cause in turns:
                if cause is None:
                    news.say(WORKS_AGAIN, scope)
                else:
                    news.say(FAILING, scope, CAUSES[cause])
            news.flush()
            return lines.said

    said = asyncio.run(run())
    for scope in ("a", "b"):
        told = [cause for named, cause in turns if named == scope]
        logged = states(said).get(scope, [])
        expected = collapsed(["works again" if cause is None else "failing" for cause in told])
        assert collapsed(logged) == expected, (scope, said)
        assert all(a != b for a, b in pairwise(line for line in said if f"namespace {scope} " in line)), said
        last_before_clear = {told[index - 1] for index, cause in enumerate(told) if cause is None and index > 0}
        for cause in filter(None, last_before_clear):
            assert any(str(CAUSES[cause]) in line and f"namespace {scope} " in line for line in said), (cause, said)
