"""ModelMesh's answer decoded as it arrives, into pieces of whole lines, so that its bytes and its text are not held
both at once.

The answer may be up to 32 MiB (`collectors.modelmesh.MAX_BODY_BYTES`). Read whole into bytes and decoded at the
end, it was held twice, as bytes and as text, 64 MiB at the cap, at the point where the exporter also holds the
last reading (and, a scrape just after a read, the render of every model's series). Here each chunk of bytes is
decoded as it comes and dropped, and the text is cut after the last newline of a chunk into pieces of some
`PIECE_CHARS`, which the narrow reader reads one after the other as if joined (`NarrowReader.series`): the text is
held once. Only the library's fallback joins them (a body the narrow reader does not know, rare).
"""

from __future__ import annotations

import codecs
from typing import Final

from exporter.modelmesh_fast import SCAN_CHARS

PIECE_CHARS: Final = SCAN_CHARS
"""About how much text a piece holds: what the narrow reader reads in one call, so a piece is one call."""


class BodyPieces:
    """Bytes in (`add`), text out (`pieces`): whole lines per piece but for the last, decoded as `encoding`
    strictly (a byte that is not of it raises UnicodeDecodeError, as `bytes.decode` does)."""

    def __init__(self, encoding: str) -> None:
        self._decoder = codecs.getincrementaldecoder(encoding)()
        self.pieces: list[str] = []
        self._pending: list[str] = []
        """Text decoded since the last piece was cut: no newline ends it yet, or it is shorter than a piece."""
        self._pending_chars = 0
        self.chars = 0
        """The text's length so far."""

    def add(self, chunk: bytes) -> None:
        """Decode one chunk of the body; a piece is cut where the text since the last one is long enough."""
        text = self._decoder.decode(chunk)
        self.chars += len(text)
        self._pending_chars += len(text)
        if self._pending_chars < PIECE_CHARS:
            self._pending.append(text)
            return
        end = text.rfind("\n") + 1
        if not end:  # no line ends in this chunk: the piece waits for one that does
            self._pending.append(text)
            return
        self._pending.append(text[:end])
        self.pieces.append("".join(self._pending))
        self._pending = [text[end:]] if end < len(text) else []
        self._pending_chars = len(text) - end

    def end(self) -> list[str]:
        """The pieces, the rest of the text last (a body whose last byte is a newline ends with a whole line)."""
        self._pending.append(self._decoder.decode(b"", final=True))
        rest = "".join(self._pending)
        self._pending = []
        if rest:
            self.pieces.append(rest)
        return self.pieces
