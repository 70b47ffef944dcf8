"""Lists of runtimes, pods or objects in one log line, at fleet size.

A log line that names every runtime is fine with ten and a 200 KB line with 5,000 (the first discovery
names them all): log shippers cut or drop such lines, and no person reads them. A list in a log line names
its first few and counts the rest; which runtimes exactly is what `/metrics` and `/debug` are for.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Final

NAMED: Final = 10
"""How many items one log line names before it only counts the rest."""


def few(items: Collection[object], named: int = NAMED) -> str:
    """`items` for a log line: all of them when there are at most `named`, else the first `named` and how many
    more (`a, b and 4998 more`); `none` when empty."""
    if not items:
        return "none"
    shown = [str(item) for _, item in zip(range(named), items, strict=False)]
    more = len(items) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")


def in_words(names: Sequence[str]) -> str:
    """A short list as a sentence says it: `a`, `a and b`, `a, b and c`."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
