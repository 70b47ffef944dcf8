"""The trace converters' error contract (`request_log`, `minute_table`): one line, status 2, as `simulate`'s.

A converter reads its inputs whole before it writes: a log of 105 MB takes half a minute. A missing input, or
an `--out` in a directory that is not there, was found only then (the input's as `[Errno 2] No such file or
directory`, the output's after the whole read), with status 1 where `simulate` and `serve` say 2. Both are
checked here before anything is read, and every refusal goes through `refuse`, so that the converters read
alike and as `simulate` does.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from autoscaler.simulation.standard_input import STDIN, STDIN_NAME

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
    by its path (`<(zcat log.gz)`, `/dev/stdin`) is left as it is for the read. `-` is standard input, refused
    only where it is a terminal (nothing piped in: the run would wait, silent, for a CSV to be typed)."""
    if str(path) == STDIN:
        if sys.stdin is not None and sys.stdin.isatty():
            return (f"{STDIN}: {STDIN_NAME} is a terminal: pipe the file into it (zcat log.csv.gz | ...), or give "
                    "its name")
        return None
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        return f"{path}: cannot read: {why(error)}; {_ADVICE.get(error.errno or 0, 'check the path')}"
    if stat.S_ISDIR(mode):
        return f"{path}: cannot read: it is a directory; give the CSV file in it"
    if not os.access(path, os.R_OK):
        return f"{path}: cannot read: {os.strerror(errno.EACCES)}; {_ADVICE[errno.EACCES]}"
    return None


def read_once(paths: Sequence[Path]) -> str | None:
    """Why the inputs cannot be read as given, or None: standard input is read once, so `-` given twice (or
    `a=- b=-`) would read the second as empty."""
    if sum(str(path) == STDIN for path in paths) > 1:
        return f"{STDIN} given twice: {STDIN_NAME} is read once; save it to a file to give it more than once"
    return None


def _denied(where: Path) -> str:
    """Why `where` may not be written: a read-only file system says so, anything else is a permission."""
    try:
        read_only = bool(os.statvfs(where).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    return os.strerror(errno.EROFS if read_only else errno.EACCES)


def unwritable(out: Path) -> str | None:
    """Why `--out` cannot be written, or None; '-' is standard output. Only what writing needs is checked, and
    nothing is made or truncated: an existing file must be writable by this user; a pipe or device (`/dev/null`,
    `/dev/stdout`, bash's `>(gzip > t.gz)` as /dev/fd/63) is opened as it is when written; a new file needs its
    directory to be there and writable. A file made and removed in the directory to check it refused all of
    those where the user may not add files to /dev or /dev/fd, or to the directory of a file they may write."""
    if str(out) == STDIN:
        return None
    try:
        mode: int | None = os.stat(out).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as error:
        return f"--out {out}: cannot write: {why(error)}; give a path you can write"
    if mode is not None and stat.S_ISDIR(mode):
        return f"--out {out}: it is a directory; give a file name ({out / 'trace.csv'})"
    if mode is not None:
        if stat.S_ISREG(mode) and not os.access(out, os.W_OK):
            return f"--out {out}: cannot write: {_denied(out)}; give a path you can write"
        return None
    folder = out.parent
    if not folder.is_dir():
        return f"--out {out}: no directory {folder}; make it first (mkdir -p {folder}) or give another path"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"--out {out}: cannot make a file in {folder}: {_denied(folder)}; give a path you can write"
    return None


def written_over(out: Path, inputs: Sequence[Path]) -> str | None:
    """Why `out` may not be written, where it is one of the `inputs` (the same file, however spelled: a symlink,
    another path), or None: `--out d01.csv` given by mistake overwrote the downloaded day, and `request_log
    a=app.log --out app.log` the user's log, without a word. `--out -` is standard output, never a file read (a
    file named `-` where it runs, the old `minute_table --out -`'s, is not it)."""
    if str(out) == STDIN:
        return None
    for source in inputs:
        with contextlib.suppress(OSError):  # `out` not there yet (or an input not readable: reading it says so)
            if os.path.samefile(out, source):
                return f"--out {out} is {source}, one of the files read: give the output another name"
    return None
