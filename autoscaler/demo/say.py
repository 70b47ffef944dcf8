"""The demo's lines, fitted to the width its reader has: wrapped at word boundaries, with a hanging indent.

Why: the demo is the first thing a new user reads, and 84 of a run's 262 lines ran past 80 columns (the policy line
408 characters, each scale-down's why 334-368): an 80-column terminal broke them mid-word ("the adapt / er's
requests term"), and a log read in an editor ran off its right edge. Each line is wrapped to the terminal's width
where stdout is one, and to 80 columns where it is piped (a log, `| less`), so that both read. A continuation is
indented past the line's own indent (`hanging_indent`), by four blanks or more, so the `[  28s]` of a timed line
stands alone at the left edge and a continuation is never read as a line of its own (the demo's lines start with
none or two): joining each line that starts with four blanks or more to the one above with one blank gives the line
as it was. A word is never broken, nor at its hyphens ("scale-/down"); one wider than the width stays whole.
"""

from __future__ import annotations

import re
import shutil
import sys
import textwrap
from typing import Final

PIPED_WIDTH: Final = 80
"""The width where stdout is no terminal: a log read later, in an editor or `less`."""

NARROWEST: Final = 40
"""A terminal narrower than this is wrapped as if it were this wide: past an 8-blank hanging indent, a narrower
one would hold two or three words a line."""

CONTINUATION: Final = 4
"""The fewest blanks a continuation starts with: more than any of the demo's own lines does."""

STAMP: Final = re.compile(r"\[ *\d+s\] ")
"""A timed line's `[  28s] `: its continuations start under the text after it."""


def width() -> int:
    """The terminal's columns where stdout is a terminal (read each time: a window resized meanwhile), else 80."""
    if sys.stdout.isatty():
        return max(NARROWEST, shutil.get_terminal_size().columns)
    return PIPED_WIDTH


def hanging_indent(line: str) -> str:
    """The blanks a continuation of `line` starts with: under the text after a `[  28s] `, else four past the
    line's own indent."""
    if stamp := STAMP.match(line):
        return " " * max(CONTINUATION, stamp.end())
    return " " * (len(line) - len(line.lstrip(" ")) + CONTINUATION)


def fit(line: str, columns: int) -> str:
    """`line` wrapped to `columns` (`hanging_indent`); as it is where it fits. One line: no newline in it."""
    if len(line) <= columns:
        return line
    return "\n".join(textwrap.wrap(line, columns, subsequent_indent=hanging_indent(line), break_long_words=False,
                                   break_on_hyphens=False))


def say(text: str = "") -> None:
    """Print `text`, each of its lines fitted to the reader's width (`fit`, `width`), and flush it: a reader that
    has gone shows here as BrokenPipeError (`command`), and a log shows each line as it is said."""
    columns = width()
    print("\n".join(fit(line, columns) for line in text.split("\n")))
    sys.stdout.flush()


def fit_command(line: str, columns: int) -> str:
    """A shell command (`try: curl -sk "https://..."`) wrapped to `columns` after a `/`, `?` or `&` of its URL, each
    line but the last ending in a backslash: the shell removes a backslash and the newline after it, even inside
    double quotes, so the lines pasted into a shell run the command as one. A continuation starts at the left edge:
    inside the quotes a blank would be part of the URL. As it is where it fits. No single quote in it: inside those
    the shell keeps the backslash."""
    if len(line) <= columns:
        return line
    lines = [""]
    for piece in re.split(r"(?<=[/?&])", line):
        if lines[-1] and len(lines[-1]) + len(piece) > columns - 1:  # the backslash's column
            lines.append("")
        lines[-1] += piece
    return "\\\n".join(lines)


def say_command(line: str) -> None:
    """Print a shell command fitted to the reader's width (`fit_command`, `width`), and flush it."""
    print(fit_command(line, width()))
    sys.stdout.flush()


def say_as_is(text: str) -> None:
    """Print `text` unwrapped and flush it: a table's rows, aligned in columns of their own, which a wrap at
    their blanks would scatter; the table is laid out within 80 columns (`report_lines.POD_TABLE_HEADER`)."""
    print(text)
    sys.stdout.flush()
