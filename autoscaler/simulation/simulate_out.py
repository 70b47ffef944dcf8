"""Where `simulate` writes: --out made and checked before the run, the report's files put in place together, the
directories a run made removed when it ends early, Ctrl-C and SIGTERM, and a reader of stdout that has gone."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from autoscaler.simulation.outputs import discard, write_together

OUTPUTS: Final = ("report.json", "report.md", "timeline.png")
"""The files `simulate` writes in --out."""


def check_out(out: Path) -> None:
    """Make `--out` and write a file there before the run, so that a directory that cannot be written is one
    line at the start, not a traceback after minutes of simulating."""
    try:
        if out.exists() and not out.is_dir():
            raise NotADirectoryError(f"{out} is a file")
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as error:
        raise ValueError(f"--out {out}: cannot write there: {error.strerror or error}") from None
    for name in OUTPUTS:  # a directory (or a device) where a report file goes: open() fails only at the end
        path = out / name
        if path.exists() and not path.is_file():
            kind = "a directory" if path.is_dir() else "not a regular file"
            raise ValueError(f"--out {out}: cannot write {name} there: it is {kind}")


def _text(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def write_report(out: Path, report: dict[str, Any], plot: Callable[[Path], None] | None) -> None:
    """The report's files, put in place together or not at all (outputs.py); a write that fails (a full disk)
    is one line naming the file, not a traceback."""
    from autoscaler.simulation.report_text import json_text, markdown

    try:
        write_together(out, {"report.json": lambda path: _text(path, json_text(report)),
                             "report.md": lambda path: _text(path, markdown(report)),
                             "timeline.png": plot})  # None: an earlier run's plot is removed
    except OSError as error:
        name = Path(error.filename).name.replace(".partial", "") if error.filename else "the report"
        raise ValueError(f"--out {out}: cannot write {name} there: {error.strerror or error}") from None


def missing_directories(out: Path) -> list[Path]:
    """`out` and each of its parents that does not exist yet, deepest first: the directories `check_out` makes,
    and so this run's to remove if it ends before its report is in place."""
    missing = []
    path = out.absolute()
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    return missing


def remove_made(made: list[Path]) -> None:
    """Remove the directories this run made (`missing_directories`), deepest first, each only if empty: left,
    `--out runs/today/report` stopped early left runs/today/, read as a run that wrote nothing. One that holds
    anything (a whole report put in place) stays, and so do its parents."""
    for path in made:
        try:
            path.rmdir()
        except OSError:  # not empty, or never made
            return


def stop_on_signals(out: Path, made: list[Path]) -> None:
    """Ctrl-C and SIGTERM (`timeout`, a cancelled CI job, a deleted pod) end the run at once with one line and
    the signal's status, and remove the directories this run made for `out` (`remove_made`). A report being
    written is discarded (outputs.py: its files are put in place together or not at all). A directory that was
    there before is the user's and stays.

    Ended with `os._exit` from the handler, not an exception: simulating is plain computation with nothing to
    close, and an exception raised inside one of an import's callbacks is printed and lost (see `main`)."""

    def stop(signum: int, frame: object) -> None:
        discard(out, OUTPUTS)  # the files of a report being written: none is put in place
        remove_made(made)
        sys.stderr.write("\ninterrupted.\n" if signum == signal.SIGINT else "\nterminated.\n")
        sys.stderr.flush()
        os._exit(128 + signum)

    with contextlib.suppress(ValueError):  # not the main thread (a test calling run_simulate): nothing to take over
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)


def closed_pipe() -> int:
    """A reader that stopped (`simulate ... | head -1`): no word and 128 + SIGPIPE, as a tool killed by SIGPIPE
    ends (`yes | head`). It was a BrokenPipeError traceback and status 1 although the report had been written.
    stdout is pointed at devnull (Python's own recipe, docs "Note on SIGPIPE") so that the flush at exit does
    not fail again and print "Exception ignored"."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 128 + signal.SIGPIPE
