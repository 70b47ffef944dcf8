"""Reading a per-minute table: a row per model, then a column per minute named 1, 2, ... N.

Azure Functions' public trace comes this way, a file a day (`invocations_per_function_md.anon.d01.csv`:
HashOwner, HashApp, HashFunction, Trigger, then 1 .. 1440 with the invocations of each minute), and so do
spreadsheets of per-minute counts. Refusing it for its header made every user write the same reshaping
code; trace.py reads it as the trace it is: minute k of the file is the interval starting at (k - 1) * 60 s.
The model is the `HashFunction` column where there is one (Azure hashes a function's name with its app, so it
names one function), else the first column. A function under two triggers is on two rows: they are one
model, their requests added up, and said so. A cell written empty, NaN or null (pandas' and Grafana's exports of
such a table with gaps) is a lost scrape, read as no row and said in one warning, as a trace's rows are
(lost_scrapes.LostScrapes): it refused the table at its first.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from autoscaler.simulation.lost_scrapes import LOST_LINES_SHOWN, LostScrapes, lost_note, lost_refusal, never_valued
from autoscaler.simulation.trace_file import TraceError, by_name, number_field

MINUTE_S: Final = 60.0
MODEL_COLUMN: Final = "hashfunction"
"""The model's column where present (any case): Azure Functions' function id."""
MANY_MODELS: Final = 5000
"""Past this many models a replay takes minutes; the note names the converter that keeps the busiest."""
READ_AS: Final = "read as a per-minute table"
"""How the first note begins: the converter, which reads nothing else, leaves it out."""
MANY: Final = "models take minutes to replay"
"""In the note past MANY_MODELS: the converter leaves it out where --top is given."""


@dataclass(frozen=True, slots=True)
class MinuteRows:
    """A table's non-zero cells as trace rows: minute index (from 0), model index into `models`, requests."""

    models: tuple[str, ...]
    minutes: int
    slot: np.ndarray
    model: np.ndarray
    requests: np.ndarray
    notes: tuple[str, ...]


class LostMinutes:
    """A table's cells written empty, NaN or null: how many, the first few (line and minute), and each model's
    count, for the one warning (`lost_note`) or the refusal of a table of nothing else."""

    def __init__(self) -> None:
        self.count = 0
        self.shown: list[str] = []
        self.by_model: Counter[str] = Counter()
        self.valued: set[str] = set()  # models with a cell that is a count

    def add(self, line: int, model: str, lost: np.ndarray) -> None:
        """The cells of one row (`lost`: which are lost scrapes)."""
        if len(lost) > (here := int(lost.sum())):
            self.valued.add(model)
        if not here:
            return
        self.count += here
        self.by_model[model] += here
        for minute in np.flatnonzero(lost)[:LOST_LINES_SHOWN - len(self.shown)].tolist():
            self.shown.append(f"line {line}: minute {minute + 1}")

    def _where(self) -> str:
        return ", ".join(self.shown) + (", ..." if self.count > len(self.shown) else "")

    def notes(self, cells: int) -> list[str]:
        """The warning for a table of `cells` cells (none where none is lost)."""
        if not self.count:
            return []
        return [lost_note(self.count, cells, "cell", self._where(), never_valued(self.by_model, self.valued, "cell"),
                          "write 0")]

    def refusal(self, name: str) -> str:
        return lost_refusal(name, "cell", self.count, self._where())


def read_minutes(numbered: Iterator[tuple[int, list[str]]], header: Sequence[str], span: tuple[int, int],
                 name: str, report: Callable[[int], None] | None = None, every: int = 1 << 10,
                 all_zero_ok: bool = False) -> MinuteRows:
    """The table's cells after its header (`numbered`: rows with their file lines; `span`: its minute columns,
    `minute_columns(header)`); TraceError names the line and minute of the first cell that is not a count.
    `report(cells)` every `every` rows, with the cells with requests read so far (the trace's rows). A table of
    nothing but 0 is refused unless `all_zero_ok` (a quiet day among others the converter joins)."""
    first, end = span
    lowered = [h.strip().lower() for h in header]
    at_model = lowered.index(MODEL_COLUMN) if MODEL_COLUMN in lowered else 0
    width, minutes = len(header), end - first
    # Packed buffers grown in place (a day of 46,000 functions is 16 M cells with requests): kept as a list of
    # arrays a row, then joined, the day took twice the memory at the end
    slots, models, counts = array("q"), array("q"), array("d")
    row_models = array("q")  # each row's model: which are on more than one row
    index: dict[str, int] = {}
    lost = LostMinutes()
    rows = 0
    for line, row in numbered:
        if len(row) != width:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            raise TraceError(f"{name}: line {line}: expected {width} fields, as in the header, got {len(row)}")
        label = row[at_model].strip()
        if not label:
            raise TraceError(f"{name}: line {line}: {header[at_model].strip()} (the model) is empty")
        cells = _counts(row[first:end], f"{name}: line {line}")
        lost_here = np.isnan(cells)
        lost.add(line, label, lost_here)
        busy = np.flatnonzero(cells > 0)  # NaN, a lost scrape, is no row
        at = index.setdefault(label, len(index))
        row_models.append(at)
        slots.frombytes(busy.astype(np.int64).tobytes())
        models.frombytes(np.full(len(busy), at, dtype=np.int64).tobytes())
        counts.frombytes(cells[busy].tobytes())
        rows += 1
        if report is not None and not rows % every:
            report(len(slots))
    if not rows:
        raise TraceError(f"{name}: no rows after the header")
    slot, model = np.frombuffer(slots, dtype=np.int64), np.frombuffer(models, dtype=np.int64)
    requests = np.frombuffer(counts)
    if not len(requests) and not all_zero_ok:
        if lost.count == rows * minutes:
            raise TraceError(lost.refusal(name))
        lost_too = f", {lost.count:,} of them empty, NaN or null" if lost.count else ""
        raise TraceError(f"{name}: every cell is 0 ({rows:,} row{'s' if rows > 1 else ''} of {minutes:,} minutes"
                         f"{lost_too}): nothing to replay")
    notes = [f"{READ_AS} (a row per model and a column per minute, as Azure Functions' trace "
             f"comes): {len(index):,} models from column {header[at_model].strip()!r}, {minutes:,} minutes"]
    notes += lost.notes(rows * minutes)
    if rows > len(index):
        slot, model, requests = _added_up(slot, model, requests, len(index))
        repeated = int((np.bincount(np.frombuffer(row_models, dtype=np.int64)) > 1).sum())
        notes.append(f"{repeated:,} model{' is' if repeated == 1 else 's are'} on more than one row (a function "
                     "under two triggers): their requests are added up")
    if len(index) > MANY_MODELS:
        notes.append(f"{len(index):,} {MANY}; python -m autoscaler.simulation.minute_table "
                     f"{name} --top 500 --out trace.csv keeps the 500 busiest")
    names, model = by_name(tuple(index), model)  # the rows' order in the file changes nothing
    order = np.lexsort((model, slot))
    return MinuteRows(names, minutes, slot[order], model[order], requests[order], tuple(notes))


def _counts(cells: list[str], where: str) -> np.ndarray:
    """The row's counts, NaN for a cell written empty, NaN or null (a lost scrape); TraceError names the minute of
    the first cell that is neither."""
    try:  # a whole row at once; a row numpy refuses goes the long way, which names the cell's minute
        values = np.asarray(cells, dtype=np.float64)
        if np.isfinite(values).all() and (values >= 0).all():
            return values
    except ValueError:
        pass
    values = np.empty(len(cells))
    for minute, text in enumerate(cells, start=1):
        if LostScrapes.holds(text):
            values[minute - 1] = np.nan
            continue
        values[minute - 1] = number_field(text, "requests", f"{where}: minute {minute}")
        if values[minute - 1] < 0:
            raise TraceError(f"{where}: minute {minute}: requests must be >= 0, got {text!r}")
    return values


def _added_up(slot: np.ndarray, model: np.ndarray, requests: np.ndarray,
              models: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One row per (minute, model): a model on several rows has its cells summed."""
    keys, where = np.unique(slot * models + model, return_inverse=True)
    sums = np.bincount(where, weights=requests, minlength=len(keys))
    return keys // models, keys % models, sums
