"""What watches of one namespace each say (broken, working again), for all namespaces together in one line.

One watch at a time, a line each: `pod watch of namespace team-a broken, keeping last inventory; ...`. But with
`--namespaces` there is a watch a namespace for pods, one for RuntimeScales and one for HPAs: they start together
at every start, and an API server restart (a control-plane upgrade) breaks all of them at once and they come back
within a second or two: with 30 namespaces that was 30 lines at each start and 180 at each restart. So what the watches
of one event loop say is kept until they have said nothing new for `QUIET_S` (at most `HELD_S` after the first of
it) and said then, as `autoscaler.transition_log` says a refresh's runtimes: for each kind of line (`ScopeLine`), a
line each up to `NAMED` namespaces, else one line with the count, the first few named and one namespace's detail.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections import defaultdict
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Final

from autoscaler.kube.raw import Scope, scope_name
from autoscaler.log_lists import say_each_or_counted

QUIET_S: Final = 1.0
"""How long without news before what was said is logged: watches broken together come back one after another
within the list-watch backoff's first jittered step (`spread_delay`: 0.8 to 1.2 s for the RuntimeScale watches)."""
HELD_S: Final = 10.0
"""The longest the first news waits, however much keeps coming."""


@dataclass(frozen=True)
class ScopeLine:
    """One kind of line: `one` for a namespace (`{scope}`, `{detail}`), `many` for more than `NAMED` of them
    (`{count}`, `{scopes}`, and the first one's `{scope}` and `{detail}`)."""

    logger: str
    level: int
    one: str
    many: str


class WatchNews:
    """Collects what watches say (`say`), said together once they are quiet for `QUIET_S` (`flush`)."""

    def __init__(self, quiet_s: float = QUIET_S, held_s: float = HELD_S) -> None:
        self._quiet_s = quiet_s
        self._held_s = held_s
        self._said: dict[ScopeLine, list[tuple[Scope, str]]] = defaultdict(list)
        self._due: asyncio.TimerHandle | None = None
        self._first_at = 0.0

    def say(self, line: ScopeLine, scope: Scope, detail: object = "") -> None:
        self._said[line].append((scope, str(detail)))
        loop = asyncio.get_running_loop()
        if self._due is None:
            self._first_at = loop.time()
        else:
            self._due.cancel()
        self._due = loop.call_at(min(loop.time() + self._quiet_s, self._first_at + self._held_s), self.flush)

    def flush(self) -> None:
        """Say what was collected, now, in the order each kind was first said."""
        if self._due is not None:
            self._due.cancel()
            self._due = None
        said, self._said = self._said, defaultdict(list)
        for line, entries in said.items():
            _say(line, entries)


def _say(line: ScopeLine, entries: list[tuple[Scope, str]]) -> None:
    """One kind's entries: a line each up to `NAMED`, else one counted line with the first one's detail."""
    first, first_detail = entries[0]

    def one(entry: tuple[Scope, str]) -> str:
        return line.one.format(scope=scope_name(entry[0]), detail=entry[1])

    def many(count: int, scopes: str) -> str:
        return line.many.format(count=count, scopes=scopes, scope=scope_name(first), detail=first_detail)

    say_each_or_counted(logging.getLogger(line.logger), entries, one, many, shown=lambda entry: _named(entry[0]),
                        level=line.level)


def _named(scope: Scope) -> str:
    return scope if scope is not None else scope_name(scope)


_BY_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, WatchNews] = weakref.WeakKeyDictionary()


def watch_news() -> WatchNews:
    """The news of the running event loop's watches: every watch of the adapter shares it."""
    loop = asyncio.get_running_loop()
    news = _BY_LOOP.get(loop)
    if news is None:
        news = _BY_LOOP[loop] = WatchNews()
    return news


async def flushed_when_stopped(run: Awaitable[None]) -> None:
    """Await a watch's `run`; when it stops (cancelled at close, or failing), what the watches had still to say
    is said at once rather than lost with the event loop's timer."""
    try:
        await run
    finally:
        watch_news().flush()
