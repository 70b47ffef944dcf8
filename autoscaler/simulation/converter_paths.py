"""The trace converters' error contract (`request_log`, `minute_table`): one line, status 2, as `simulate`'s.

A converter reads its inputs whole before it writes: a log of 105 MB takes half a minute. A missing input, or
an `--out` in a directory that is not there, was found only then (the input's as `[Errno 2] No such file or
directory`, the output's after the whole read), with status 1 where `simulate` and `serve` say 2. Both are
checked here before anything is read, and every refusal goes through `refuse`, so that the converters read
alike and as `simulate` does.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Final

USAGE_STATUS: Final = 2
"""The status of a refused run, as argparse's and `simulate`'s: the input or the flags were wrong."""

_ADVICE: Final = {errno.ENOENT: "check the path", errno.ENOTDIR: "check the path",
                  errno.EACCES: "make it readable for this user (chmod), or copy it where you can read it"}


def refuse(prog: str, message: str) -> int:
    """Print `message` as one line after the command's name, as argparse prints a flag's error, and give the
    status to exit with."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    return USAGE_STATUS


def why(error: OSError) -> str:
    """The OS's words for `error` (`No such file or directory`), not Python's `[Errno 2] ...` with the path."""
    return error.strerror or str(error)


def unreadable(path: Path) -> str | None:
    """Why `path` cannot be read as an input, or None. Stat and access only: nothing is opened, so a pipe named
    by its path (`<(zcat log.gz)`, `/dev/stdin`) is left as it is for the read."""
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        return f"{path}: cannot read: {why(error)}; {_ADVICE.get(error.errno or 0, 'check the path')}"
    if stat.S_ISDIR(mode):
        return f"{path}: cannot read: it is a directory; give the CSV file in it"
    if not os.access(path, os.R_OK):
        return f"{path}: cannot read: {os.strerror(errno.EACCES)}; {_ADVICE[errno.EACCES]}"
    return None


def unwritable(out: Path) -> str | None:
    """Why `--out` cannot be written, or None; '-' is standard output. A file is made and removed in its
    directory, as `simulate` checks its `--out`: a read-only file system or a directory of another user says
    so here, not after the whole read."""
    if str(out) == "-":
        return None
    if out.is_dir():
        return f"--out {out}: it is a directory; give a file name ({out / 'trace.csv'})"
    folder = out.parent
    if not folder.is_dir():
        return f"--out {out}: no directory {folder}; make it first (mkdir -p {folder}) or give another path"
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        return f"--out {out}: cannot write in {folder}: {why(error)}; give a path you can write"
    if out.exists() and not os.access(out, os.W_OK):
        return f"--out {out}: cannot write: {os.strerror(errno.EACCES)}; give a path you can write"
    return None
