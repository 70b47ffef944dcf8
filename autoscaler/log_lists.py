"""Lists of runtimes, pods or objects in one log line, at fleet size.

A log line that names every runtime is fine with ten and a 200 KB line with 5,000 (the first discovery
names them all): log shippers cut or drop such lines, and no person reads them. A list in a log line names
its first few and counts the rest; which runtimes exactly is what `/metrics` and `/debug` are for.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Hashable, Sequence
from typing import Final, TypeVar

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

NAMED: Final = 10
"""How many items one log line names before it only counts the rest."""


def few(items: Collection[object], named: int = NAMED, *, sep: str = ", ", more: str = " and {} more") -> str:
    """`items` for a log line: all of them when there are at most `named`, else the first `named` and how many
    more (`a, b and 4998 more`); `none` when empty. Items that are sentences themselves are parted by `sep="; "`,
    and `more` (the count's format, with its own separator) says what the rest are (`" and {} more runtimes"`),
    so that every list in a log line is cut the same way."""
    if not items:
        return "none"
    shown = [str(item) for _, item in zip(range(named), items, strict=False)]
    left = len(items) - len(shown)
    return sep.join(shown) + (more.format(left) if left else "")


def count_of(count: int, noun: str) -> str:
    """`1 runtime`, `2 runtimes`: a count as a person writes it (a log line's `1 runtimes` reads as a slip)."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def added_and_removed(noun: str, added: Collection[object], removed: Collection[object]) -> str:
    """`2 runtimes added (a, b), 1 removed (c)`: each kind there is, counted and named (`few`); a kind with none is
    left out (`0 removed (none)` said nothing but noise). Empty when both are."""
    said = [f"{count_of(len(added), noun)} added ({few(added)})"] if added else []
    if removed:
        said.append(f"{len(removed) if added else count_of(len(removed), noun)} removed ({few(removed)})")
    return ", ".join(said)


def in_words(names: Sequence[str]) -> str:
    """A short list as a sentence says it: `a`, `a and b`, `a, b and c`."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def say_each_or_counted(log: logging.Logger, items: Sequence[T], one: Callable[[T], str],
                        many: Callable[[int, str], str], shown: Callable[[T], object] = str,
                        level: int = logging.INFO) -> None:
    """Say what happened to `items` together: a line each (`one`) up to `NAMED`, else one line (`many`, given the
    count and `few` of them as `shown` writes each), as a refresh's changed runtimes are said
    (`autoscaler.transition_log`): what a fleet does at once (1,000 RuntimeScales adopted, 40 runtimes pruned) is
    one line, not one per runtime."""
    if len(items) <= NAMED:
        for item in items:
            log.log(level, "%s", one(item))
    elif items:
        log.log(level, "%s", many(len(items), few([shown(item) for item in items])))


def say_each_or_grouped(log: logging.Logger, items: Sequence[T], one: Callable[[T], str],
                        state: Callable[[T], K], many: Callable[[int, K, str, T], str],
                        shown: Callable[[T], object], level: Callable[[T], int]) -> None:
    """Say what happened to `items` together: a line each (`one`, at its `level`) up to `NAMED`, else one line per
    `state` they are now in (`many`, given the count, the state, `few` of them as `shown` writes each, and the
    first as the example), as a sync's changed RuntimeScales and a refresh's changed runtimes are said: a new
    leader's first pass that finds 1,000 RuntimeScales Ready is one line, and a state only one item is in keeps
    that item's own line. A group's line has its first item's level."""
    if len(items) <= NAMED:
        for item in items:
            log.log(level(item), "%s", one(item))
        return
    groups: dict[K, list[T]] = {}
    for item in items:
        groups.setdefault(state(item), []).append(item)
    for key, group in groups.items():
        first = group[0]
        line = one(first) if len(group) == 1 else many(len(group), key, few([shown(item) for item in group]), first)
        log.log(level(first), "%s", line)
