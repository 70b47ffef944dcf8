"""The words that start this program again, for a command the report prints for the user to paste.

The advice's compare command began `modelmesh-autoscaler simulate`, a name found only on the PATH of a shell with
the virtual environment activated: pasted into a fresh shell, bash answered "command not found". Every other
path in that command is absolute already, so the program is named by its absolute path too: the script this run
was started as, else the one installed beside this Python, else this Python with `-m autoscaler.cli`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from autoscaler.cli import PROG


def program() -> list[str]:
    """This program's command, as words of a command line, runnable from any folder and without the venv's PATH:
    not the bare name, which runs another install's (or nothing) there."""
    started = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if started is not None and started.name == PROG and started.is_file():  # the console script, as typed
        return [str(started.absolute())]
    python = Path(sys.executable).absolute()
    beside = python.parent / PROG  # `python -m autoscaler.cli` in a venv that has the script too
    if beside.is_file():
        return [str(beside)]
    return [str(python), "-m", "autoscaler.cli"]
