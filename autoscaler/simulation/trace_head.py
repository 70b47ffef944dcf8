"""A trace file's packing, text and header, checked before numpy and the simulator's modules are imported.

Most refusals of a trace file are told by its first bytes or its header row: a packed file, one that is not
UTF-8, a header without the columns a trace needs (and the advice of what the columns may be). Told by
`read_csv` once numpy and the simulator had been imported, each cost a quarter of a CPU-second more than it
needs, and where the `simulate` extra is not installed the user was sent to install numpy before being told
that the file they gave could never be read.
"""

from __future__ import annotations

import contextlib
import csv
import os
import stat
from collections.abc import Iterator

from autoscaler.simulation.standard_input import STDIN
from autoscaler.simulation.trace_file import TraceError, columns, minute_columns, numbered_rows
from autoscaler.simulation.trace_opening import gzipped, not_utf8, text_of, unpacking, with_head


def sampled(first: tuple[int, list[str]] | None, numbered: Iterator[tuple[int, list[str]]]) -> Iterator[list[str]]:
    """The rows a refused header's advice reads to tell which columns hold numbers (`header_advice`), read only
    for a refusal: `first`, then the rest until a row that cannot be read, whose error would hide the header's."""
    if first is None:
        return
    yield first[1]
    with contextlib.suppress(TraceError, UnicodeDecodeError, csv.Error):
        for _, row in numbered:
            yield row


def check_head(path: str | os.PathLike[str]) -> None:
    """Raise the TraceError `read_csv` raises first for the file at `path` where its first bytes or header tell
    it, the same words. Only a regular file is read twice: standard input, a FIFO or `<(zcat ...)` is read once,
    by `read_csv` (opened here and closed, a process substitution's writer would die of a closed pipe), as is a
    path that cannot be looked at (`read_csv` says why)."""
    name = os.fspath(path)
    try:
        if name == STDIN or not stat.S_ISREG(os.stat(name).st_mode):
            return
    except OSError:
        return
    try:
        with unpacking(name), open(name, "rb") as opened:
            head, raw = with_head(opened)
            with text_of(raw, gzipped=gzipped(name, head)) as fh:
                numbered = numbered_rows(csv.reader(fh))
                header = next(numbered, None)
                if header is not None and minute_columns(header[1]) is not None:  # a per-minute table
                    return
                first = next(numbered, None)
                columns(header[1] if header else None, name, sampled(first, numbered))
    except OSError as exc:
        raise TraceError(f"{name}: cannot read trace: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise TraceError(not_utf8(name)) from exc
