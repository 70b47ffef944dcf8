"""Rows and cells whose requests are written empty, NaN or null, as Grafana's and pandas' CSV exports write a lost
scrape: read as no row, counted and said once with their first lines (`LostScrapes`, and the words a per-minute
table's cells share: `lost_note`, `never_valued`, `lost_refusal`); a file of nothing else is refused.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import numpy as np

    from autoscaler.simulation.lost_cells import LostCells
    from autoscaler.simulation.trace import Trace

__all__ = ["LOST_LINES_SHOWN", "LostScrapes", "lost_note", "lost_refusal", "never_valued"]


LOST_LINES_SHOWN: Final = 5
"""Lines of rows without a requests value named in the warning (then "..."): enough to open the file at."""


def lost_note(lost: int, total: int, unit: str, where: str, named: str, none: str) -> str:
    """The one warning for requests written empty, NaN or null, in the same words for a trace's rows and a per-minute
    table's cells (`unit`): `lost` of `total`, `where` (their first lines, and how many are beside a value or off
    the step), `named` (the models with none other), and `none` (what to write where there was no traffic)."""
    return (f"{lost:,} of {total:,} {unit}s have requests empty, NaN or null ({where}), as Grafana and pandas write "
            f"lost scrapes: read as no row, so their models replay no requests in those intervals{named}. Where "
            f"traffic went on there, fill them (the model's value in the {unit} before, say) and run again; where "
            f"there was none, {none}")


def never_valued(counts: Counter[str], valued: Collection[str], unit: str) -> str:
    """The clause naming the models of `counts` (lost cells by model) without a value anywhere (not in `valued`):
    they replay none, which went without a word."""
    unread = sorted(model for model in counts if model not in valued)
    named = "".join(f"; model {model!r} has no {unit} with requests (all {counts[model]:,} of its {unit}s), so it "
                    "replays none" for model in unread[:LOST_LINES_SHOWN])
    if len(unread) > LOST_LINES_SHOWN:
        named += f", nor have {len(unread) - LOST_LINES_SHOWN:,} more models"
    return named


def lost_refusal(name: str, unit: str, count: int, where: str) -> str:
    """The error for a trace, or a table, whose every `unit` (row, cell) is written empty, NaN or null."""
    return (f"{name}: every {unit}'s requests is empty, NaN or null ({count:,} {unit}{'s' if count > 1 else ''}: "
            f"{where}): nothing to replay; fill them with the requests of each interval")


class LostScrapes:
    """Rows whose requests cell is empty, NaN or null: how Grafana's and pandas' CSV exports write a point that has
    no value, a scrape that was lost. They are read as no row, and said once with their count and first lines.
    Refused at the first, a user learnt of one line and nothing of how many or what to write, and would then
    drop them all, which is what reading them as no row does; the warning tells those who would rather fill
    them, and a trace that is nothing but such rows is refused (`refusal`). Such a row decides nothing of the
    trace: one beside a value of its model and time (Grafana merging two series, one of which lost the scrape)
    leaves the value, and one off the step (a series scraped at its own offset) is counted, not refused for its
    time; their timestamps state a step where the rows with requests alone state none (lost_readings.py: the one lost
    scrape a step after the first row of a sparse export), and a finer one only where they fill its grid
    (lost_grid.py: a 60 s export with every other scrape lost). A model whose every row is one is named: it went
    without a word."""

    def __init__(self) -> None:
        self.lines: list[int] = []
        self.times: list[float] = []
        self.models: list[str] = []

    @staticmethod
    def holds(cell: str) -> bool:
        """Whether a requests cell is empty, NaN (any case, as `float` reads it) or Grafana's null."""
        text = cell.strip().lower()
        return not text or text.lstrip("+-") == "nan" or text == "null"

    def add(self, line: int, time: float, model: str) -> None:
        self.lines.append(line)
        self.times.append(time)
        self.models.append(model.strip())

    def _placed(self, trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Each row's interval in `trace`, its model's index (-1: none other), whether it is on the trace's step and
        whether a row with requests of its model and interval is there too."""
        import numpy as np

        position = (np.asarray(self.times) - trace.start_s) / trace.interval_s
        slot = np.rint(position).astype(np.int64)
        on_step = np.abs(position - slot) <= 1e-6
        index = {name: i for i, name in enumerate(trace.models)}
        model = np.fromiter((index.get(name, -1) for name in self.models), dtype=np.int64, count=len(self.models))
        width = len(trace.models) + 1
        beside = on_step & (model >= 0) & np.isin(slot * width + model, trace.slot * width + trace.model)
        return slot, model, on_step, beside

    def cells(self, trace: Trace) -> LostCells:
        """Where these rows fall in `trace`: a Grafana export's lost scrapes are also intervals without a row,
        and were warned about twice, as NaN and as missing; the checks for missing rows count them as rows. Those
        beside a value, or off the step, are no interval without a row."""
        import numpy as np

        from autoscaler.simulation.lost_cells import NO_CELLS, LostCells

        if not self.lines:
            return NO_CELLS
        slot, model, on_step, beside = self._placed(trace)
        on = on_step & ~beside & (slot >= 0) & (slot < trace.intervals)
        return LostCells(slot[on], model[on], np.asarray(self.lines, dtype=np.int64)[on])

    def _where(self) -> str:
        shown = ", ".join(map(str, self.lines[:LOST_LINES_SHOWN]))
        more = ", ..." if len(self.lines) > LOST_LINES_SHOWN else ""
        return f"line{'s' if len(self.lines) > 1 else ''} {shown}{more}"

    def notes(self, rows_read: int, trace: Trace) -> list[str]:
        """The warning for `trace`, read with `rows_read` rows besides these (none where there were none of
        these): how many are beside a value of their model and time, or off the trace's step, said there."""
        if not self.lines:
            return []
        _, _, on_step, beside = self._placed(trace)
        where = self._where()
        if count := int(beside.sum()):
            where += f"; {count:,} of them beside a value of the same model and time, which stands"
        if count := int((~on_step).sum()):
            where += f"; {count:,} of them off the trace's {trace.interval_s:g} s step"
        lost = len(self.lines)
        return [lost_note(lost, lost + rows_read, "row", where, never_valued(Counter(self.models), trace.models, "row"),
                          "write 0 or drop those rows")]

    def refusal(self, name: str) -> str | None:
        """The error for a trace whose every row is of these (None where there were none)."""
        if not self.lines:
            return None
        return lost_refusal(name, "row", len(self.lines), self._where())
