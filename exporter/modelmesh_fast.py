"""A narrow, strict reader of the few samples the exporter reads from ModelMesh's text, with `prometheus_client`'s
parser behind it.

With ModelMesh's per-model metrics on, the exporter reads a series per model, method and code every
`--modelmesh-interval` in every pod: `prometheus_client`'s text parser, which walks each line character by
character in Python, cost 320 M instructions a read at 200 models (docs/performance.md), the sidecar's main CPU
cost. The writer is known (simpleclient 0.9's `TextFormat.write004` in the `mm` container: `# HELP`/`# TYPE`,
`name{label="value",...} value`, a comma after every label, Java's doubles), so a narrow reader is enough:
regular expressions accepting exactly those shapes for the lines the library would see (a comment, or a sample
of a series read), label values with no escapes but the format's three (`\\\\`, `\\"`, `\\n`: a model's id may hold
them), plain decimal numbers. Anything else on such a line (another escape, odd spacing, a timestamp, an
exemplar, another comment, `NaN` or an infinity, a repeated label, a `# TYPE` that would make the library rename
a series read) makes it give up, and the caller reads the text with the library instead. So where it answers,
it answers what the library would (`tests/exporter/test_modelmesh_text_fast.py` checks that on generated
bodies with hypothesis); lines of the other series are skipped unread, as before.

The text is read by regular expressions in C, a piece of `SCAN_CHARS` per call; a sample's labels become the
sorted key the exporter keeps per series (`Labels`) once per label text, not once per read: the same series come
back every read.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterator, Sequence
from itertools import chain
from typing import Any, Final, TypeVar

T = TypeVar("T")
Labels = tuple[tuple[str, str], ...]
"""A series' labels, sorted, as a hashable key."""

_NAME: Final = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL_NAME: Final = r"(?!__)[a-zA-Z_][a-zA-Z0-9_]*"
"""A label name the library takes (`__`: reserved, refused)."""
_LABEL_VALUE: Final = r'[^"\\\n]*(?:\\[\\"n][^"\\\n]*)*'
"""A label value's text: no quote, backslash or newline but in the three escapes (unrolled: one character class
per run)."""
_LABEL: Final = rf'{_LABEL_NAME}="{_LABEL_VALUE}"'
_NUMBER: Final = r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+|)"
"""A plain decimal number: what Java's `Double.toString` writes for a finite value, and what the library reads
to the same float (its integers through `int`, of which only `-0` differs: `NarrowReader.series`). Written with
branches rather than optional groups, which cost the regular-expression engine more per line."""
_TYPES: Final = "counter|gauge|histogram|summary|untyped"
_LABEL_TEXT: Final = re.compile(rf"(?:{_LABEL},)*(?:{_LABEL})?")
"""Labels as simpleclient writes them (a comma after each), or as `prometheus_client` does (between them)."""
_PAIR: Final = re.compile(rf'([a-zA-Z_][a-zA-Z0-9_]*)="({_LABEL_VALUE})"')
_ESCAPE: Final = re.compile(r'\\[\\"n]')
_UNESCAPED: Final = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
SCAN_CHARS: Final = 1 << 18
"""How much text one regular-expression call reads (about 2 ms here). The call holds Python's lock throughout:
over the largest body read (32 MiB, a server that ignores `name[]`) one call held it 0.2-0.3 s, five times that
under the sidecar's CPU limit, and the exporter's event loop, though the parse runs in a thread, answered no
/healthz or /metrics meanwhile. Between calls the lock passes (Python's switch interval is 5 ms)."""
_KEYS_KEPT: Final = 4
"""The label keys kept from read to read, as a multiple of the series one read holds (`NarrowReader._keys`)."""


class TooManySeries(Exception):
    """A body with more series of those read than the caller keeps (`NarrowReader.series`' `max_series`)."""


class NarrowReader:
    """Reads the samples named `names` from an exposition text, or says it cannot (None) and the library must.

    `may_be_negative`: the names whose negative values the caller takes; any other negative value, as any
    non-finite one, makes it give up, so that the caller's own checks see the library's values and say what
    they say of them."""

    def __init__(self, names: Collection[str], may_be_negative: Collection[str] = ()) -> None:
        read = "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))
        # A sample read, its label text taken whole (up to the line's last `} `: a number holds neither) and
        # checked on its own the first time it is seen (`_key`): a regular expression checking every label on
        # every line cost four times as much as finding the lines.
        sample = rf"({read})(?:\{{([^\n]*)\}} | )({_NUMBER})"
        comment = (rf"# HELP {_NAME}(?: [^\n]*)?"
                   # the library renames a counter's samples of its own name `_total` (not those read: they would
                   # be lost), and fails on a counter named `_total` alone (no family name left)
                   rf"|# TYPE (?!(?:{read}|_total) counter\n){_NAME} (?:{_TYPES})")
        # Any other line the library would read (`modelmesh_text._READ_LINE`): this reader gives up.
        other = rf"(#|(?:{read})[{{ \t])[^\n]*"
        line = rf"(?:{sample}|{comment}|{other})(?=\n)"
        self._first = re.compile(line)
        # Every line after the first is found with its newline as a literal prefix, so that the search skips
        # the lines of the other series fast.
        self._next = re.compile(rf"\n{line}")
        self._may_be_negative = frozenset(may_be_negative)
        self._keys: dict[str, Labels] = {}
        """Label text → sorted labels, from the reads before: per-model series come back every read."""
        self._shared: dict[object, Any] = {}
        """The label names, values and (name, value) pairs of those labels, each held once (`_key`)."""

    def series(self, text: str | Sequence[str], max_series: int | None = None,
               ) -> dict[str, dict[Labels, float]] | None:
        """The series read: sample name → the labels of each of its series, sorted, → its value, in the text's
        order of first appearance; None when a line the library would read is not in the shapes above, a series
        is written twice, or a value is one the caller's checks would refuse (not finite, or negative but for
        `may_be_negative`).

        `text` ends with a newline (the caller refuses a body that does not: cut off); it may come in pieces, each
        of whole lines (`exporter.body_pieces`), read in turn as if joined. Past `max_series` series it stops
        reading: TooManySeries."""
        lines = chain.from_iterable(self._lines((text,) if isinstance(text, str) else text))
        keys, shared = self._keys, self._shared
        series: dict[str, dict[Labels, float]] = {}
        count = 0
        for name, label_text, number, other in lines:
            if not name:
                if other:
                    return None
                continue  # a comment
            value = float(number)
            if not 0.0 <= value < math.inf:
                if not -math.inf < value < 0.0 or name not in self._may_be_negative:
                    return None
            elif not value and number[1:].isdigit():
                value = 0.0  # the library reads `-0` as the integer 0
            key = keys.get(label_text)
            if key is None:
                key = _key(label_text, shared)
                if key is None:
                    return None
                keys[label_text] = key
            values = series.get(name)
            if values is None:
                values = series[name] = {}
            elif key in values:
                return None  # a series written twice: the library's path refuses the body
            values[key] = value
            count += 1
            if max_series is not None and count > max_series:
                raise TooManySeries(count)
        if len(keys) > _KEYS_KEPT * count + 64:
            keys.clear()  # series gone (a restart of ModelMesh): the next read keeps only its own
            shared.clear()
        return series

    def _lines(self, pieces: Sequence[str]) -> Iterator[list[tuple[str, str, str, str]]]:
        """The lines the patterns find, a list per regular-expression call, piece after piece (each beginning at a
        line's start): a piece of `SCAN_CHARS` at a time, as each call holds Python's lock, and only one piece's
        lines held at once (all of them at once, as four strings each, were 80 MiB of the 32 MiB body of 80,000
        models' series: an outside review's sidecar OOM-killed)."""
        for text in pieces:
            first = self._first.match(text)
            if first is not None:
                name, label_text, number, other = first.groups("")
                yield [(name, label_text, number, other)]
            start, end = 0, len(text)
            while start < end - 1:
                cut = text.find("\n", start + SCAN_CHARS)
                stop = end if cut < 0 else cut + 1  # the piece ends after a line's newline ...
                yield self._next.findall(text, start, stop)
                start = stop - 1  # ... and the next begins at that newline, which `_next` begins with


def _key(label_text: str, shared: dict[object, Any]) -> Labels | None:
    """The sorted labels of a label text; None when it is not in the shapes above, or names a label twice (the
    library refuses the line).

    Its strings and pairs are those of `shared` where an equal one is there: a model's id is in the labels of each
    of its four series, and the label names and most values (`code="OK"`, `vModelId=""`) in every model's. Held
    once, the labels of 80,000 models' series are a third of what they were (an outside review's sidecar was
    OOM-killed holding a copy of each in each series' key)."""
    if _LABEL_TEXT.fullmatch(label_text) is None:
        return None
    pairs = _PAIR.findall(label_text)
    if "\\" in label_text:
        pairs = [(label, _unescape(value)) for label, value in pairs]
    labels = dict(pairs)
    if len(labels) != len(pairs):
        return None
    return tuple([_one(shared, (_one(shared, name), _one(shared, value))) for name, value in sorted(labels.items())])


def _one(shared: dict[object, Any], item: T) -> T:
    """`item`, or the equal one `shared` holds already."""
    return shared.setdefault(item, item)  # type: ignore[no-any-return]


def _unescape(value: str) -> str:
    return _ESCAPE.sub(lambda escape: _UNESCAPED[escape[0]], value) if "\\" in value else value
