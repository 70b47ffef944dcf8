"""Where a trace file's bytes come from: gzip read as it is (`.gz`, or a `.csv` whose first bytes are gzip's), a
byte-order mark skipped, UTF-16 and code-page text refused naming how to save it, xz, bzip2 and zip refused naming
the tool that unpacks them, and what gzip raises mid-read said as a `TraceError` naming the file. trace.py,
trace_head.py and request_log.py open their files through it.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import stat
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, BinaryIO, Final, TextIO

from autoscaler.simulation.trace_error import TraceError

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

__all__ = ["begins_as_gzip", "gzipped", "known_size", "not_utf8", "open_csv", "packed_text", "text_of", "unpacking",
           "with_head"]


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
