"""Reading a trace file: where its bytes come from and what one field may hold.

A trace is CSV with the header `timestamp_s,model,requests`, its columns found by name in any order (others
left out and named); gzip is read as it is (`.gz`, or a `.csv` whose first bytes are gzip's: a download saved
without unpacking), a byte-order mark (Excel's "CSV UTF-8") skipped, UTF-16 and code-page text refused naming
how to save it, xz, bzip2 and zip refused naming the tool that unpacks them. Each error names the file, the
line and what to fix (`TraceError`). trace.py turns the rows into a `Trace`; request_log.py reads per-request
logs with the same opening rules.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import math
import os
import re
import stat
import zlib
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, BinaryIO, Final, TextIO

from autoscaler.simulation.header_advice import header_advice
from autoscaler.simulation.timestamps import SECONDS_PER_YEAR, parse_time
from autoscaler.simulation.trace_error import TraceError as TraceError  # its importers keep their import

if TYPE_CHECKING:
    import numpy as np
    from _typeshed import WriteableBuffer

    from autoscaler.simulation.lost_cells import LostCells
    from autoscaler.simulation.trace import Trace

HEADER: Final = ("timestamp_s", "model", "requests")
MIN_INTERVAL_S: Final = 1.0
MAX_INTERVAL_S: Final = 600.0
PROGRESS_ROWS: Final = 1 << 16
"""Rows between two progress reports while reading a trace or a request log."""


def by_name(models: tuple[str, ...], model: np.ndarray) -> tuple[tuple[str, ...], np.ndarray]:
    """`models` sorted by name and each row's index into them (`model`) renumbered to match. Numbered as they
    first appeared in the file, models of equal load were routed and placed in file order: the same rows sorted
    by time or by series gave different reports (fixed-max's delays, the bound, 14% apart)."""
    import numpy as np  # here, not above: a file refused by its header is told before numpy is imported

    named = sorted(range(len(models)), key=models.__getitem__)
    renumbered = np.empty(len(models), dtype=np.int64)
    renumbered[named] = np.arange(len(models), dtype=np.int64)
    return tuple(models[i] for i in named), renumbered[model]


def number_field(text: str, what: str, where: str, unit: str = "") -> float:
    try:
        value = float(text)
    except ValueError:
        raise TraceError(f"{where}: {what} must be a number{unit}, got {text!r}{comma_hint(text)}") from None
    if not math.isfinite(value):
        raise TraceError(f"{where}: {what} must be finite, got {text!r}")
    return value


THOUSANDS: Final = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?")
DECIMAL_COMMA: Final = re.compile(r"[+-]?\d*,\d+")


def comma_hint(text: str) -> str:
    """Why a number with a comma in it is none, and how to save it, for a spreadsheet's locale: '2,743' (a
    thousands separator, or a decimal comma where 2.743 is meant) and '192,5' (a decimal comma) read "must be a
    number", which named no cause. Empty where the text is neither."""
    text = text.strip()
    if THOUSANDS.fullmatch(text):
        either = f", or a decimal comma ({text.replace(',', '.')})" if text.count(",") == 1 else ""
        cause = f"a thousands separator ({text.replace(',', '')}){either}"
    elif DECIMAL_COMMA.fullmatch(text):
        cause = f"a decimal comma ({text.replace(',', '.')})"
    else:
        return ""
    return (f": the comma is likely {cause}, as a spreadsheet writes numbers for its locale: save the numbers "
            "without thousands separators and with '.' for decimals (Excel: Format Cells, Number, without "
            "1000 Separator; the system's decimal separator '.'; pandas: read_csv(..., thousands=',') or "
            "decimal=',', then to_csv)")


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
    time; their timestamps state a step where the rows with requests alone state none (trace.py: the one lost
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


LATEST_S: Final = 1e13
"""Seconds past the year 300,000: a timestamp_s this large is of a finer unit (epoch milliseconds, the one
finer unit read as seconds and named by the interval they make, are under it) or no time at all."""
FINER: Final = ((1e17, "nanoseconds", 1_000_000_000), (1e14, "microseconds", 1_000_000))


def timestamp_field(text: str, where: str) -> float:
    try:
        value = parse_time(text)
    except ValueError:
        raise TraceError(f"{where}: timestamp_s must be seconds since the epoch or an ISO 8601 date-time, "
                         f"got {text!r}{_date_hint(text) or comma_hint(text)}") from None
    if abs(value) < LATEST_S:
        return value
    # Epoch microseconds read "timestamps are 6e+07 s apart: export at a step of 10 min or less", and a stray
    # 1e300 overflowed the interval's arithmetic (numpy's RuntimeWarning, then a step of 5e+299 s to round to)
    for least, unit, per_second in FINER:
        if least <= abs(value) < least * 1000:
            raise TraceError(f"{where}: timestamp_s {text.strip()} is the year "
                             f"{1970 + int(value / SECONDS_PER_YEAR):,} as seconds since the epoch: these look like "
                             f"{unit}; divide timestamp_s by {per_second}")
    raise TraceError(f"{where}: timestamp_s {text.strip()} is past the year 300,000 as seconds since the epoch: "
                     "write seconds since the epoch or since the trace's start")


def _date_hint(text: str) -> str:
    """How to write a date as a spreadsheet shows it (12/1/2025 0:00, 01.12.2025): which of day and month comes
    first is the locale's, so an example of the form, not a reading of the value."""
    if "/" not in text and text.count(".") < 2:
        return ""
    return (": write the date-time as ISO 8601, such as 2025-12-01T00:00:00 for 1 December 2025 (Excel: Format "
            "Cells, Custom, yyyy-mm-ddThh:mm:ss, before saving), or as seconds since the epoch")


GZIP_MAGIC: Final = b"\x1f\x8b"
UTF16_MARKS: Final = (b"\xff\xfe", b"\xfe\xff")


def gzipped(name: str, head: bytes) -> bool:
    """Whether to read the file through gzip: by its name, or by its first bytes where the name says `.csv`
    (a download saved without unpacking read as "not UTF-8 text (invalid start byte)"). UTF-16 (Excel's
    "Unicode Text", PowerShell's Out-File) is refused saying how to save it, rather than as not UTF-8."""
    if head[:2] in UTF16_MARKS:
        raise TraceError(f"{name}: UTF-16 text, not UTF-8: save it as CSV UTF-8 (PowerShell: Out-File -Encoding "
                         "utf8)")
    return name.endswith(".gz") or head[:2] == GZIP_MAGIC


def begins_as_gzip(name: str) -> bool:
    """Whether the file's first bytes are gzip's (False where it cannot be read: what opened it says why)."""
    try:
        with open(name, "rb") as raw:
            return raw.read(2) == GZIP_MAGIC
    except OSError:
        return False


@contextlib.contextmanager
def unpacking(path: str | os.PathLike[str]) -> Iterator[None]:
    """Turn what gzip raises while a file is read into a TraceError naming the file and what to do, the same
    for every reader (a trace, a request log, a per-minute table). A byte flipped in the deflate stream raised
    zlib.error, a traceback, and a CRC that did not match read "not a gzip file": a `.gz` that begins as gzip
    does is gzip, damaged; only one that does not is "not a gzip file". A file not named .gz is read as gzip
    for its first bytes only, so it may be neither: it is "not UTF-8 text" that does not unpack."""
    try:
        yield
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        name = os.fspath(path)
        why = "cut short?" if isinstance(exc, EOFError) else str(exc)
        if not name.endswith(".gz"):
            raise TraceError(f"{name}: not UTF-8 text: it begins as gzip does, but does not unpack ({why})") from exc
        if isinstance(exc, EOFError):
            raise TraceError(f"{name}: the gzip file ends early (cut short?)") from exc
        if begins_as_gzip(name):
            raise TraceError(f"{name}: a damaged gzip file ({exc}): copy or download it again") from exc
        raise TraceError(f"{name}: not a gzip file ({exc}); name it .csv if it is plain text") from exc


def open_csv(path: str | os.PathLike[str]) -> TextIO:
    """A CSV file for `csv.reader`: gzip read as it is (`.gz`, or its first bytes), a byte-order mark (Excel's
    "CSV UTF-8") skipped."""
    with open(path, "rb") as raw:
        head = raw.read(2)
    if gzipped(os.fspath(path), head):
        return gzip.open(path, "rt", newline="", encoding="utf-8-sig")
    return open(path, newline="", encoding="utf-8-sig")


PACKED: Final = ((b"\xfd7zXZ\x00", "an xz file", "xz -d"), (b"BZh", "a bzip2 file", "bunzip2"),
                 (b"PK\x03\x04", "a zip archive", "unzip"))
"""First bytes of the packed formats traces ship in besides gzip (Azure Functions 2019 is a .tar.xz), what
each is, and the tool that unpacks it."""


def packed_text(name: str, head: bytes) -> str | None:
    """The error for a file that `head`, its first bytes, show packed in a format read only once unpacked:
    it read "line 1: not UTF-8 text (invalid start byte at b'\\xfd'): save it as CSV UTF-8", advice for Excel's
    code pages that sent the user to re-save an archive."""
    for magic, what, tool in PACKED:
        if head.startswith(magic):
            if ".tar." in name:  # a tarball: unpacked, still an archive of files
                unpack, made = f"tar -xf {name}", "a CSV file in it"
            else:
                unpack, made = f"{tool} {name}", "the CSV file in it" if tool == "unzip" else "the file it makes"
            return f"{name}: {what}, not CSV: unpack it first ({unpack}) and give {made}"
    return None


def not_utf8(name: str) -> str:
    """The error for a file that is not UTF-8, naming its first line that is not (Excel's plain "CSV" writes
    the locale's code page: a model named café was "not UTF-8 text (invalid continuation byte)", somewhere),
    or the format it is packed in (`packed_text`)."""
    try:
        with open(name, "rb") as raw:
            head = raw.read(len(PACKED[0][0]))
            if said := packed_text(name, head):
                return said
            packed = gzipped(name, head)
            raw.seek(0)
            lines: Iterator[bytes] = iter(gzip.GzipFile(fileobj=raw) if packed else raw)  # closed with raw
            for line, text in enumerate(lines, start=1):
                try:
                    text.decode("utf-8")
                except UnicodeDecodeError as exc:
                    return (f"{name}: line {line}: not UTF-8 text ({exc.reason} at {text[exc.start:exc.end]!r}): "
                            "save it as CSV UTF-8")
    except (OSError, EOFError, zlib.error):  # damaged past the line that is not UTF-8: that line is not found
        pass
    return f"{name}: not UTF-8 text: save it as CSV UTF-8"


def columns(header: list[str] | None, name: str,
            rows: Iterable[Sequence[str]] = ()) -> tuple[int, int, int, tuple[str, ...]]:
    """Where timestamp_s, model and requests are in the header row, and the other columns, in words: exports
    keep columns a trace does not need (pandas its index, unnamed), which are left out. `rows`, those after the
    header, tell the advice of a refusal which columns hold numbers (`header_advice`); they are read only for a
    refusal."""
    if header is None:
        raise TraceError(f"{name}: empty file; expected the header {','.join(HEADER)}")
    found = [h.strip().lower() for h in header]
    for separator, words in ((";", "';'"), ("\t", "tabs")):
        if len(found) == 1 and separator in found[0]:
            raise TraceError(f"{name}: line 1: fields are separated by {words}, not commas: save the file as "
                             "comma-separated CSV")
    problems = [f"missing {column}" for column in HEADER if column not in found]
    problems += [f"{column} listed twice" for column in HEADER if found.count(column) > 1]
    if problems:
        advice = header_advice(header, name, rows) or ("or a per-minute table: a row per model, then columns named "
                                                      "1, 2, ... for its minutes")
        raise TraceError(f"{name}: line 1: expected the header {','.join(HEADER)} (in any order, other columns "
                         f"left out), got {','.join(header)!r}: {'; '.join(problems)}; {advice}")
    at_time, at_model, at_requests = (found.index(column) for column in HEADER)
    others = tuple(repr(header[i].strip()) if column else "an unnamed one (pandas' index)" if i == 0 else
                   "an unnamed one" for i, column in enumerate(found) if column not in HEADER)
    return at_time, at_model, at_requests, others


def minute_columns(header: Sequence[str]) -> tuple[int, int] | None:
    """Where the minute columns are, [start, end), if the header ends in columns named 1, 2, ... N (N >= 2) after
    at least one other column (the model's), empty names after them left out (a spreadsheet's trailing comma);
    None for any other header."""
    names = [h.strip() for h in header]
    end = len(names)
    while end > 0 and not names[end - 1]:
        end -= 1
    start = end
    while start > 0 and names[start - 1].isdigit():
        start -= 1
    minutes = names[start:end]
    if start == 0 or len(minutes) < 2 or minutes != [str(k) for k in range(1, len(minutes) + 1)]:
        return None
    return start, end


def numbered_rows(reader: Iterator[list[str]]) -> Iterator[tuple[int, list[str]]]:
    """Each row with the file line it starts on: blank lines and quoted fields spanning lines (a model name
    with a newline) make that differ from the row's index, and a user opens the file at the line we name."""
    line = 1
    for row in reader:
        yield line, row
        line = getattr(reader, "line_num", line) + 1


class _HeadFirst(io.RawIOBase):
    """A pipe whose first bytes were read to tell what it holds, those bytes put back in front of the rest."""

    def __init__(self, head: bytes, rest: io.BufferedReader) -> None:
        self._head, self._rest = head, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        if self._head:
            count = min(len(view), len(self._head))
            view[:count], self._head = self._head[:count], self._head[count:]
            return count
        return self._rest.readinto1(view)  # one read at most: rows are parsed as the pipe brings them


def with_head(raw: io.BufferedReader, size: int = 2) -> tuple[bytes, io.BufferedReader]:
    """The stream's first `size` bytes (fewer only at its end), and the stream to read from its start. `peek`
    does one read, and one read of a pipe may bring a single byte (a slow writer: a download, `ssh host zcat`):
    a gzip trace piped in was told by one byte and read as text, "not UTF-8". A file is sought back; a pipe's
    bytes are put back in front of the rest."""
    start = raw.tell() if raw.seekable() else None
    head = raw.read(size)  # a buffered read of `size` waits for them, or the end
    if start is None:
        return head, io.BufferedReader(_HeadFirst(head, raw))
    raw.seek(start)
    return head, raw


def known_size(raw: io.BufferedReader) -> int | None:
    """The file's size where it is a file; None for a pipe, standard input or one named by its path (`--trace
    /dev/stdin`, bash's `<(zcat day.csv.gz)`, a FIFO), whose size reads 0 and which cannot say where it is
    (`tell()`: "Illegal seek"): no progress there, nor estimate of its rows."""
    status = os.fstat(raw.fileno())
    return status.st_size if stat.S_ISREG(status.st_mode) else None


def text_of(raw: BinaryIO, gzipped: bool) -> TextIO:
    """`open_csv`'s text over a file already open, so that its byte position can be read as it is parsed."""
    if gzipped:
        return gzip.open(raw, "rt", newline="", encoding="utf-8-sig")
    return io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")
