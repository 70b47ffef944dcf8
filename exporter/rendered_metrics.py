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

The head is rendered, and compressed, in a worker thread: at 30,000 models that is some 360 ms of CPU (more under
the sidecar's 200m limit), for which /healthz (the liveness probe) and every other scrape waited on the event loop.
Scrapes of a format whose head is being rendered wait for that one render, not a render each. A steady collector's
`collect` must therefore be safe in a thread while the loop takes its next reading (the ModelMesh collector's
reads a frozen snapshot, `exporter.modelmesh_families`). The tail stays on the loop: small, and live.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from exporter.worker_thread import in_worker_thread

Encoder = Callable[[Collector], bytes]
"""prometheus_client's formatter for one negotiated format (`exposition.choose_encoder`)."""

OPENMETRICS_END: Final = b"# EOF\n"
"""What OpenMetrics' formatter ends every body with: cut from the head, which the tail continues."""

MAX_FORMATS: Final = 4
"""Formats whose head is kept at once (text, OpenMetrics, a version or escaping asked for): a client naming a new
format at every scrape costs a render each, as before, and no memory beyond this."""


GZIP_ON_LOOP_BYTES: Final = 64 << 10
"""A head this small (64 KiB, some 600 models) is compressed on the event loop, in about a millisecond: less than
the hop to a thread costs. A larger one is compressed in a worker thread (one of 3 MB, 30,000 models: some 50 ms)."""


@dataclass(frozen=True)
class Steady:
    """A collector whose families change only with its readings: `reads()` counts them (the head is rendered again
    when it moves). Its `collect` is called in a worker thread, and must read only what no reading changes after
    (`exporter.modelmesh_families`)."""

    collector: Collector
    reads: Callable[[], int]


class _Families:
    """Some collectors' families in order: what prometheus_client's formatters take as a registry."""

    def __init__(self, collectors: Iterable[Collector]) -> None:
        self._collectors = tuple(collectors)

    def collect(self) -> Iterator[Metric]:
        for collector in self._collectors:
            yield from collector.collect()


def _gzip_start(text: bytes, level: int) -> tuple[bytes, zlib._Compress]:
    """`text` compressed as the start of one gzip stream, and the compressor's state after it."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return compressor.compress(text), compressor


class _Head:
    """The steady head in one format, as of the readings counted in `reads`."""

    def __init__(self, reads: tuple[int, ...], text: bytes, gzip_level: int) -> None:
        self.reads = reads
        self.text = text
        self._gzip_level = gzip_level
        self._gzip_started: tuple[bytes, zlib._Compress] | None = None
        self._gzipping: asyncio.Future[tuple[bytes, zlib._Compress]] | None = None

    async def gzip(self, tail: bytes) -> bytes:
        """The gzip stream of `text + tail`: the head compressed once (in a worker thread where it is large), only
        the tail at each call."""
        if self._gzip_started is None:
            if len(self.text) <= GZIP_ON_LOOP_BYTES:
                self._gzip_started = _gzip_start(self.text, self._gzip_level)
            else:
                if self._gzipping is None:
                    self._gzipping = asyncio.ensure_future(
                        in_worker_thread(_gzip_start, self.text, self._gzip_level))
                self._gzip_started = await asyncio.shield(self._gzipping)
        gzipped, compressor = self._gzip_started
        compressor = compressor.copy()
        return gzipped + compressor.compress(tail) + compressor.flush()


class RenderedMetrics:
    """The exposition of `steady` then `live`, the steady collectors rendered once per reading and format, in a
    worker thread.

    `renders` counts the steady head's renders (the bench and the tests read it)."""

    def __init__(self, steady: Sequence[Steady], live: Sequence[Collector], gzip_level: int = 6) -> None:
        self._steady = tuple(steady)
        self._head_families = _Families(part.collector for part in self._steady)
        self._live = _Families(live)
        self._gzip_level = gzip_level
        self._heads: dict[str, _Head] = {}
        self._rendering: dict[str, tuple[tuple[int, ...], asyncio.Future[_Head]]] = {}
        """Per format, the render under way and the readings it renders: the scrapes that need those wait for it,
        and do not render again."""
        self.renders = 0

    async def body(self, encoder: Encoder, content_type: str, gzip: bool) -> bytes:
        """The body in the format of `content_type` (made by `encoder`), gzipped if `gzip`."""
        head = await self._head(encoder, content_type)
        tail = encoder(self._live)
        return await head.gzip(tail) if gzip else head.text + tail

    async def _head(self, encoder: Encoder, content_type: str) -> _Head:
        reads = tuple(part.reads() for part in self._steady)
        head = self._heads.get(content_type)
        if head is not None and head.reads == reads:
            return head
        if not self._steady:  # nothing steady: an empty head, no thread
            return self._keep(content_type, _Head(reads, b"", self._gzip_level))
        under_way = self._rendering.get(content_type)
        if under_way is not None and under_way[0] == reads:
            rendering = under_way[1]
        else:
            self.renders += 1
            rendering = asyncio.ensure_future(in_worker_thread(self._render, encoder, reads))
            self._rendering[content_type] = (reads, rendering)
            rendering.add_done_callback(lambda done: self._rendered(content_type, done))
        # Rendered from readings at least as new as `reads` (one may come while it renders): served as is, and
        # rendered again at the next scrape if one came. Shielded: a scraper that goes away stops no one's render.
        return await asyncio.shield(rendering)

    def _render(self, encoder: Encoder, reads: tuple[int, ...]) -> _Head:
        """The head's text as of `reads` or a later reading (in a worker thread)."""
        text = encoder(self._head_families)
        if text.endswith(OPENMETRICS_END):
            text = text[:-len(OPENMETRICS_END)]
        return _Head(reads, text, self._gzip_level)

    def _rendered(self, content_type: str, rendering: asyncio.Future[_Head]) -> None:
        """Keep a finished render's head (a failed one is raised in the scrapes that wait for it, and kept by none)."""
        under_way = self._rendering.get(content_type)
        if under_way is not None and under_way[1] is rendering:
            del self._rendering[content_type]
        if rendering.cancelled() or rendering.exception() is not None:
            return
        head = rendering.result()
        kept = self._heads.get(content_type)
        if kept is None or kept.reads <= head.reads:  # reads only grow: never an older render over a newer one
            self._keep(content_type, head)

    def _keep(self, content_type: str, head: _Head) -> _Head:
        self._heads.pop(content_type, None)
        while len(self._heads) >= MAX_FORMATS:
            del self._heads[next(iter(self._heads))]
        self._heads[content_type] = head
        return head
