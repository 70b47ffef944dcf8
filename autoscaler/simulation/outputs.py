"""The report's files appear together or not at all.

`simulate` writes report.json, report.md and timeline.png in --out, often over an earlier run's. Written one
after another in place, a Ctrl-C (or a failure) while the plot was drawn left this run's report beside the
earlier run's plot, read as one run's, or in a new directory a report without its plot. Each file is now
written under a partial name in --out (the same directory, so a rename puts it in place at once), and all are
renamed into place only once all are written, with Ctrl-C and SIGTERM held off for the renames; whatever
stops the writing first leaves the partial files to remove (`discard`), and the earlier files as they were.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path


def partial(out: Path, name: str) -> Path:
    """Where `name` is written before it is put in place: a hidden name of the same suffix (matplotlib picks
    the plot's format by it), fixed, so that a signal handler knows what to remove without being told."""
    path = Path(name)
    return out / f".{path.stem}.partial{path.suffix}"


def discard(out: Path, names: tuple[str, ...]) -> None:
    """Remove the partial files of `names` in `out`, where there are any: a run stopped while writing."""
    for name in names:
        with contextlib.suppress(OSError):  # gone with its directory, or not ours: nothing a stopping run can do
            partial(out, name).unlink(missing_ok=True)


@contextmanager
def signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM held until the block ends (then handled): the renames are done all or none."""
    held = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)


def write_together(out: Path, writers: Mapping[str, Callable[[Path], None] | None]) -> None:
    """Write each file of `writers` (its name in `out` -> what writes it at the path given), then put them all
    in place; a name whose writer is None is removed (an earlier run's plot beside a --no-plot run's report
    would be read as this run's). Anything raised while writing leaves `out` as it was."""
    names = tuple(writers)
    try:
        for name, write in writers.items():
            if write is not None:
                write(partial(out, name))
        with signals_held():
            for name, write in writers.items():
                if write is None:
                    (out / name).unlink(missing_ok=True)
                else:
                    os.replace(partial(out, name), out / name)
    finally:
        discard(out, names)
