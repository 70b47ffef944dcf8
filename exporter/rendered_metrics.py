"""The `/metrics` body, with the part that changes only at a reading rendered (and gzipped) once per reading.

Most of a busy pod's exposition is ModelMesh's: one `modelmesh_pod_model_last_served_timestamp_seconds` series per
model served within the horizon (218 KB at 2,000 models). It changes only when the exporter reads ModelMesh, yet
every scrape formatted and gzipped all of it again: 12.7 ms of CPU a scrape at 2,000 models, so two scrapers every
100 ms kept the sidecar's 200m CPU limit throttled (half the scrapes unanswered, /healthz at 135 ms).

So the body is cut in two, in the registry's order: a steady head (collectors whose families are a function of
their last reading, rendered once per reading and format) and a live tail rendered per scrape (the exporter's clock,
the process's CPU, connection counts, the GPU's few series: all small, and some change at every scrape, so none is
served stale). The pod's family stays last, where the adapter's fast reader looks for it. The body is byte for byte
what rendering the whole registry gives. Gzipped, the head's compressed bytes and the compressor's state after them
are kept (`zlib` `copy()`), and each scrape compresses only the tail: one ordinary gzip stream, as before.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

Encoder = Callable[[Collector], bytes]
"""prometheus_client's formatter for one negotiated format (`exposition.choose_encoder`)."""

OPENMETRICS_END: Final = b"# EOF\n"
"""What OpenMetrics' formatter ends every body with: cut from the head, which the tail continues."""

MAX_FORMATS: Final = 4
"""Formats whose head is kept at once (text, OpenMetrics, a version or escaping asked for): a client naming a new
format at every scrape costs a render each, as before, and no memory beyond this."""


@dataclass(frozen=True)
class Steady:
    """A collector whose families change only with its readings: `reading()` answers the same object (`is`) until
    the collector takes a new reading, and another one from then on."""

    collector: Collector
    reading: Callable[[], object]


class _Families:
    """Some collectors' families in order: what prometheus_client's formatters take as a registry."""

    def __init__(self, collectors: Iterable[Collector]) -> None:
        self._collectors = tuple(collectors)

    def collect(self) -> Iterator[Metric]:
        for collector in self._collectors:
            yield from collector.collect()


@dataclass
class _Head:
    """The steady head in one format, as of the readings in `readings`."""

    readings: tuple[object, ...]
    text: bytes
    gzip_level: int
    _gzipped: bytes | None = None
    _compressor: zlib._Compress | None = field(default=None, repr=False)

    def gzip(self, tail: bytes) -> bytes:
        """The gzip stream of `text + tail`: the head compressed at the first call, only the tail after it."""
        if self._compressor is None:
            self._compressor = zlib.compressobj(self.gzip_level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
            self._gzipped = self._compressor.compress(self.text)
        assert self._gzipped is not None
        compressor = self._compressor.copy()
        return self._gzipped + compressor.compress(tail) + compressor.flush()


class RenderedMetrics:
    """The exposition of `steady` then `live`, the steady collectors rendered once per reading and format.

    `renders` counts the steady head's renders (the bench and the tests read it)."""

    def __init__(self, steady: Sequence[Steady], live: Sequence[Collector], gzip_level: int = 6) -> None:
        self._steady = tuple(steady)
        self._head_families = _Families(part.collector for part in self._steady)
        self._live = _Families(live)
        self._gzip_level = gzip_level
        self._heads: dict[str, _Head] = {}
        self.renders = 0

    def body(self, encoder: Encoder, content_type: str, gzip: bool) -> bytes:
        """The body in the format of `content_type` (made by `encoder`), gzipped if `gzip`."""
        head = self._head(encoder, content_type)
        tail = encoder(self._live)
        return head.gzip(tail) if gzip else head.text + tail

    def _head(self, encoder: Encoder, content_type: str) -> _Head:
        readings = tuple(part.reading() for part in self._steady)
        head = self._heads.get(content_type)
        if head is not None and len(head.readings) == len(readings) and all(
                kept is now for kept, now in zip(head.readings, readings, strict=True)):
            return head
        self.renders += 1
        text = encoder(self._head_families) if self._steady else b""
        if text.endswith(OPENMETRICS_END):
            text = text[:-len(OPENMETRICS_END)]
        head = _Head(readings, text, self._gzip_level)
        self._heads.pop(content_type, None)
        while len(self._heads) >= MAX_FORMATS:
            del self._heads[next(iter(self._heads))]
        self._heads[content_type] = head
        return head
