"""How a command line names standard input (`-`), and how messages name it: shared by `simulate --trace`, the
converters and the advice that names a converter's command line, which may not import the trace reader."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from pathlib import Path
from typing import Final, cast

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


def input_name(path: str | os.PathLike[str]) -> str:
    """How messages and reports name an input: `-` as standard input, a file by its path."""
    name = os.fspath(path)
    return STDIN_NAME if name == STDIN else name


def opened(path: str | os.PathLike[str]) -> contextlib.AbstractContextManager[io.BufferedReader]:
    """The input's bytes: standard input for `-` (left open for the rest of the run), else the file."""
    if os.fspath(path) == STDIN:
        return contextlib.nullcontext(cast(io.BufferedReader, sys.stdin.buffer))
    return open(path, "rb")
