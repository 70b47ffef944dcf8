"""How a command line names standard input (`-`), and how messages name it: shared by `simulate --trace`, the
converters and the advice that names a converter's command line, which may not import the trace reader."""

from __future__ import annotations

from pathlib import Path
from typing import Final

STDIN: Final = "-"
"""The input name that reads standard input (`--trace -`, `minute_table -`, `request_log -`)."""
STDIN_NAME: Final = "standard input"
"""How errors and the report name an input read from standard input."""


def argument_path(argument: str) -> Path:
    """The path an input or `--out` argument names: `-` (the argument itself) is standard input or output, and
    any other spelling of a file named `-` (`./-`, which `Path` makes `-`) is that file, made absolute so that
    it is not read as standard input: `request_log ./-` read what was piped in, or nothing, instead of the file."""
    path = Path(argument)
    if argument != STDIN and str(path) == STDIN:
        return path.absolute()
    return path
