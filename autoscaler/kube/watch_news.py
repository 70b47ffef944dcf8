"""What watches of one namespace each say (broken, working again), for all namespaces together in one line.

One watch at a time, a line each: `pod watch of namespace team-a broken, keeping last inventory; ...`. But with
`--namespaces` there is a watch a namespace for pods, one for RuntimeScales and one for HPAs: they start together
at every start, and an API server restart (a control-plane upgrade) breaks all of them at once and they come back
within a second or two: with 30 namespaces that was 30 lines at each start and 180 at each restart. So what the watches
of one event loop say is kept until they have said nothing new for `QUIET_S` (at most `HELD_S` after the first of
it) and said then, as `autoscaler.transition_log` says a refresh's runtimes: for each kind of line (`ScopeLine`), a
line each up to `NAMED` namespaces, else one line with the count, the first few named and one namespace's detail.

An all-clear (a `ScopeLine` with `ends`) waits, up to `HELD_S`, while other watches that said one of the lines it
ends still fail: on a loaded adapter some watches of a restart come back seconds after the others, and the
recovery was then one line per group that happened to arrive a quiet second apart (four where one was promised).
So does the first all-clear of watches starting together (`started`: `pod watch established`) while others of them
have not answered yet (`answered`): on a loaded adapter some namespaces' first lists answer seconds after the others'.
A watch that stops (`closed`) is waited for no more, failing or not.

What one watch said in one batch is said in the order it happened, its latest state last, each line once: a
watch cut again while its all-clear waited for others (a load balancer cutting streams every 6 to 7 s) had its
next `broken` said at once and its held all-clears later, each once per time it was said, all of one kind
together: `broken` twice without an all-clear, then `established` twice in one millisecond. So a held all-clear
that the same watch said more after is said with what followed it; of each run of a watch's failures in one batch
the last of each cause is said, in order (a stream dropped, its watch refused with a 403, then the API server
unreachable: the 403 and the connection's failure, not the connection's alone, which blamed the network for what
RBAC refused); an all-clear between two failures is said between them (`failing: 403`, `works again`, `failing:
stream broken`: left out, the log read two WARNINGs in a row, as if the watch had failed all along); and the batch
is said in turns: the all-clears that ended spells said before, then every watch's first failures, the all-clears
after them, any failures after those, and so on; each turn a line a kind, as before (`_say_all`).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from autoscaler.kube.raw import Scope, scope_name
from autoscaler.kube.watch_health import FailureReason, failure_reason
from autoscaler.log_lists import say_each_or_counted

QUIET_S: Final = 1.0
"""How long without news before what was said is logged: watches broken together come back one after another
within the list-watch backoff's first jittered step (`spread_delay`: 0.8 to 1.2 s for the RuntimeScale watches)."""
HELD_S: Final = 10.0
"""The longest the first news waits, however much keeps coming."""


@dataclass(frozen=True)
class _Said:
    """One line said of one watch, as `WatchNews.say` was told it."""

    line: ScopeLine
    scope: Scope
    detail: str
    cause: FailureReason | None
    """A failure's cause, where it was told the error (`_kept` says the last failure of each)."""


@dataclass(frozen=True)
class ScopeLine:
    """One kind of line: `one` for a namespace (`{scope}`, `{detail}`), `many` for more than `NAMED` of them
    (`{count}`, `{scopes}`, and the first one's `{scope}` and `{detail}`)."""

    logger: str
    level: int
    one: str
    many: str
    ends: tuple[ScopeLine, ...] = ()
    """The lines this one is the all-clear for: said while other watches still fail with one of them, it is held
    for them (up to `HELD_S`) so that their recovery is said with it."""


class WatchNews:
    """Collects what watches say (`say`), said together once they are quiet for `QUIET_S` (`flush`)."""

    def __init__(self, quiet_s: float = QUIET_S, held_s: float = HELD_S) -> None:
        self._quiet_s = quiet_s
        self._held_s = held_s
        self._said: list[_Said] = []
        """What was said and is not logged yet, in order."""
        self._all_clears: set[ScopeLine] = set()
        """The all-clears said or started here: which watch (`_family`) a failing line is of."""
        self._failing: dict[ScopeLine, set[Scope]] = defaultdict(set)
        """The scopes whose last word of each failing line has no all-clear yet: what an all-clear waits for."""
        self._unanswered: dict[ScopeLine, set[Scope]] = defaultdict(set)
        """The scopes of each all-clear whose watch started and has not answered yet: what it waits for too."""
        self._due: asyncio.TimerHandle | None = None
        self._first_at = 0.0

    def started(self, all_clear: ScopeLine, scope: Scope) -> None:
        """The watch of `scope` starts; `all_clear` said by the watches started with it waits for its first answer
        (`answered`, or `all_clear` itself): thirty namespaces' watches coming up a second or more apart said
        `established` in two or more lines."""
        self._unanswered[all_clear].add(scope)
        self._all_clears.add(all_clear)

    def answered(self, all_clear: ScopeLine, scope: Scope) -> None:
        """The watch of `scope` answered (its first list worked, or failed): `all_clear` waits for it no more."""
        self._unanswered[all_clear].discard(scope)
        self._reconsider()

    def closed(self, all_clear: ScopeLine, scope: Scope) -> None:
        """The watch of `scope` stopped: neither its start nor its failures hold `all_clear` any longer (a
        namespace's watch closed while failing held every later all-clear of that kind for `HELD_S`)."""
        self._unanswered[all_clear].discard(scope)
        for ended in all_clear.ends:
            self._failing[ended].discard(scope)
        self._reconsider()

    def say(self, line: ScopeLine, scope: Scope, detail: object = "") -> None:
        cause = failure_reason(detail) if isinstance(detail, BaseException) else None
        self._said.append(_Said(line, scope, str(detail), cause))
        if line.ends:
            self._all_clears.add(line)
        self._unanswered[line].discard(scope)
        for ended in line.ends:
            self._failing[ended].discard(scope)
        if not line.ends:
            self._failing[line].add(scope)
        loop = asyncio.get_running_loop()
        if self._due is None:
            self._first_at = loop.time()
        self._say_at(loop.time() + self._quiet_s)

    def _say_at(self, when: float) -> None:
        """Say what was collected at `when`, or at the latest `HELD_S` after the first of it."""
        if self._due is not None:
            self._due.cancel()
        deadline = self._first_at + self._held_s
        self._due = asyncio.get_running_loop().call_at(min(when, deadline), self._quiet, when >= deadline)

    def _quiet(self, last_chance: bool) -> None:
        """Quiet for `QUIET_S`: say everything but an all-clear that other failing watches may still join, which
        waits for them (a new word says it then) or for `HELD_S`."""
        self._due = None
        waiting = set() if last_chance else {e.line for e in self._said if self._awaits_others(e.line)}
        last = {(self._family(e.line), e.scope): index for index, e in enumerate(self._said)}
        holding = {index for index, e in enumerate(self._said)  # what the same watch said after it goes with it
                   if e.line in waiting and last[self._family(e.line), e.scope] == index}
        said = [e for index, e in enumerate(self._said) if index not in holding]
        held = [e for index, e in enumerate(self._said) if index in holding]
        self._said = held
        if held:
            self._say_at(self._first_at + self._held_s)
        _say_all(said, self._family)

    def _family(self, line: ScopeLine) -> ScopeLine:
        """Which watch's lines `line` is of: its all-clear (itself, for an all-clear)."""
        if line.ends:
            return line
        return next((all_clear for all_clear in self._all_clears if line in all_clear.ends), line)

    def _awaits_others(self, line: ScopeLine) -> bool:
        return bool(self._unanswered[line]) or any(self._failing[ended] for ended in line.ends)

    def _reconsider(self) -> None:
        """A watch that an all-clear held waits for has answered or stopped without a word: the all-clear is said
        after a quiet period, as if it had."""
        if self._due is not None and any(e.line.ends and not self._awaits_others(e.line) for e in self._said):
            self._say_at(asyncio.get_running_loop().time() + self._quiet_s)

    def flush(self) -> None:
        """Say what was collected, now, in the order each kind was first said."""
        if self._due is not None:
            self._due.cancel()
            self._due = None
        said, self._said = self._said, []
        _say_all(said, self._family)


def _say_all(said: list[_Said], family: Callable[[ScopeLine], ScopeLine]) -> None:
    """Say a batch, each watch's lines in order (`_kept`), in turns (the module's docstring): the k-th failing
    spell of every watch in one turn, the all-clear after it in the next, an all-clear that ended a spell said
    before the batch first; each turn a line a kind, the kinds in the order first said."""
    by_watch: dict[tuple[ScopeLine, Scope], list[_Said]] = defaultdict(list)
    for entry in said:
        by_watch[family(entry.line), entry.scope].append(entry)
    order = {id(entry): index for index, entry in enumerate(said)}
    turns: dict[int, list[_Said]] = defaultdict(list)
    for entries in by_watch.values():
        kept = _kept(entries)
        # first failures in turn 1; an all-clear that ended a spell said before in 0, a lone one with the others' last
        turn = 1 if not kept[0].line.ends else 0 if len(kept) > 1 else 2
        for index, entry in enumerate(kept):
            if index and bool(entry.line.ends) != bool(kept[index - 1].line.ends):
                turn += 1
            turns[turn].append(entry)
    for turn in sorted(turns):
        kinds: dict[ScopeLine, list[tuple[Scope, str]]] = defaultdict(list)
        for entry in sorted(turns[turn], key=lambda entry: order[id(entry)]):
            kinds[entry.line].append((entry.scope, entry.detail))
        for line, scopes in kinds.items():
            _say(line, scopes)


def _kept(entries: list[_Said]) -> list[_Said]:
    """One watch's lines of a batch, in order, to say: each all-clear (once where said twice in a row), and of each
    run of failures between them the last of each cause (a 403 between a dropped stream and an unreachable API
    server is said, not hidden behind the network). An all-clear between two failures is said: left out, the log
    read two WARNINGs in a row, as if the watch had failed all along."""
    kept: list[_Said] = []
    run: list[_Said] = []

    def end_run() -> None:
        last_of_cause = {entry.cause: index for index, entry in enumerate(run)}
        kept.extend(run[index] for index in sorted(last_of_cause.values()))
        run.clear()

    for entry in entries:
        if not entry.line.ends:
            run.append(entry)
            continue
        end_run()
        if kept and kept[-1].line.ends:
            kept[-1] = entry
        else:
            kept.append(entry)
    end_run()
    return kept


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


async def flushed_when_stopped(run: Awaitable[None], all_clear: ScopeLine, scope: Scope) -> None:
    """Await the `run` of the watch of `scope` whose all-clear is `all_clear`; when it stops (cancelled at close,
    or failing), it is forgotten (`WatchNews.closed`) and what the watches had still to say is said at once rather
    than lost with the event loop's timer."""
    try:
        await run
    finally:
        news = watch_news()
        news.closed(all_clear, scope)
        news.flush()
